//! `handoff dev`.

use std::path::PathBuf;

/// Runs the local control plane until Ctrl-C.
pub async fn run(_dir: PathBuf) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
