//! The pool's bounds as the flags give them (`--postgres-timeout`,
//! `--postgres-pool-size`): a leaf, so the flags (`dsn::args`) and the pool
//! both take them from here without importing each other.

use std::time::Duration;

/// The default of `--postgres-timeout`.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default of `--postgres-pool-size`.
pub(crate) const DEFAULT_POOL_SIZE: usize = 4;

/// How the mirror talks to PostgreSQL (`--postgres-timeout`,
/// `--postgres-pool-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    /// Most time one call may take: getting a connection (making one if
    /// needed) and running its statement. Also the session's
    /// `statement_timeout`.
    pub timeout: Duration,
    /// Most connections open at once.
    pub size: usize,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            size: DEFAULT_POOL_SIZE,
        }
    }
}
