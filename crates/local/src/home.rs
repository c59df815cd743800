//! The data directory of `handoff dev`: where its state survives a restart.
//!
//! A developer points Claude Code or Codex at `handoff dev` and expects the
//! handoffs, the kubeconfig and the printed MCP configs to work tomorrow.
//! So the control plane (etcd data, certificates), PostgreSQL's data, the
//! static dev tokens and the ports all live in one directory, reused on the
//! next start:
//!
//! ```text
//! <data-dir>/lock             held while a handoff dev runs (with its pid)
//! <data-dir>/state.json       versions, ports and dev tokens (mode 0600)
//! <data-dir>/control-plane/   etcd data, certificates, logs
//! <data-dir>/postgres/        PostgreSQL data and log
//! ```
//!
//! Two `handoff dev` on one directory would corrupt it, so the directory is
//! locked (an advisory lock the kernel drops when the process dies, even on
//! SIGKILL). A version change is checked before anything starts: etcd data
//! is only reused by the same minor versions of etcd and Kubernetes
//! ([`compatible`]), PostgreSQL data by the same major version
//! (`Postgres::start_kept`); otherwise the message says what to do.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The versions a data directory was made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataVersions {
    /// `vMAJOR.MINOR.PATCH` of kube-apiserver.
    pub kubernetes: String,
    /// `vMAJOR.MINOR.PATCH` of etcd.
    pub etcd: String,
}

/// Ports reused across restarts, so configs written once keep working.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevPorts {
    /// kube-apiserver (the kubeconfig's server).
    pub apiserver: u16,
    /// etcd's client port.
    pub etcd: u16,
    /// The MCP bridge (the MCP client configs' URL).
    pub bridge: u16,
    /// The controller's metrics and health.
    pub metrics: u16,
    /// PostgreSQL.
    pub postgres: u16,
}

/// What `state.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevState {
    /// The versions that wrote the data.
    pub versions: DataVersions,
    /// The ports of the last run.
    pub ports: DevPorts,
    /// Static dev tokens by profile.
    pub tokens: BTreeMap<String, String>,
}

/// Where a local server's files live: removed with it, or kept for the
/// next run (`handoff dev`).
pub(super) enum Place {
    /// A temporary directory, removed on drop.
    Temporary(tempfile::TempDir),
    /// A directory of the data dir, kept.
    Kept(PathBuf),
}

impl Place {
    /// The directory.
    pub(super) fn path(&self) -> &Path {
        match self {
            Self::Temporary(dir) => dir.path(),
            Self::Kept(dir) => dir,
        }
    }
}

/// A locked data directory.
pub struct DevHome {
    dir: PathBuf,
    // Held for the life of the run; the kernel releases it when we exit.
    _lock: File,
}

impl DevHome {
    /// Creates (or opens) `dir` and locks it; `fresh` wipes what a previous
    /// run kept, after the lock is held (never under a running instance).
    pub fn open(dir: &Path, fresh: bool) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!("cannot create the data directory {}: {e}", dir.display())
        })?;
        let dir = std::path::absolute(dir)?;
        let lock = lock(&dir)?;
        if fresh {
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                if path.file_name().is_some_and(|n| n == "lock") {
                    continue;
                }
                if path.is_dir() {
                    std::fs::remove_dir_all(&path)?;
                } else {
                    std::fs::remove_file(&path)?;
                }
            }
        }
        Ok(Self { dir, _lock: lock })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the control plane keeps etcd data, certificates and logs.
    pub fn control_plane(&self) -> PathBuf {
        self.dir.join("control-plane")
    }

    /// Where PostgreSQL keeps its data.
    pub fn postgres(&self) -> PathBuf {
        self.dir.join("postgres")
    }

    /// The state of the previous run; `None` on a first run. A state file
    /// that does not parse is an error naming the file and `--fresh`.
    pub fn load(&self) -> anyhow::Result<Option<DevState>> {
        let path = self.state_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a handoff dev state file ({e}); fix or remove it, or run \
                 `handoff dev --fresh` to start over",
                path.display()
            )
        })
    }

    /// Saves `state` (private: it holds the dev tokens).
    pub fn save(&self, state: &DevState) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.state_path();
        let partial = self.dir.join("state.json.partial");
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&partial)?;
        file.write_all(serde_json::to_string_pretty(state)?.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&partial, &path)?;
        Ok(())
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }
}

/// Takes the directory's lock, or says which process holds it.
fn lock(dir: &Path) -> anyhow::Result<File> {
    let path = dir.join("lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            anyhow::bail!(
                "another handoff dev (pid {}) is using the data directory {}: stop it first, \
                 or give this one its own --data-dir",
                holder.trim(),
                dir.display()
            );
        }
        Err(TryLockError::Error(e)) => anyhow::bail!("cannot lock {}: {e}", path.display()),
    }
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

/// `MAJOR.MINOR` of a `vMAJOR.MINOR.PATCH` version.
fn minor(version: &str) -> &str {
    let v = version.trim_start_matches('v');
    match v.match_indices('.').nth(1) {
        Some((at, _)) => &v[..at],
        None => v,
    }
}

/// Pure: whether data written by `saved` can be used by `running`; the
/// error says what differs and what to do.
pub fn compatible(saved: &DataVersions, running: &DataVersions, dir: &Path) -> Result<(), String> {
    let mut changed = Vec::new();
    for (what, old, new) in [
        ("Kubernetes", &saved.kubernetes, &running.kubernetes),
        ("etcd", &saved.etcd, &running.etcd),
    ] {
        if minor(old) != minor(new) {
            changed.push(format!("{what} {old} → {new}"));
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    let dir = dir.display();
    Err(format!(
        "the data directory {dir} was written by other versions ({}); its data is only reused \
         within a minor version. Either export what you need with the old version still running \
         (`kubectl --kubeconfig {dir}/kubeconfig get handoffs -A -o yaml > handoffs.yaml`) and \
         start over with `handoff dev --fresh`, or use another --data-dir",
        changed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(k: &str, e: &str) -> DataVersions {
        DataVersions {
            kubernetes: k.into(),
            etcd: e.into(),
        }
    }

    #[test]
    fn compatibility_cases() {
        let dir = Path::new("/d");
        let base = versions("v1.37.2", "v3.6.16");
        let cases = [
            (versions("v1.37.2", "v3.6.16"), None),
            (versions("v1.37.9", "v3.6.20"), None),
            (
                versions("v1.38.0", "v3.6.16"),
                Some("Kubernetes v1.37.2 → v1.38.0"),
            ),
            (versions("v1.37.2", "v3.7.0"), Some("etcd v3.6.16 → v3.7.0")),
            (
                versions("v1.36.0", "v3.5.0"),
                Some("Kubernetes v1.37.2 → v1.36.0, etcd v3.6.16 → v3.5.0"),
            ),
        ];
        for (running, refusal) in cases {
            match (compatible(&base, &running, dir), refusal) {
                (Ok(()), None) => {}
                (Err(message), Some(part)) => {
                    assert!(message.contains(part), "{message}");
                    assert!(message.contains("--fresh"), "{message}");
                    assert!(message.contains("/d/kubeconfig"), "{message}");
                }
                (outcome, want) => panic!("{running:?}: {outcome:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn minor_versions() {
        for (version, want) in [("v1.37.2", "1.37"), ("3.6.16", "3.6"), ("v2", "2")] {
            assert_eq!(minor(version), want);
        }
    }

    #[test]
    fn a_second_open_is_refused_and_fresh_keeps_only_the_lock() {
        let root = tempfile::tempdir().expect("tempdir");
        let home = DevHome::open(root.path(), false).expect("first");
        let second = DevHome::open(root.path(), false).err().expect("refused");
        let message = second.to_string();
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains("--data-dir"), "{message}");
        let state = DevState {
            versions: versions("v1.37.2", "v3.6.16"),
            ports: DevPorts::default(),
            tokens: BTreeMap::from([("implement".into(), "t".into())]),
        };
        home.save(&state).expect("save");
        assert_eq!(home.load().expect("load"), Some(state));
        std::fs::create_dir_all(home.control_plane().join("etcd")).expect("dir");
        drop(home);
        let fresh = DevHome::open(root.path(), true).expect("fresh");
        assert_eq!(fresh.load().expect("load"), None);
        assert!(!fresh.control_plane().exists());
        std::fs::write(root.path().join("state.json"), "{").expect("write");
        let broken = fresh.load().expect_err("refused").to_string();
        assert!(broken.contains("--fresh"), "{broken}");
    }
}
