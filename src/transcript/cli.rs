//! `handoff transcript …`

use clap::Subcommand;

/// Subcommands of `handoff transcript`.
#[derive(Debug, Subcommand)]
pub enum TranscriptCommand {
    /// Print a transcript as linear turns (JSON).
    Read,
}

/// Runs one `handoff transcript` subcommand.
pub fn run(_command: TranscriptCommand) -> anyhow::Result<()> {
    anyhow::bail!("handoff transcript is not yet available")
}
