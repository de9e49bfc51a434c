//! `readygap report --format html|svg|markdown` of three shipped recordings and the
//! study's CSVs: the page is self-contained (no reference outside the file), its markup and
//! the SVG are well-formed XML, its numbers are `report --format json`'s; headless Chromium
//! (Debian `chromium`) opens it, takes a screenshot, and its DOM has one bar group per
//! trial, a mean bar per input and the axis labels.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Three of the shipped recordings (the series and OOM demos) and the study's results
/// directory.
fn inputs() -> Vec<PathBuf> {
    // The checks below compare every trial's marks with `readygap export`; the verdict demos
    // (a stalled rollout has no marks past T0) are rendered by `report` like any recording
    // but not held to these comparisons.
    let mut v: Vec<PathBuf> = ["cold-3b-series", "overlap-oom", "warm-3b-series"]
        .iter()
        .map(|n| repo().join("recordings").join(format!("{n}.jsonl")))
        .collect();
    for p in &v {
        assert!(p.is_file(), "{} is missing", p.display());
    }
    let lab = repo().join("data/published/results");
    assert!(
        lab.is_dir(),
        "{} is missing: the published results are part of the repository",
        lab.display()
    );
    v.push(lab);
    v
}

/// `readygap report ARGS FILES` (its warnings off), which must succeed.
fn readygap(args: &[&str], files: &[PathBuf]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_readygap"));
    cmd.args(args).args(files);
    if args[0] == "report" {
        cmd.args(["--warnings", "false"]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "readygap {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json_report(files: &[PathBuf]) -> serde_json::Value {
    serde_json::from_slice(&readygap(&["report", "--format", "json"], files).stdout).unwrap()
}

pub(crate) fn html_report(dir: &Path, files: &[PathBuf]) -> PathBuf {
    let out = dir.join("report.html");
    readygap(
        &["report", "--format", "html", "-o", out.to_str().unwrap()],
        files,
    );
    out
}

/// One element of a parsed document: name, attributes, text inside, children's indices.
#[derive(Debug, Default, Clone)]
struct El {
    name: String,
    attrs: BTreeMap<String, String>,
    text: String,
    parent: Option<usize>,
}

/// A document as a flat list of elements (index 0 is the root).
struct Doc {
    els: Vec<El>,
}

impl Doc {
    fn has_class(&self, i: usize, class: &str) -> bool {
        self.els[i]
            .attrs
            .get("class")
            .is_some_and(|c| c.split_whitespace().any(|w| w == class))
    }
    fn with_class<'a>(&'a self, class: &'a str) -> impl Iterator<Item = usize> + 'a {
        (0..self.els.len()).filter(move |i| self.has_class(*i, class))
    }
    fn inside(&self, mut i: usize, ancestor: usize) -> bool {
        while let Some(p) = self.els[i].parent {
            if p == ancestor {
                return true;
            }
            i = p;
        }
        false
    }
}

/// Our own page through a real XML parser: it is written as well-formed markup.
fn parse_xml(text: &str) -> Doc {
    let opt = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let xml = roxmltree::Document::parse_with_options(text, opt)
        .unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
    let mut els = vec![El::default()];
    let mut index = std::collections::HashMap::new();
    for n in xml.descendants().filter(|n| n.is_element()) {
        let parent = n
            .ancestors()
            .skip(1)
            .find(|a| a.is_element())
            .and_then(|a| index.get(&a.id()).copied())
            .or(Some(0));
        index.insert(n.id(), els.len());
        els.push(El {
            name: n.tag_name().name().to_string(),
            attrs: n
                .attributes()
                .map(|a| (a.name().to_string(), a.value().to_string()))
                .collect(),
            text: n
                .children()
                .filter(|c| c.is_text())
                .filter_map(|c| c.text())
                .collect(),
            parent,
        });
    }
    Doc { els }
}

/// Chromium's serialised DOM (HTML syntax): a small tag reader. Every element but the
/// HTML void ones has an end tag in that serialisation, attributes are double-quoted.
fn parse_dom(text: &str) -> Doc {
    const VOID: [&str; 13] = [
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr",
    ];
    let unescape = |s: &str| {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&nbsp;", "\u{a0}")
            .replace("&amp;", "&")
    };
    let mut els = vec![El::default()];
    let mut stack = vec![0usize];
    let mut rest = text;
    while let Some(lt) = rest.find('<') {
        let top = *stack.last().unwrap();
        els[top].text.push_str(&unescape(&rest[..lt]));
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            let end = rest.find("-->").expect("comment end");
            rest = &rest[end + 3..];
            continue;
        }
        if rest.starts_with("<!") {
            rest = &rest[rest.find('>').unwrap() + 1..];
            continue;
        }
        if let Some(close) = rest.strip_prefix("</") {
            let end = close.find('>').unwrap();
            let name = &close[..end];
            let top = stack.pop().expect("balanced");
            assert_eq!(els[top].name, name, "end tag matches");
            rest = &close[end + 1..];
            continue;
        }
        // A start tag: name, then name="value" pairs (quoted values may hold '>').
        let mut i = 1;
        let b = rest.as_bytes();
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' && b[i] != b'/' {
            i += 1;
        }
        let name = rest[1..i].to_string();
        let mut attrs = BTreeMap::new();
        loop {
            while b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b[i] == b'>' || b[i] == b'/' {
                break;
            }
            let start = i;
            while !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'>' {
                i += 1;
            }
            let key = rest[start..i].to_string();
            let mut value = String::new();
            if b[i] == b'=' {
                assert_eq!(b[i + 1], b'"', "attribute {key} is double-quoted");
                let end = rest[i + 2..].find('"').unwrap() + i + 2;
                value = unescape(&rest[i + 2..end]);
                i = end + 1;
            }
            attrs.insert(key, value);
        }
        let self_closing = b[i] == b'/';
        let end = rest[i..].find('>').unwrap() + i;
        let parent = *stack.last().unwrap();
        els.push(El {
            name: name.clone(),
            attrs,
            text: String::new(),
            parent: Some(parent),
        });
        if !(self_closing || VOID.contains(&name.as_str())) {
            stack.push(els.len() - 1);
        }
        rest = &rest[end + 1..];
        // Raw text elements.
        if name == "style" || name == "script" {
            let close = format!("</{name}>");
            let end = rest.find(&close).unwrap();
            let me = *stack.last().unwrap();
            els[me].text.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    Doc { els }
}

fn num(s: &str) -> f64 {
    s.parse()
        .unwrap_or_else(|_| panic!("{s:?} is not a number"))
}

/// The page's numbers are the JSON report's: per input file a bar group with one bar per
/// trial and a mean bar at the statistics' means; the statistics table's cells are the
/// means, medians, p95s, mins and maxes; axis labels are there.
fn check_numbers(doc: &Doc, json: &serde_json::Value, min_files: usize, min_drawn: usize) {
    let files = json["files"].as_array().unwrap();
    assert!(
        files.len() >= min_files,
        "{} inputs, expected {min_files}",
        files.len()
    );
    let mut drawn = 0;
    for f in files {
        let path = f["path"].as_str().unwrap();
        let m = &f["metrics"];
        let mean = |k: &str| m[k]["mean"].as_f64();
        let groups: Vec<usize> = doc
            .with_class("file-bars")
            .filter(|i| doc.els[*i].attrs.get("data-file").map(String::as_str) == Some(path))
            .collect();
        let trials = f["trials"].as_u64().unwrap() as usize;
        if trials == 0 && mean("k8s_recovery").is_none() {
            assert!(groups.is_empty(), "{path}: nothing to draw");
            continue;
        }
        assert_eq!(groups.len(), 1, "{path}: one bar group per input");
        let g = groups[0];
        let bars: Vec<usize> = doc
            .with_class("trial-bar")
            .filter(|i| doc.inside(*i, g))
            .collect();
        assert_eq!(bars.len(), trials, "{path}: one bar per trial");
        let mut numbers: Vec<u64> = bars
            .iter()
            .map(|i| num(&doc.els[*i].attrs["data-trial"]) as u64)
            .collect();
        numbers.dedup();
        assert_eq!(numbers.len(), trials, "{path}: distinct trials");
        let means: Vec<usize> = doc
            .with_class("mean-bar")
            .filter(|i| doc.inside(*i, g))
            .collect();
        let has_mean = ["k8s_recovery", "runtime_recovery", "functional_recovery"]
            .iter()
            .any(|k| mean(k).is_some());
        assert_eq!(means.len(), has_mean as usize, "{path}: one mean bar");
        if let Some(&mb) = means.first() {
            let a = &doc.els[mb].attrs;
            let at = |k: &str| a.get(k).map(|v| num(v));
            assert_eq!(at("data-t1"), mean("k8s_recovery"), "{path} T1");
            assert_eq!(at("data-t2"), mean("runtime_recovery"), "{path} T2");
            assert_eq!(at("data-t4"), mean("functional_recovery"), "{path} T4");
            let t3 = mean("functional_recovery")
                .zip(mean("inference_wall"))
                .map(|(a, b)| a - b);
            assert_eq!(at("data-t3"), t3, "{path} T3");
            // Bars carry visible text: the mean's label.
            assert!(
                doc.els
                    .iter()
                    .enumerate()
                    .any(|(i, e)| doc.inside(i, mb) && e.text.starts_with("mean of ")),
                "{path}: the mean bar is labelled"
            );
        }
        drawn += 1;

        // The statistics table of this file's section.
        let section = (0..doc.els.len())
            .find(|i| {
                doc.els[*i].name == "section"
                    && doc.els[*i].attrs.get("data-path").map(String::as_str) == Some(path)
            })
            .unwrap_or_else(|| panic!("{path}: a section"));
        for (metric, s) in m.as_object().unwrap() {
            let row = (0..doc.els.len())
                .find(|i| {
                    doc.inside(*i, section) && doc.els[*i].attrs.get("data-metric") == Some(metric)
                })
                .unwrap_or_else(|| panic!("{path}: row {metric}"));
            for stat in ["mean", "median", "p95", "min", "max"] {
                let cell = (0..doc.els.len())
                    .find(|i| {
                        doc.inside(*i, row)
                            && doc.els[*i].attrs.get("data-stat").map(String::as_str) == Some(stat)
                    })
                    .unwrap();
                let want = s[stat].as_f64().unwrap();
                assert_eq!(num(&doc.els[cell].attrs["data-value"]), want);
                let shown = num(doc.els[cell].text.trim());
                let decimals = if metric == "memory_after" {
                    0.5
                } else {
                    0.0005
                };
                assert!(
                    (shown - want).abs() <= decimals + 1e-9,
                    "{path} {metric} {stat}: shown {shown}, json {want}"
                );
            }
        }
    }
    assert!(
        drawn >= min_drawn,
        "bars for {drawn} inputs, expected {min_drawn}"
    );
    let labels: Vec<&str> = doc
        .with_class("axis-label")
        .map(|i| doc.els[i].text.as_str())
        .collect();
    assert!(
        labels
            .iter()
            .any(|l| l.contains("seconds since T0 (replacement requested)")),
        "{labels:?}"
    );
    let ticks: Vec<&str> = doc
        .with_class("tick")
        .map(|i| doc.els[i].text.as_str())
        .collect();
    assert!(ticks.contains(&"0 s"), "{ticks:?}");
}

/// Every trial's bar against `readygap export` of its file (recordings and study CSVs).
fn check_against_exports(doc: &Doc, dir: &Path, json: &serde_json::Value) {
    let mut exported = 0;
    for f in json["files"].as_array().unwrap() {
        if f["trials"].as_u64().unwrap() > 0 {
            check_trials_against_export(doc, dir, Path::new(f["path"].as_str().unwrap()));
            exported += 1;
        }
    }
    assert!(exported >= 15, "{exported} files compared");
}

/// Each trial's bar at the marks of `readygap export` of its file (the study's CSV columns,
/// whole milliseconds).
fn check_trials_against_export(doc: &Doc, dir: &Path, recording: &Path) {
    let csv = dir.join("export.csv");
    readygap(
        &[
            "export",
            recording.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[],
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let cols = [
        col("run"),
        col("t0_delete_ms"),
        col("t1_k8s_ready_ms"),
        col("t2_runtime_ms"),
        col("t3_inference_start_ms"),
        col("t4_inference_done_ms"),
    ];
    let path = recording.display().to_string();
    let g = doc
        .with_class("file-bars")
        .find(|i| doc.els[*i].attrs.get("data-file") == Some(&path))
        .unwrap_or_else(|| panic!("{path}: bars"));
    let mut checked = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let run = f[cols[0]];
        let Some(bar) = doc
            .with_class("trial-bar")
            .find(|i| doc.inside(*i, g) && doc.els[*i].attrs["data-trial"] == run)
        else {
            // Only a trial still open when the recording ended has no bar (the statistics
            // do not count it either): it never reached T1.
            assert!(
                f[cols[2]].is_empty(),
                "{path}: no bar for run {run}: {line}"
            );
            continue;
        };
        let t0: f64 = num(f[cols[1]]);
        for k in 1..=4 {
            let csv_value = f[cols[k + 1]];
            let a = &doc.els[bar].attrs;
            // A failed inference's end is in the T4 column of the study's CSV; the bar
            // draws it as the end of its failed tail.
            let mark = a.get(&format!("data-t{k}"));
            let drawn = match (csv_value.is_empty(), mark) {
                (false, None) if k == 4 => a.get("data-failed-at"),
                _ => mark,
            };
            match (csv_value.is_empty(), drawn) {
                (true, None) => {}
                (false, Some(d)) => {
                    let want = (num(csv_value) - t0) / 1000.0;
                    assert!(
                        (num(d) - want).abs() <= 0.001,
                        "{path} run {run} T{k}: drawn {d}, exported {want}"
                    );
                    checked += 1;
                }
                (empty, drawn) => {
                    panic!("{path} run {run} T{k}: csv empty {empty}, drawn {drawn:?}")
                }
            }
        }
    }
    assert!(checked >= 1, "{path}: {checked} marks compared");
}

/// Attributes and CSS that could load something: none may leave the file.
fn check_self_contained(doc: &Doc, raw: &str) {
    for e in &doc.els {
        assert!(
            ![
                "script", "link", "img", "iframe", "object", "embed", "image", "use"
            ]
            .contains(&e.name.as_str()),
            "no <{}> element",
            e.name
        );
        for (k, v) in &e.attrs {
            let k = k.to_ascii_lowercase();
            if k == "href" || k.ends_with(":href") {
                assert!(v.starts_with('#'), "{k}={v:?} is a link inside the page");
            }
            assert!(
                ![
                    "src",
                    "srcset",
                    "action",
                    "formaction",
                    "poster",
                    "background"
                ]
                .contains(&k.as_str()),
                "{} has {k}={v:?}",
                e.name
            );
            if ["href", "src", "style"].contains(&k.as_str()) {
                assert!(
                    !v.contains("//") && !v.contains("http") && !v.contains("url("),
                    "{k}={v:?}"
                );
            }
        }
    }
    let lower = raw.to_ascii_lowercase();
    assert!(!lower.contains("@import"), "no CSS import");
    assert!(!lower.contains("url("), "no CSS url()");
    assert!(!lower.contains("src="), "no src attribute");
}

#[test]
fn the_html_report_is_self_contained_well_formed_and_has_the_json_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let files = inputs();
    let page = html_report(dir.path(), &files);
    let raw = std::fs::read_to_string(&page).unwrap();
    let doc = parse_xml(&raw);
    check_self_contained(&doc, &raw);
    let json = json_report(&files);
    check_numbers(&doc, &json, 18, 15);
    check_against_exports(&doc, dir.path(), &json);
    // Accessible: every chart has a title and a label; light and dark.
    let charts: Vec<usize> = (0..doc.els.len())
        .filter(|i| doc.els[*i].name == "svg")
        .collect();
    assert!(
        charts.len() >= 1 + 7 + 3,
        "bars, a memory chart per recorded trial, 3 bands"
    );
    for c in &charts {
        assert_eq!(
            doc.els[*c].attrs.get("role").map(String::as_str),
            Some("img")
        );
        assert!(doc.els[*c].attrs.contains_key("aria-label"));
        assert!(
            doc.els
                .iter()
                .any(|e| e.name == "title" && e.parent == Some(*c) && !e.text.is_empty())
        );
    }
    assert!(raw.contains("@media (prefers-color-scheme: dark)"));
    // The recordings' figures: memory against the limit, OOM marks where the
    // overlapping-residency kill happened, endpoint lanes, the environment.
    let oom = doc
        .with_class("verdict-mark")
        .filter(|i| {
            doc.els[*i].attrs.get("data-kind").map(String::as_str)
                == Some("overlapping_residency_oom")
        })
        .count();
    assert!(oom >= 2, "the kill in the memory chart and the band: {oom}");
    // The verdict counts of `report --format json` and the evidence of the kill.
    let counted = (0..doc.els.len())
        .filter(|i| {
            doc.els[*i].name == "tr"
                && doc.els[*i].attrs.get("data-verdict").map(String::as_str)
                    == Some("overlapping_residency_oom")
        })
        .count();
    assert_eq!(counted, 2, "a count row and an evidence row");
    assert!(doc.with_class("limit-line").count() >= 7);
    assert!(raw.contains("llama3.2:1b") && raw.contains("llama3.2:3b"));
    for lane in ["ready", "serving", "terminating", "resident"] {
        assert!(
            (0..doc.els.len())
                .any(|i| doc.els[i].attrs.get("data-lane").map(String::as_str) == Some(lane)),
            "lane {lane}"
        );
    }
    for k in [
        "context",
        "namespace",
        "target",
        "runtime",
        "model",
        "profile",
    ] {
        assert!(
            raw.contains(&format!("<th>{k}</th>")),
            "environment row {k}"
        );
    }
}

/// Every shipped recording, the verdict demos included, renders as a self-contained,
/// well-formed page whose numbers are `report --format json`'s (no lab data needed).
#[test]
fn every_shipped_recording_renders_self_contained_with_the_json_numbers() {
    let mut all: Vec<PathBuf> = std::fs::read_dir(repo().join("recordings"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    all.sort();
    assert!(all.len() >= 3, "{all:?}");
    let dir = tempfile::tempdir().unwrap();
    let page = html_report(dir.path(), &all);
    let raw = std::fs::read_to_string(&page).unwrap();
    let doc = parse_xml(&raw);
    check_self_contained(&doc, &raw);
    check_numbers(&doc, &json_report(&all), all.len(), 3);
}

#[test]
fn the_svg_and_the_markdown_figure() {
    let dir = tempfile::tempdir().unwrap();
    let files = inputs();
    let svg = String::from_utf8(readygap(&["report", "--format", "svg"], &files).stdout).unwrap();
    let doc = parse_xml(&svg);
    assert_eq!(doc.els[1].name, "svg");
    assert_eq!(
        doc.els.iter().filter(|e| e.name == "svg").count(),
        1,
        "one chart"
    );
    check_numbers_of_bars_only(&doc, &json_report(&files));

    let md = dir.path().join("results.md");
    readygap(
        &["report", "--format", "markdown", "-o", md.to_str().unwrap()],
        &files,
    );
    let text = std::fs::read_to_string(&md).unwrap();
    let link = text
        .lines()
        .find(|l| l.starts_with("!["))
        .unwrap_or_else(|| panic!("an image line in {text}"));
    assert!(link.ends_with("](results.svg)"), "{link}");
    let beside = std::fs::read_to_string(dir.path().join("results.svg")).unwrap();
    assert_eq!(beside, svg, "the linked SVG is `--format svg`");
    assert!(text.contains("| k8s_recovery | s |"), "the tables stay");
}

/// The standalone SVG holds only the bars: the per-file sections are the page's.
fn check_numbers_of_bars_only(doc: &Doc, json: &serde_json::Value) {
    for f in json["files"].as_array().unwrap() {
        let trials = f["trials"].as_u64().unwrap() as usize;
        if trials == 0 {
            continue;
        }
        let path = f["path"].as_str().unwrap();
        let g = doc
            .with_class("file-bars")
            .find(|i| doc.els[*i].attrs.get("data-file").map(String::as_str) == Some(path))
            .unwrap_or_else(|| panic!("{path}"));
        let n = doc
            .with_class("trial-bar")
            .filter(|i| doc.inside(*i, g))
            .count();
        assert_eq!(n, trials, "{path}");
        let mean = doc
            .with_class("mean-bar")
            .find(|i| doc.inside(*i, g))
            .unwrap();
        assert_eq!(
            doc.els[mean].attrs.get("data-t1").map(|v| num(v)),
            f["metrics"]["k8s_recovery"]["mean"].as_f64()
        );
    }
}

/// Headless Chromium: `chromium` (Debian) or `READYGAP_CHROMIUM`.
fn chromium() -> PathBuf {
    let bin = std::env::var_os("READYGAP_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("chromium"));
    let ok = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        panic!(
            "{}: headless Chromium is not installed (apt-get install -y chromium); this peer test needs it (see .ci/run)",
            bin.display()
        );
    }
    bin
}

/// Run Chromium headless on `url` with `args`, waiting for it to exit (at most 120 s).
fn run_chromium(bin: &Path, profile: &Path, args: &[String], url: &str) -> Output {
    let child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = waiter.join().unwrap();
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The width and height a PNG's header gives.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

#[test]
#[ignore = "needs headless chromium (apt chromium)"]
fn chromium_renders_the_report_with_a_bar_per_trial_and_the_json_numbers() {
    let bin = chromium();
    let dir = tempfile::tempdir().unwrap();
    let files = inputs();
    let page = html_report(dir.path(), &files);
    let url = format!("file://{}", page.display());
    let profile = dir.path().join("profile");

    let shot = dir.path().join("report.png");
    run_chromium(
        &bin,
        &profile,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,1600".into(),
        ],
        &url,
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(png_size(&png), (1200, 1600));
    assert!(
        png.len() > 50_000,
        "a page with charts, not a blank one: {} bytes",
        png.len()
    );
    if let Some(keep) = std::env::var_os("READYGAP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    let out = run_chromium(&bin, &profile, &["--dump-dom".into()], &url);
    let dom = String::from_utf8(out.stdout).unwrap();
    let doc = parse_dom(&dom);
    // Chromium parsed the inline charts as SVG (its DOM has them with their shapes).
    assert!(doc.els.iter().filter(|e| e.name == "svg").count() >= 11);
    assert!(doc.els.iter().filter(|e| e.name == "rect").count() > 200);
    check_self_contained(&doc, &dom);
    let json = json_report(&files);
    check_numbers(&doc, &json, 18, 15);
    check_against_exports(&doc, dir.path(), &json);
}

/// The HTML report lists a failed trial's Kubernetes Events under its row of the Trials table
/// (issue 34), the ones that explain it first, warnings marked: on the shipped
/// aggressive-liveness recording the kubelet's `Unhealthy` with the probe's output and its
/// `Killing` for the failed liveness probe; a trial that neither failed nor has explaining
/// Events gets no list (the warm series).
#[test]
fn a_failed_trials_events_are_listed_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let page = html_report(
        dir.path(),
        &[repo().join("recordings/aggressive-liveness.jsonl")],
    );
    let raw = std::fs::read_to_string(&page).unwrap();
    let doc = parse_xml(&raw);
    let lists: Vec<usize> = doc
        .els
        .iter()
        .enumerate()
        .filter(|(_, e)| e.name == "tr" && e.attrs.contains_key("data-trial-events"))
        .map(|(i, _)| i)
        .collect();
    assert!(!lists.is_empty(), "an Events list under a trial: {raw}");
    let text = |i: usize| -> String {
        (0..doc.els.len())
            .filter(|j| *j == i || doc.inside(*j, i))
            .map(|j| doc.els[j].text.clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let first = text(lists[0]);
    let unhealthy = first.find("Unhealthy").expect("Unhealthy listed");
    assert!(first.contains("Liveness probe failed: command"), "{first}");
    let scheduled = first.find("Scheduled").expect("the normal Events too");
    assert!(unhealthy < scheduled, "the explaining Event first: {first}");
    assert!(
        doc.els.iter().enumerate().any(|(j, e)| e.name == "li"
            && doc.inside(j, lists[0])
            && e.attrs.get("class").is_some_and(|c| c == "warning")),
        "warnings marked"
    );
    // The warm series: no failed trial, no explaining Event, no list.
    let warm = html_report(
        dir.path(),
        &[repo().join("recordings/warm-3b-series.jsonl")],
    );
    let warm = std::fs::read_to_string(warm).unwrap();
    assert!(
        !warm.contains("data-trial-events"),
        "no Events list in the warm series"
    );
}
