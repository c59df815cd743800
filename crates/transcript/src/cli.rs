//! `handoff transcript …`: read a transcript, build a handoff document,
//! sweep expired documents. See the module docs of [`super`].

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow, bail};
use clap::{Args, Subcommand};

use super::budget::{Budget, DEFAULT_MAX_TURNS};
use super::files;
use super::{
    AgentKind, Locations, Outcome, build_continuation_handoff, build_handoff, check_session_id,
    continue_message, inject_message, locate, read_file, read_with,
};
use handoff_core::time::parse_duration;

/// Subcommands of `handoff transcript`.
#[derive(Debug, Subcommand)]
pub enum TranscriptCommand {
    /// Print a transcript as linear turns (JSON).
    Read(ReadArgs),
    /// Write a handoff document; print its path, then the launch message.
    Build(BuildArgs),
    /// Remove handoff documents older than --max-age.
    Sweep(SweepArgs),
}

/// Which transcript to read: the one set of source flags, flattened into
/// `handoff transcript read|build` and `handoff rescue`, and read by the one
/// loader, [`SourceArgs::load`], so that the two cannot drift apart.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The source agent: claude, codex, copilot, gemini or grok.
    #[arg(long, value_name = "AGENT")]
    pub agent: AgentKind,
    /// The session id (for a Grok .db or Gemini CLI logs.json --file too).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The session's working directory, which locates Claude Code sessions
    /// [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Read this transcript file instead of locating the session: a .jsonl,
    /// for grok a legacy .json or a .db (with --session), for gemini an
    /// older .json session or a logs.json (with --session).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// The agent's own directory [default: CLAUDE_CONFIG_DIR, CODEX_HOME,
    /// COPILOT_HOME, $GEMINI_CLI_HOME/.gemini or GROK_HOME, else ~/.claude,
    /// ~/.codex, ~/.copilot, ~/.gemini or ~/.grok].
    #[arg(long, value_name = "DIR")]
    pub agent_home: Option<PathBuf>,
}

/// How much of a transcript `handoff transcript read|build` keeps.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// Keep at most this many of the last turns (0: no limit).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TURNS)]
    pub max_turns: usize,
    /// Keep at most this much turn text, e.g. 96k or 1M (0: no limit).
    #[arg(long, value_name = "SIZE", default_value = "96k", value_parser = parse_size)]
    pub max_bytes: usize,
}

impl BudgetArgs {
    fn budget(&self) -> Budget {
        Budget::new(self.max_turns, self.max_bytes)
    }
}

/// Arguments of `handoff transcript read`.
#[derive(Debug, Args)]
pub struct ReadArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// Arguments of `handoff transcript build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// A task for the destination to continue once it understands the
    /// transcript [default: summarize and wait].
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// Where documents are written [default: $XDG_STATE_HOME/handoff/transcripts].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Arguments of `handoff transcript sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Remove documents last written longer ago than this: 30m, 24h, 7d.
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    pub max_age: Duration,
    /// Where documents are written [default: $XDG_STATE_HOME/handoff/transcripts].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Runs one `handoff transcript` subcommand.
pub fn run(command: TranscriptCommand) -> anyhow::Result<()> {
    match command {
        TranscriptCommand::Read(args) => read(&args),
        TranscriptCommand::Build(args) => build(&args),
        TranscriptCommand::Sweep(args) => sweep(&args),
    }
}

fn read(args: &ReadArgs) -> anyhow::Result<()> {
    let outcome = args.source.load(args.budget.budget())?.outcome;
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &outcome)?;
    writeln!(out)?;
    Ok(())
}

fn build(args: &BuildArgs) -> anyhow::Result<()> {
    let task = match args.task.as_deref().map(str::trim) {
        Some("") => bail!("--task is empty"),
        task => task,
    };
    let outcome = args.source.load(args.budget.budget())?.outcome;
    let kind = args.source.agent;
    let document = match task {
        Some(task) => build_continuation_handoff(&outcome, kind, task),
        None => build_handoff(&outcome, kind),
    };
    let dir = state_dir(args.state_dir.as_deref())?;
    let path = files::write_file_in(&dir, &document, kind)?;
    let message = match task {
        Some(task) => continue_message(&path, kind, task),
        None => inject_message(&path, kind),
    };
    let mut out = io::stdout().lock();
    writeln!(out, "{}", path.display())?;
    writeln!(out, "{message}")?;
    eprintln!(
        "handoff: wrote {} bytes: {} turns from {} records; skipped: {}; warnings: {}",
        document.len(),
        outcome.turns.len(),
        outcome.records,
        outcome.skipped,
        outcome.warnings.len()
    );
    Ok(())
}

fn sweep(args: &SweepArgs) -> anyhow::Result<()> {
    let dir = state_dir(args.state_dir.as_deref())?;
    let removed = files::sweep_files_in(&dir, args.max_age, SystemTime::now())?;
    let mut out = io::stdout().lock();
    for path in &removed {
        writeln!(out, "{}", path.display())?;
    }
    Ok(())
}

fn state_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(files::state_dir)
        .ok_or_else(|| {
            anyhow!("no state directory: set XDG_STATE_HOME or HOME, or pass --state-dir")
        })
}

/// A transcript [`SourceArgs`] named, and where it came from.
#[derive(Debug)]
pub struct Loaded {
    pub outcome: Outcome,
    /// The file read, when there is one: `--file`, or the JSON-lines file
    /// the session was located in (none for a session in a Grok database).
    pub file: Option<PathBuf>,
    /// The session: `--session`, else the stem of `--file`.
    pub session: Option<String>,
}

impl SourceArgs {
    /// Reads the transcript the flags name, within `budget`.
    pub fn load(&self, budget: Budget) -> anyhow::Result<Loaded> {
        if let Some(session) = &self.session {
            check_session_id(session).map_err(|err| anyhow!("--session: {err}"))?;
        }
        match (&self.file, &self.session) {
            (Some(file), session) => {
                let outcome = self.load_file(file, session.as_deref(), budget)?;
                let session = session.clone().or_else(|| {
                    file.file_stem()
                        .map(|stem| stem.to_string_lossy().into_owned())
                });
                Ok(Loaded {
                    outcome,
                    file: Some(file.clone()),
                    session,
                })
            }
            (None, Some(session)) => self.load_session(session, budget),
            (None, None) => bail!("give --session ID (with --cwd DIR for claude) or --file PATH"),
        }
    }

    fn load_file(
        &self,
        file: &Path,
        session: Option<&str>,
        budget: Budget,
    ) -> anyhow::Result<Outcome> {
        if session.is_some() && !self.agent.file_holds_sessions(file) {
            bail!(
                "--session is not used with --file, except for a file of many sessions (a Grok .db, a Gemini CLI logs.json)"
            );
        }
        if self.cwd.is_some() || self.agent_home.is_some() {
            bail!("--cwd and --agent-home locate a session; they are not used with --file");
        }
        if !file.exists() {
            bail!("--file {}: no such file", file.display());
        }
        read_file(self.agent, file, session, budget)
            .map_err(|err| anyhow!("--file: {err}"))?
            .ok_or_else(|| {
                anyhow!(
                    "--file {}: no messages of session {} in it",
                    file.display(),
                    session.unwrap_or_default()
                )
            })
    }

    fn load_session(&self, session: &str, budget: Budget) -> anyhow::Result<Loaded> {
        let kind = self.agent;
        let cwd = match &self.cwd {
            Some(dir) => dir.clone(),
            None => {
                std::env::current_dir().context("no --cwd, and the current directory is unknown")?
            }
        };
        let mut locations = Locations::from_env();
        if let Some(home) = &self.agent_home {
            locations = locations.with_root(kind, home.clone());
        }
        let root = locations
            .root(kind)
            .ok_or_else(|| {
                anyhow!(
                    "no {} directory: set HOME or pass --agent-home",
                    kind.label()
                )
            })?
            .to_path_buf();
        let file = locate(&locations, kind, session, &cwd);
        let outcome = match &file {
            Some(path) => read_file(kind, path, None, budget).map_err(|err| anyhow!("{err}"))?,
            None => read_with(&locations, kind, session, &cwd, budget),
        }
        .ok_or_else(|| {
            anyhow!(
                "no {} transcript of session {session} under {}",
                kind.label(),
                root.display()
            )
        })?;
        Ok(Loaded {
            outcome,
            file,
            session: Some(session.to_owned()),
        })
    }
}

/// Parses a size such as `98304`, `96k`, `96KiB` or `1M` (binary units);
/// 0 is no limit, anything else is at least 1k.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: usize = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => 0,
    };
    if multiplier == 0 || number.is_empty() {
        return Err(format!(
            "expected a number of bytes, optionally followed by k or M (e.g. 96k), got {text:?}"
        ));
    }
    let too_big = || format!("{text:?} is too large");
    let bytes = number
        .parse::<usize>()
        .map_err(|_| too_big())?
        .checked_mul(multiplier)
        .ok_or_else(too_big)?;
    if bytes != 0 && bytes < 1 << 10 {
        return Err(format!("{text:?}: use 0 for no limit, or at least 1k"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn parse_size_cases() {
        let cases = [
            ("0", Ok(0)),
            ("98304", Ok(98_304)),
            ("96k", Ok(98_304)),
            ("96KiB", Ok(98_304)),
            ("1M", Ok(1 << 20)),
            ("2mb", Ok(2 << 20)),
            ("1024b", Ok(1024)),
            ("512", Err(())),
            ("k", Err(())),
            ("1.5M", Err(())),
            ("1G", Err(())),
            ("99999999999999999999999", Err(())),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text).map_err(|_| ()), want, "{text:?}");
        }
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: TranscriptCommand,
    }

    fn parse(args: &[&str]) -> Result<TranscriptCommand, String> {
        Cli::try_parse_from(std::iter::once("transcript").chain(args.iter().copied()))
            .map(|cli| cli.command)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn flag_errors_name_the_flag() {
        let cases: [(&[&str], &str); 4] = [
            (&["read", "--agent", "cursor", "--session", "s"], "--agent"),
            (&["read", "--session", "s"], "--agent"),
            (&["sweep", "--max-age", "soon"], "--max-age"),
            (
                &["read", "--agent", "claude", "--max-bytes", "lots"],
                "--max-bytes",
            ),
        ];
        for (args, flag) in cases {
            let err = parse(args).unwrap_err();
            assert!(err.contains(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn defaults_are_the_default_budget() {
        let Ok(TranscriptCommand::Read(args)) =
            parse(&["read", "--agent", "codex", "--session", "s"])
        else {
            panic!("read expected");
        };
        assert_eq!(args.budget.budget(), Budget::default());
    }

    #[test]
    fn load_errors_name_the_flag() {
        let cases: [(&[&str], &str); 6] = [
            (&["read", "--agent", "claude"], "give --session ID"),
            (
                &["read", "--agent", "claude", "--session", "../x"],
                "--session:",
            ),
            (
                &[
                    "read",
                    "--agent",
                    "claude",
                    "--file",
                    "/nonexistent/x.jsonl",
                ],
                "--file /nonexistent/x.jsonl: no such file",
            ),
            (
                &["read", "--agent", "grok", "--file", "/tmp/x.txt"],
                "--file",
            ),
            (
                &[
                    "read",
                    "--agent",
                    "codex",
                    "--file",
                    "x.jsonl",
                    "--session",
                    "s",
                ],
                "--session is not used",
            ),
            (
                &[
                    "read", "--agent", "codex", "--file", "x.jsonl", "--cwd", "/",
                ],
                "--cwd",
            ),
        ];
        for (args, want) in cases {
            let Ok(TranscriptCommand::Read(read)) = parse(args) else {
                panic!("{args:?} should parse");
            };
            let err = format!("{:#}", read.source.load(read.budget.budget()).unwrap_err());
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    #[test]
    fn an_empty_task_is_refused() {
        let Ok(TranscriptCommand::Build(args)) = parse(&[
            "build",
            "--agent",
            "codex",
            "--session",
            "s",
            "--task",
            "  ",
        ]) else {
            panic!("build expected");
        };
        assert!(
            build(&args)
                .unwrap_err()
                .to_string()
                .contains("--task is empty")
        );
    }
}
