//! The config file's `[nodes."PATTERN"]` tables: accepted next to the dashboard settings,
//! resolved per node name over the guess, and bad values refused with the pattern named.

use readygap_live::node::NodeAccess;
use readygap_live::node::config::NodeFacts;

#[test]
fn node_tables_resolve_and_bad_ones_are_named() {
    let text = r#"
theme = "light"
[nodes."lab-*"]
via = "local"
[nodes."gpu-1"]
via = "ssh://ops@10.0.0.7:2222"
"#;
    let file = readygap::config::parse(text, "cfg.toml").unwrap();
    let nodes = readygap::config::nodes_section(&file).unwrap();
    let facts = |name: &str| NodeFacts {
        name: name.into(),
        ..Default::default()
    };
    let (access, why) = nodes.resolve(&facts("lab-node-1")).unwrap();
    assert_eq!(access, NodeAccess::Local);
    assert!(why.contains("lab-*"), "{why}");
    let (access, _) = nodes.resolve(&facts("gpu-1")).unwrap();
    assert!(
        access.target().contains("ops@10.0.0.7"),
        "{}",
        access.target()
    );

    let bad = readygap::config::parse(
        "[nodes.\"x\"]\nvia = \"ssh\"\nhost = \"a;rm -rf /\"\n",
        "bad.toml",
    )
    .unwrap();
    let err = readygap::config::nodes_section(&bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[nodes.\"x\"]"), "{err}");
}
