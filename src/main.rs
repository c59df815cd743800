//! The `handoff` binary: command-line dispatch only. Each subcommand's work
//! lives in the library (see `src/lib.rs` for the map).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "handoff",
    version,
    about = "Kubernetes-native continuation for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the reconcile loops (leader-elected).
    Controller(handoff_controller::ControllerOptions),
    /// Serve the handoff tools over MCP (stdio or streamable HTTP): the
    /// contract's four, plus the extensions the caller's profile allows.
    Mcp(handoff_bridge::McpArgs),
    /// Serve the web console: on a laptop as your kubeconfig's user, behind
    /// a one-time link on 127.0.0.1 (printed, or opened with --open); with
    /// --behind-proxy as the bearer of the token an authenticating proxy
    /// forwards. Every page is read as the person: what RBAC hides, it
    /// does not show.
    Console(handoff_console::ConsoleArgs),
    /// Print the bridge's request headers as JSON, reading the token file
    /// again on every run (Claude Code's `headersHelper`).
    McpHeaders(handoff_bridge::headers::HeadersArgs),
    /// Print the CustomResourceDefinitions as YAML (what `crds/` holds).
    Crd {
        /// Write one file per CRD into this directory instead of printing.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print the operator's tables (flags and environment of the
    /// long-running processes, their metrics, the printer columns) as
    /// markdown: what docs/flags-metrics-columns.md holds.
    Tables,
    /// Print the continuation preamble, or prepend it to a goal read on stdin.
    Preamble(handoff::preamble::PreambleArgs),
    /// Linearize an agent transcript into a handoff document.
    #[command(subcommand)]
    Transcript(handoff_transcript::cli::TranscriptCommand),
    /// Administer the PostgreSQL mirror (the URL is read from
    /// HANDOFF_POSTGRES_URL, else DATABASE_URL).
    #[command(subcommand)]
    Mirror(handoff_mirror::purge::MirrorCommand),
    /// Print the current handoff of a key as markdown (kubeconfig as kubectl).
    Get(handoff::cli::GetArgs),
    /// List the revisions of a key the PostgreSQL mirror keeps.
    History(handoff::cli::HistoryArgs),
    /// Show a unified diff between two revisions of a key (from the mirror).
    Diff(handoff::cli::DiffArgs),
    /// Search a project's handoffs by what they say (from the mirror).
    Search(handoff::cli::SearchArgs),
    /// Export a namespace's (or project's) handoffs to a versioned JSON Lines file.
    Export(handoff::transfer::ExportArgs),
    /// Import an export file into a namespace: validated whole, idempotent.
    Import(handoff::transfer::ImportArgs),
    /// Move a project's handoffs into a team's namespace (without
    /// spec.createdBy: the copy is written by whoever moves it).
    Move(handoff::cli::MoveArgs),
    /// Run as an agent's lifecycle hook (Claude Code, Codex): the event's
    /// JSON on stdin, the agent's answer on stdout; never fails the session.
    Hook(handoff::hook::HookArgs),
    /// Write a rescued handoff extracted from a transcript, unless the key
    /// has an agent-written one newer than the session's start.
    Rescue(handoff::hook::RescueArgs),
    /// Print the `metadata.name` of the Handoff that holds a key (the only
    /// name the admission webhook accepts for it).
    Name(handoff::cli::NameArgs),
    /// Serve the validating admission webhook (HTTPS): a Handoff's name is
    /// derived from its key, and the text rule, for every writer.
    Webhook(handoff_webhook::WebhookArgs),
    /// Run a local control plane (etcd + kube-apiserver, and PostgreSQL when
    /// installed) with the CRDs installed, until Ctrl-C.
    Dev(handoff::dev::DevArgs),
}

fn main() -> ExitCode {
    handoff_kube::telemetry::init_logging();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(err) => {
            let subcommand = std::env::args_os().nth(1);
            let code = refused_code(subcommand.as_deref(), err.exit_code());
            // Help and version go to stdout, errors to stderr, as clap does.
            let _ = err.print();
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
    };
    let result = match cli.command {
        Command::Crd { dir: Some(dir) } => handoff::crd::write(&dir),
        Command::Crd { dir: None } => handoff::crd::print(&mut std::io::stdout().lock()),
        Command::McpHeaders(args) => handoff_bridge::headers::run(args),
        Command::Tables => handoff::tables::print(&Cli::command()),
        Command::Preamble(args) => handoff::preamble::run(args),
        Command::Transcript(command) => handoff_transcript::cli::run(command),
        Command::Name(args) => {
            handoff::cli::name(&args);
            Ok(())
        }
        Command::Webhook(args) => runtime().and_then(|rt| rt.block_on(handoff_webhook::run(args))),
        Command::Dev(args) => runtime().and_then(|rt| rt.block_on(handoff::dev::run(args))),
        Command::Controller(args) => {
            runtime().and_then(|rt| rt.block_on(handoff_controller::run_cli(args)))
        }
        Command::Mcp(args) => runtime().and_then(|rt| rt.block_on(handoff_bridge::run(args))),
        Command::Console(args) => runtime().and_then(|rt| rt.block_on(handoff_console::run(args))),
        Command::Move(args) => {
            runtime().and_then(|rt| rt.block_on(handoff::cli::move_project(args)))
        }
        Command::Hook(args) => {
            handoff::hook::run_hook(args);
            Ok(())
        }
        Command::Rescue(args) => {
            runtime().and_then(|rt| rt.block_on(handoff::hook::run_rescue(args)))
        }
        Command::Export(args) => {
            runtime().and_then(|rt| rt.block_on(handoff::transfer::export(args)))
        }
        Command::Import(args) => {
            runtime().and_then(|rt| rt.block_on(handoff::transfer::import(args)))
        }
        Command::Get(args) => runtime().and_then(|rt| rt.block_on(handoff::cli::get(args))),
        Command::History(args) => runtime().and_then(|rt| rt.block_on(handoff::cli::history(args))),
        Command::Diff(args) => runtime().and_then(|rt| rt.block_on(handoff::cli::diff(args))),
        Command::Search(args) => runtime().and_then(|rt| rt.block_on(handoff::cli::search(args))),
        Command::Mirror(command) => {
            runtime().and_then(|rt| rt.block_on(handoff_mirror::purge::run(command)))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("handoff: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The command line; run as `kubectl-handoff` (a kubectl plugin: a
/// symlink or copy of this binary on the PATH), help and errors name it
/// `kubectl handoff`, and the subcommands are the same.
fn parse() -> Result<Cli, clap::Error> {
    let plugin = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .is_some_and(|name| name == "kubectl-handoff");
    let mut command = Cli::command();
    if plugin {
        command = command.bin_name("kubectl handoff");
    }
    Cli::from_arg_matches(&command.try_get_matches()?)
}

/// Pure: the exit code of a command line clap refuses (`code`: clap's, 2
/// for a usage error). A hook that exits 2 blocks in Claude Code and Gemini
/// CLI, with its stderr as the reason: a `handoff hook` line this binary
/// cannot parse (a flag of a newer release, a typo) would feed the usage
/// text to the model turn after turn (Gemini CLI's AfterAgent did so until
/// killed). So `handoff hook` exits 1, a non-blocking error for both.
fn refused_code(subcommand: Option<&std::ffi::OsStr>, code: i32) -> i32 {
    if code == 2 && subcommand.is_some_and(|s| s == "hook") {
        1
    } else {
        code
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::refused_code;

    #[test]
    fn a_hook_line_clap_refuses_exits_1_not_2() {
        let cases = [
            (Some("hook"), 2, 1),
            (Some("hook"), 0, 0),
            (Some("rescue"), 2, 2),
            (Some("mcp"), 2, 2),
            (None, 2, 2),
        ];
        for (subcommand, code, want) in cases {
            assert_eq!(
                refused_code(subcommand.map(OsStr::new), code),
                want,
                "{subcommand:?} {code}"
            );
        }
    }
}
