//! Logging. Every process logs structured JSON to stderr (stdout is reserved
//! for command output and, over stdio, for MCP frames). `RUST_LOG` filters;
//! the default is `info` for this crate and `warn` for dependencies.

use tracing_subscriber::EnvFilter;

/// Installs the JSON subscriber once; later calls are no-ops.
pub fn init_logging() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,handoff=info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
