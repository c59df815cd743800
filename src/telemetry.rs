//! Logging. Every process logs structured JSON to stderr (stdout is reserved
//! for command output and, over stdio, for MCP frames). `RUST_LOG` filters;
//! the default is `info` for this crate and `warn` for dependencies, except
//! kube-client's per-request failure log, which would report every expected
//! 404/409/500 (absent handoffs, readiness polls) as an error; callers log
//! the failures that matter with context.

use tracing_subscriber::EnvFilter;

/// Installs the JSON subscriber once; later calls are no-ops.
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,handoff=info,kube_client::client::builder=off"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
