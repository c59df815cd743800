//! Finding the control-plane binaries (kube-apiserver, etcd, kubectl).
//!
//! Like controller-runtime's envtest: `KUBEBUILDER_ASSETS` names a directory
//! that holds them. Without it, the cache directory `make envtest-assets`
//! builds into (`hack/envtest/build.sh`, keyed by the versions in
//! `hack/envtest/versions.env`) is used.

use std::path::{Path, PathBuf};

/// `hack/envtest/versions.env`, compiled in so the binary and the build
/// script agree on the cache key.
const VERSIONS_ENV: &str = include_str!("../../../hack/envtest/versions.env");

/// The versions the control plane is built at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// e.g. `v1.37.2`
    pub kubernetes: String,
    /// e.g. `v3.6.16`
    pub etcd: String,
    /// The e2e node's cluster DNS, e.g. `v1.15.0` (`hack/e2e/build.sh`).
    pub coredns: String,
}

impl Versions {
    /// The versions pinned in `hack/envtest/versions.env`.
    pub fn pinned() -> Self {
        parse_versions(VERSIONS_ENV)
    }
}

fn parse_versions(text: &str) -> Versions {
    let get = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default()
    };
    Versions {
        kubernetes: get("KUBE_VERSION"),
        etcd: get("ETCD_VERSION"),
        coredns: get("COREDNS_VERSION"),
    }
}

/// Where the control-plane binaries are.
#[derive(Debug, Clone)]
pub struct Assets {
    /// The directory holding them.
    pub dir: PathBuf,
}

/// The binaries a control plane needs.
pub(crate) const BINARIES: [&str; 3] = ["kube-apiserver", "etcd", "kubectl"];

impl Assets {
    /// `KUBEBUILDER_ASSETS` when set, else the version-keyed cache directory.
    /// Fails with an actionable message when a binary is missing.
    pub fn locate() -> anyhow::Result<Self> {
        let (dir, origin) = match std::env::var_os("KUBEBUILDER_ASSETS") {
            Some(dir) if !dir.is_empty() => (PathBuf::from(dir), "KUBEBUILDER_ASSETS"),
            _ => (default_dir(&Versions::pinned()), "the envtest cache"),
        };
        let missing: Vec<_> = BINARIES
            .iter()
            .filter(|b| !is_executable(&dir.join(b)))
            .collect();
        anyhow::ensure!(
            missing.is_empty(),
            "control-plane binaries missing from {origin} ({}): {missing:?}. \
             Run `make envtest-assets` to build them from Go modules, or point \
             KUBEBUILDER_ASSETS at a directory that has kube-apiserver, etcd and kubectl.",
            dir.display()
        );
        Ok(Self { dir })
    }

    /// Path of one binary.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// `${HANDOFF_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/handoff}`, the root
/// of the cached builds, exactly as `hack/lib/go-cache.sh` computes it.
pub fn cache_root() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("HANDOFF_CACHE_DIR").unwrap_or_else(|| {
        env("XDG_CACHE_HOME")
            .or_else(|| env("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("handoff")
    })
}

/// `<cache root>/envtest/k8s-<v>-etcd-<v>`, as `hack/envtest/build.sh`
/// computes it.
pub(crate) fn default_dir(versions: &Versions) -> PathBuf {
    cache_root().join("envtest").join(format!(
        "k8s-{}-etcd-{}",
        versions.kubernetes, versions.etcd
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_parsed_from_the_env_file() {
        let v = parse_versions("# c\nKUBE_VERSION=v1.2.3\n ETCD_VERSION = v3.4.5\n");
        assert_eq!(v.kubernetes, "v1.2.3");
        assert_eq!(v.etcd, "v3.4.5");
        assert_eq!(v.coredns, "");
        let pinned = Versions::pinned();
        assert!(
            pinned.kubernetes.starts_with("v1.") && pinned.etcd.starts_with("v3."),
            "{pinned:?}"
        );
    }

    #[test]
    fn k8s_openapi_feature_matches_the_pinned_minor() {
        let minor = Versions::pinned()
            .kubernetes
            .split('.')
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let cargo = include_str!("../../../Cargo.toml");
        assert!(
            cargo.contains(&format!("\"v1_{minor}\"")),
            "Cargo.toml's k8s-openapi feature must be v1_{minor} to match hack/envtest/versions.env"
        );
    }
}
