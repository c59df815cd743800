//! The images the e2e node runs, written as OCI archives by the test kit
//! ([`handoff_testkit::image`]) from the static `handoff` (`make
//! e2e-image-binary`) and the node's pause and scripted agent (`make
//! e2e-assets`), and imported before the kubelet starts.

use std::path::PathBuf;

use handoff_testkit::cluster::NodeAssets;
use handoff_testkit::image::{agent_image, handoff_image, pause_image, static_handoff_binary};

pub(crate) use handoff_testkit::image::{AGENT_IMAGE, HANDOFF_IMAGE as HANDOFF};

/// The archives, in a directory removed on drop (after the import).
pub(crate) struct Archives {
    _dir: tempfile::TempDir,
    paths: Vec<PathBuf>,
}

impl Archives {
    pub(crate) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

/// Writes the pause, handoff and agent images.
pub(crate) fn archives() -> anyhow::Result<Archives> {
    let node = NodeAssets::locate()?;
    let handoff = static_handoff_binary(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))?;
    let dir = tempfile::Builder::new()
        .prefix("handoff-images-")
        .tempdir()?;
    let specs = [
        pause_image(&node.bin("pause")),
        handoff_image(&handoff),
        agent_image(&node.bin("agent"), &handoff),
    ];
    let mut paths = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let path = dir.path().join(format!("image-{i}.tar"));
        spec.write_archive(&path)?;
        paths.push(path);
    }
    Ok(Archives { _dir: dir, paths })
}
