//! The real engine's volumes: a directory per PersistentVolumeClaim, shared by the pods that
//! mount it and kept when a pod is replaced (so a replacement finds the models on disk), and
//! a directory per emptyDir pod, removed with the pod (so its models are lost, as in the
//! study's first cloud run). Models are put on a volume as hard links of the peers' imported
//! store (a copy where links are not possible): nothing is downloaded.

use std::path::{Path, PathBuf};

/// The volumes of one lab, under `root`.
#[derive(Debug)]
pub struct Volumes {
    pub root: PathBuf,
}

/// Copy the tree `from` to `to` as hard links (plain copies across file systems).
pub fn link_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            link_tree(&src, &dst)?;
        } else if !dst.exists() && std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Volumes {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The directory of PVC `claim` in `ns`; true when it was created now (empty).
    pub fn claim(&self, ns: &str, claim: &str) -> std::io::Result<(PathBuf, bool)> {
        make(self.root.join("pvc").join(safe(ns)).join(safe(claim)))
    }

    /// The emptyDir `volume` of pod `uid` (kept across its container's restarts, never
    /// shared with another pod); true when it was created now (empty).
    pub fn empty_dir(&self, uid: &str, volume: &str) -> std::io::Result<(PathBuf, bool)> {
        make(
            self.root
                .join("emptydir")
                .join(safe(uid))
                .join(safe(volume)),
        )
    }

    /// Remove pod `uid`'s emptyDirs (the pod is gone).
    pub fn remove_pod(&self, uid: &str) {
        let _ = std::fs::remove_dir_all(self.root.join("emptydir").join(safe(uid)));
    }
}

fn make(dir: PathBuf) -> std::io::Result<(PathBuf, bool)> {
    if dir.is_dir() {
        return Ok((dir, false));
    }
    std::fs::create_dir_all(&dir)?;
    Ok((dir, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_keeps_its_files_and_an_emptydir_is_per_pod() {
        let t = tempfile::tempdir().unwrap();
        let seed = t.path().join("seed");
        std::fs::create_dir_all(seed.join("blobs")).unwrap();
        std::fs::write(seed.join("blobs/sha256-1"), b"model").unwrap();
        let v = Volumes::new(t.path().join("lab"));
        let (d, fresh) = v.claim("ns", "models").unwrap();
        assert!(fresh);
        link_tree(&seed, &d.join("models")).unwrap();
        assert_eq!(
            std::fs::read(d.join("models/blobs/sha256-1")).unwrap(),
            b"model"
        );
        // What a pod writes on the claim is there for the next pod.
        std::fs::write(d.join("models/blobs/sha256-2"), b"pulled").unwrap();
        let (again, fresh) = v.claim("ns", "models").unwrap();
        assert_eq!((again.as_path(), fresh), (d.as_path(), false));
        assert!(again.join("models/blobs/sha256-2").exists());
        let (e, fresh) = v.empty_dir("uid-1", "models").unwrap();
        assert!(fresh);
        assert_eq!(std::fs::read_dir(&e).unwrap().count(), 0);
        let (other, fresh) = v.empty_dir("uid-2", "models").unwrap();
        assert!(fresh && other != e);
        v.remove_pod("uid-1");
        assert!(!e.exists() && other.exists());
    }
}
