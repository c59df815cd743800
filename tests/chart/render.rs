//! The two renderers: `helm template` of charts/handoff and `kubectl
//! kustomize` of config/ (or of an overlay written for a test). Both are
//! real parts: when one is missing the test fails naming the make target
//! that builds it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::compare::{Objects, normalize};

/// The release the chart is rendered as: the name and namespace
/// config/default uses.
pub(crate) const RELEASE: &str = "handoff";
pub(crate) const NAMESPACE: &str = "handoff-system";

/// The repository root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart's directory.
pub(crate) fn chart() -> PathBuf {
    root().join("charts/handoff")
}

/// Helm, as `make helm` builds it (hack/tools/build.sh --cached: never a
/// build from a test).
fn helm() -> PathBuf {
    let out = Command::new("bash")
        .arg(root().join("hack/tools/build.sh"))
        .args(["--cached", "helm"])
        .output()
        .expect("bash runs hack/tools/build.sh");
    assert!(
        out.status.success(),
        "helm is missing: run `make helm` (or `make test-deps`). {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// kubectl of the envtest assets (`make envtest-assets`).
pub(crate) fn kubectl() -> PathBuf {
    handoff_testkit::Assets::locate()
        .unwrap_or_else(|e| panic!("kubectl is missing: {e:#}"))
        .bin("kubectl")
}

/// `helm <args>` from the repository root: stdout, or stderr as the error.
pub(crate) fn helm_run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(helm())
        .current_dir(root())
        .args(args)
        .output()
        .expect("helm runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `helm template` of the chart (CRDs included) with `values` files and
/// `sets`: the YAML, or helm's error.
pub(crate) fn template(values: &[&str], sets: &[&str]) -> Result<String, String> {
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().expect("a UTF-8 path"),
        "--namespace",
        NAMESPACE,
        "--include-crds",
    ];
    for v in values {
        args.extend(["--values", v]);
    }
    for s in sets {
        args.extend(["--set", s]);
    }
    helm_run(&args)
}

/// The chart's objects with `values` files and `sets`, which must render.
pub(crate) fn chart_objects(values: &[&str], sets: &[&str]) -> Objects {
    let yaml =
        template(values, sets).unwrap_or_else(|e| panic!("helm template {values:?} {sets:?}: {e}"));
    objects(&yaml, "helm template")
}

/// `kubectl kustomize <dir>`, which must succeed. Files outside `dir` may
/// be loaded: a test's [`overlay`] reuses config/'s patches through its
/// `config` symlink (config/'s own kustomizations never need this).
pub(crate) fn kustomize(dir: &Path) -> String {
    let out = Command::new(kubectl())
        .current_dir(root())
        .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(dir)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The objects of `kubectl kustomize <dir>`.
pub(crate) fn kustomize_objects(dir: &Path) -> Objects {
    objects(&kustomize(dir), &format!("kustomize {}", dir.display()))
}

/// Multi-document YAML as normalized objects (`what` names its source).
fn objects(yaml: &str, what: &str) -> Objects {
    let values: Vec<Value> =
        serde_saphyr::from_str_multiple(yaml).unwrap_or_else(|e| panic!("{what} is not YAML: {e}"));
    normalize(values).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A kustomize overlay written for a test: a temporary directory holding
/// `files` (path, content) and a symlink `config` to the repository's
/// config/ (kustomize refuses absolute resource paths).
pub(crate) fn overlay(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::os::unix::fs::symlink(root().join("config"), dir.path().join("config"))
        .expect("symlink config/");
    for (path, content) in files {
        let path = dir.path().join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("overlay directory");
        }
        std::fs::write(&path, content).expect("write the overlay");
    }
    dir
}
