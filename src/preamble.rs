//! `handoff preamble`: the contract's continuation preamble for a key,
//! printed alone or in front of a goal read on stdin. The text is a pure
//! function of the key (`handoff_core::goals`); this module reads and
//! writes the streams.

use std::io::{Read, Write};

use clap::Args;

use handoff_core::goals::{KEY_ENV, preamble, prepend};

/// Arguments of `handoff preamble`.
#[derive(Debug, Args)]
pub struct PreambleArgs {
    /// The conversation object key (stable per issue).
    #[arg(long, env = KEY_ENV, default_value = "")]
    pub key: String,
    /// Read a goal on stdin and write preamble + goal to stdout.
    #[arg(long)]
    pub prepend: bool,
}

/// Runs `handoff preamble`.
pub fn run(args: PreambleArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if args.prepend {
        let mut goal = String::new();
        std::io::stdin().read_to_string(&mut goal)?;
        out.write_all(prepend(&args.key, &goal).as_bytes())?;
    } else if let Some(p) = preamble(&args.key) {
        writeln!(out, "{p}")?;
    }
    Ok(())
}
