//! The `handoff` binary: command-line dispatch only. Each subcommand's work
//! lives in the library (see `src/lib.rs` for the map).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Controller,
    /// Serve the four handoff tools over MCP (stdio or streamable HTTP).
    Mcp,
    /// Print the CustomResourceDefinitions as YAML (what `crds/` holds).
    Crd,
    /// Print the continuation preamble, or prepend it to a goal read on stdin.
    Preamble(handoff::goals::PreambleArgs),
    /// Linearize an agent transcript into a handoff document.
    #[command(subcommand)]
    Transcript(handoff::transcript::cli::TranscriptCommand),
    /// Run a local control plane (etcd + kube-apiserver, and PostgreSQL when
    /// installed) with the CRDs installed, until Ctrl-C.
    Dev {
        /// Where the kubeconfig and logs go.
        #[arg(long, default_value = ".local")]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    handoff::telemetry::init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crd => handoff::api::print_crds(&mut std::io::stdout().lock()),
        Command::Preamble(args) => handoff::goals::run_preamble(args),
        Command::Transcript(command) => handoff::transcript::cli::run(command),
        Command::Dev { dir } => runtime().and_then(|rt| rt.block_on(handoff::dev::run(dir))),
        Command::Controller => not_yet("controller"),
        Command::Mcp => not_yet("mcp"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("handoff: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn not_yet(name: &str) -> anyhow::Result<()> {
    anyhow::bail!("`handoff {name}` is not yet available in this build")
}
