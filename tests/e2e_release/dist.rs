//! What is released, as the e2e node gets it: `dist/` made by the release
//! script into a directory of the test's own (the same script as `make
//! release`, at the workspace's version), its OCI image imported into the
//! node under the reference `install.yaml` pins (by digest) and under a
//! second tag (the "new image" of the upgrade: the same build re-tagged),
//! and the developer tools the scenario drives (helm).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kubectl::root;
use crate::harness::with_cluster;

/// The image repository a release names.
pub(crate) const REPOSITORY: &str = "ghcr.io/handoff-dev/handoff";

/// The tag the upgrade moves to: the released image, re-tagged.
pub(crate) const NEXT_TAG: &str = "upgrade-e2e";

/// A release written by the release script.
pub(crate) struct Dist {
    _dir: tempfile::TempDir,
    /// The `dist/` directory.
    pub(crate) path: PathBuf,
    /// `vX.Y.Z`.
    pub(crate) version: String,
    /// The image's manifest digest (`sha256:…`).
    pub(crate) digest: String,
}

impl Dist {
    /// A file of the release.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The packaged Helm chart.
    pub(crate) fn chart(&self) -> PathBuf {
        self.file(&format!(
            "handoff-{}.tgz",
            self.version.trim_start_matches('v')
        ))
    }
}

/// Pure: `v` and the workspace's version.
pub(crate) fn release_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

/// Runs the release script into a new directory; panics with its output
/// when it fails.
pub(crate) fn built() -> Dist {
    let dir = tempfile::Builder::new()
        .prefix("handoff-dist-")
        .tempdir()
        .unwrap_or_else(|e| panic!("a directory for the release: {e}"));
    let path = dir.path().join("dist");
    let version = release_version();
    let out = Command::new(root().join("hack/release/release.sh"))
        .current_dir(root())
        .arg(&version)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("run hack/release/release.sh: {e}"));
    assert!(
        out.status.success(),
        "hack/release/release.sh VERSION={version} failed (make release):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = std::fs::read_to_string(path.join(image_digest_file(&version)))
        .unwrap_or_else(|e| panic!("the release's image digest: {e}"))
        .trim()
        .to_owned();
    Dist {
        _dir: dir,
        path,
        version,
        digest,
    }
}

/// Pure: the release's OCI archive of the image.
pub(crate) fn image_archive(version: &str) -> String {
    format!("handoff-{version}-image-amd64.oci.tar")
}

/// Pure: the file holding the archive's manifest digest.
pub(crate) fn image_digest_file(version: &str) -> String {
    format!("handoff-{version}-image-amd64.digest")
}

/// Imports the released image into the node, and names it as
/// `install.yaml` (`REPOSITORY@digest`) and the upgrade (`:NEXT_TAG`) do.
pub(crate) fn import(dist: &Dist) {
    let archive = dist.file(&image_archive(&dist.version));
    let tagged = format!("{REPOSITORY}:{}", dist.version);
    with_cluster(|cluster| {
        cluster
            .import(&archive)
            .unwrap_or_else(|e| panic!("import the released image: {e:#}"));
        for name in [
            format!("{REPOSITORY}@{}", dist.digest),
            format!("{REPOSITORY}:{NEXT_TAG}"),
        ] {
            cluster
                .ctr(&["images", "tag", "--force", &tagged, &name])
                .unwrap_or_else(|e| panic!("name the released image {name}: {e:#}"));
        }
    });
}

/// A developer tool built by `hack/tools/build.sh` (cached by version).
pub(crate) fn tool(name: &str) -> PathBuf {
    let out = Command::new(root().join("hack/tools/build.sh"))
        .arg(name)
        .output()
        .unwrap_or_else(|e| panic!("hack/tools/build.sh {name}: {e}"));
    assert!(
        out.status.success(),
        "{name} is missing and could not be built (make test-deps builds it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or_default();
    assert!(
        Path::new(path).is_file(),
        "hack/tools/build.sh {name} printed no binary: {stdout}"
    );
    PathBuf::from(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_files_follow_the_version() {
        assert_eq!(
            image_archive("v0.2.0"),
            "handoff-v0.2.0-image-amd64.oci.tar"
        );
        assert!(release_version().starts_with('v'));
    }
}
