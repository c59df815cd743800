//! TEMPORARY: the images from /tmp/pz (to be replaced by the image writer).

use std::path::PathBuf;

pub(crate) const HANDOFF: &str = "localhost/handoff:e2e";

pub(crate) struct Archives(Vec<PathBuf>);

impl Archives {
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.0.clone()
    }
}

pub(crate) fn archives() -> anyhow::Result<Archives> {
    Ok(Archives(vec![
        "/tmp/pz/pause.tar".into(),
        "/tmp/pz/handoff.tar".into(),
    ]))
}
