//! `make release` as a maintainer runs it (`make test-release`): twice,
//! into two directories, from the same commit. Every digest must agree
//! (the artifacts are reproducible), `install.yaml` and `console.yaml` must
//! parse and pin the image by the OCI archive's digest, the krew manifest must name the
//! tarball by its digest, and a VERSION other than `v` + the workspace
//! version must be refused before anything is built.
//!
//! Needs what the release needs (the static binary, kustomize,
//! cargo-cyclonedx): hack/release/release.sh builds or installs each, and
//! this test fails with its message when it cannot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

#[path = "common/yaml.rs"]
mod yaml;
use yaml::{documents, read};

const VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));
const IMAGE_REPO: &str = "ghcr.io/handoff-dev/handoff";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the release script; its progress goes to this test's stderr.
fn release(version: &str, dist: &Path, stderr: Stdio) -> Output {
    Command::new("bash")
        .arg(root().join("hack/release/release.sh"))
        .arg(version)
        .arg(dist)
        .current_dir(root())
        .stderr(stderr)
        .output()
        .expect("running hack/release/release.sh")
}

/// SHA256SUMS as file name → digest.
fn sums(dist: &Path) -> BTreeMap<String, String> {
    read(&dist.join("SHA256SUMS"))
        .lines()
        .map(|line| {
            let (digest, name) = line.split_once("  ").expect("`digest  name`");
            (name.to_owned(), digest.to_owned())
        })
        .collect()
}

/// The files a release holds.
fn expected_files() -> Vec<String> {
    let number = env!("CARGO_PKG_VERSION");
    let mut files = vec![
        format!("handoff-{number}.tgz"),
        format!("handoff-{VERSION}-linux-amd64.tar.gz"),
        format!("handoff-{VERSION}-image-amd64.oci.tar"),
        format!("handoff-{VERSION}-image-amd64.digest"),
        "install.yaml".to_owned(),
        "crds.yaml".to_owned(),
        "tenant.yaml".to_owned(),
        "console.yaml".to_owned(),
        format!("handoff-{VERSION}.cdx.json"),
        "handoff.yaml".to_owned(),
    ];
    files.sort();
    files
}

/// The images of every container and init container of `docs`.
fn images(docs: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for doc in docs {
        let spec = &doc["spec"]["template"]["spec"];
        for list in ["containers", "initContainers"] {
            for container in spec[list].as_array().into_iter().flatten() {
                out.extend(container["image"].as_str().map(str::to_owned));
            }
        }
    }
    out
}

/// The manifest digest the OCI archive's index names.
fn archive_digest(archive: &Path) -> String {
    let out = Command::new("tar")
        .args(["-xOf"])
        .arg(archive)
        .arg("index.json")
        .output()
        .expect("tar");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index: Value = serde_json::from_slice(&out.stdout).expect("index.json");
    index["manifests"][0]["digest"]
        .as_str()
        .expect("the index's manifest digest")
        .to_owned()
}

fn check_release(dist: &Path) {
    let sums = sums(dist);
    assert_eq!(
        sums.keys().cloned().collect::<Vec<_>>(),
        expected_files(),
        "SHA256SUMS lists the release's files"
    );
    let check = Command::new("sha256sum")
        .args(["--check", "--quiet", "SHA256SUMS"])
        .current_dir(dist)
        .output()
        .expect("sha256sum");
    assert!(check.status.success(), "SHA256SUMS: {check:?}");

    let digest = read(&dist.join(format!("handoff-{VERSION}-image-amd64.digest")));
    let digest = digest.trim();
    assert_eq!(
        digest,
        archive_digest(&dist.join(format!("handoff-{VERSION}-image-amd64.oci.tar"))),
        "the digest file names the archive's manifest"
    );
    let install = documents(&read(&dist.join("install.yaml")), "install.yaml");
    let console = documents(&read(&dist.join("console.yaml")), "console.yaml");
    let pinned = format!("{IMAGE_REPO}@{digest}");
    for (file, docs) in [("install.yaml", &install), ("console.yaml", &console)] {
        let found = images(docs);
        assert!(!found.is_empty(), "{file} has Deployments");
        assert!(
            found.iter().all(|image| *image == pinned),
            "{file} pins every image to {pinned}: {found:?}"
        );
    }
    let console_named = |docs: &[Value]| {
        docs.iter()
            .any(|d| d["metadata"]["name"] == "handoff-console")
    };
    assert!(
        console_named(&console) && !console_named(&install),
        "the console is in console.yaml, not install.yaml (opt-in)"
    );
    let kinds = |docs: &[Value]| -> Vec<String> {
        docs.iter()
            .filter_map(|d| d["kind"].as_str().map(str::to_owned))
            .collect()
    };
    let crds = documents(&read(&dist.join("crds.yaml")), "crds.yaml");
    assert!(
        !crds.is_empty() && kinds(&crds).iter().all(|k| k == "CustomResourceDefinition"),
        "crds.yaml holds the CRDs only: {:?}",
        kinds(&crds)
    );
    assert!(
        kinds(&install)
            .iter()
            .filter(|k| *k == "CustomResourceDefinition")
            .count()
            == crds.len(),
        "install.yaml holds the CRDs"
    );
    let tenant = documents(&read(&dist.join("tenant.yaml")), "tenant.yaml");
    assert!(
        kinds(&tenant).contains(&"Namespace".to_owned()),
        "tenant.yaml"
    );

    let tarball = format!("handoff-{VERSION}-linux-amd64.tar.gz");
    let krew = documents(&read(&dist.join("handoff.yaml")), "handoff.yaml");
    let platform = &krew[0]["spec"]["platforms"][0];
    assert_eq!(krew[0]["spec"]["version"], VERSION);
    assert_eq!(
        platform["sha256"], sums[&tarball],
        "krew names the tarball by digest"
    );
    assert_eq!(
        platform["uri"],
        format!("https://github.com/handoff-dev/handoff/releases/download/{VERSION}/{tarball}")
    );
    assert_eq!(platform["bin"], "kubectl-handoff");

    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(dist.join(&tarball))
        .output()
        .expect("tar");
    let package = format!("handoff-{VERSION}-linux-amd64");
    assert_eq!(
        String::from_utf8_lossy(&listing.stdout)
            .lines()
            .collect::<Vec<_>>(),
        [
            format!("{package}/"),
            format!("{package}/LICENSE"),
            format!("{package}/README.md"),
            format!("{package}/handoff"),
        ],
        "the tarball"
    );

    let sbom: Value =
        serde_json::from_str(&read(&dist.join(format!("handoff-{VERSION}.cdx.json"))))
            .expect("the SBOM is JSON");
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert!(
        sbom.get("serialNumber").is_none(),
        "no random serial number"
    );
}

#[test]
fn two_releases_of_one_commit_are_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dists: Vec<PathBuf> = ["a", "b"].iter().map(|d| dir.path().join(d)).collect();
    for dist in &dists {
        let out = release(VERSION, dist, Stdio::inherit());
        assert!(
            out.status.success(),
            "make release VERSION={VERSION} failed (above)"
        );
        check_release(dist);
    }
    let (first, second) = (sums(&dists[0]), sums(&dists[1]));
    let differ: Vec<&String> = first
        .iter()
        .filter(|(name, digest)| second.get(*name) != Some(digest))
        .map(|(name, _)| name)
        .collect();
    assert!(
        differ.is_empty(),
        "these differ between two runs: {differ:?}"
    );
}

#[test]
fn a_version_other_than_the_workspace_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let want = format!("VERSION must be {VERSION}");
    for version in [
        "",
        env!("CARGO_PKG_VERSION"),
        "v9.9.9",
        &format!("{VERSION}-rc1"),
    ] {
        let dist = dir.path().join("dist");
        let out = release(version, &dist, Stdio::piped());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{version:?} was accepted");
        assert!(stderr.contains(&want), "{version:?}: {stderr}");
        assert!(!dist.exists(), "{version:?}: nothing is written");
    }
}
