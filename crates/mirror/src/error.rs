//! Why a mirror call failed ([`MirrorError`]), and which failures say
//! PostgreSQL is unavailable (the pool's gate and the loops' backoff read it).

use std::sync::Arc;
use std::time::Duration;

use crate::dsn::{DsnError, TlsSettings};

/// Why a mirror call failed.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// The PostgreSQL URL does not parse (the message shows it redacted).
    #[error("{0}")]
    Url(String),
    /// Its `sslmode` / `sslrootcert`, or where it is read from, is wrong.
    #[error(transparent)]
    Dsn(#[from] DsnError),
    /// TLS cannot be set up (the root certificates cannot be read).
    #[error("PostgreSQL TLS: {0}")]
    Tls(String),
    /// No connection could be made (unreachable, refused, the server's
    /// certificate not trusted, …); `tls` says what was asked of TLS.
    #[error("PostgreSQL ({tls}): {}", with_causes(error))]
    Connect {
        /// `sslmode=…[, sslrootcert=…]`.
        tls: TlsSettings,
        /// Why.
        error: tokio_postgres::Error,
    },
    /// A statement failed, or the connection broke.
    #[error("PostgreSQL: {}", with_causes(.0))]
    Postgres(tokio_postgres::Error),
    /// The pool cannot be set up.
    #[error("PostgreSQL connection pool: {0}")]
    Pool(String),
    /// PostgreSQL did not answer within `--postgres-timeout`.
    #[error("PostgreSQL did not answer within {0:?}")]
    Timeout(Duration),
    /// A recent call found PostgreSQL unavailable: this one was not tried
    /// (one call at a time probes it until it answers).
    #[error("PostgreSQL has been unavailable for {}s (failing fast until it answers again)", .0.as_secs())]
    Unavailable(Duration),
    /// The batch this call was written in failed ([`batch`]): each of its
    /// callers gets the batch's error.
    #[error(transparent)]
    Batch(Arc<MirrorError>),
    /// An object cannot be mirrored as it is.
    #[error("handoff {object} cannot be mirrored: {problem}")]
    Object {
        /// `namespace/name`.
        object: String,
        /// What is wrong.
        problem: String,
    },
}

impl MirrorError {
    /// Whether this says PostgreSQL is unavailable (no connection, no
    /// answer in time, the connection broke), as opposed to an answer.
    pub fn is_unavailability(&self) -> bool {
        match self {
            Self::Connect { .. } | Self::Timeout(_) | Self::Unavailable(_) => true,
            Self::Postgres(error) => error.as_db_error().is_none(),
            Self::Batch(error) => error.is_unavailability(),
            Self::Url(_) | Self::Dsn(_) | Self::Tls(_) | Self::Pool(_) | Self::Object { .. } => {
                false
            }
        }
    }
}

impl From<tokio_postgres::Error> for MirrorError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Postgres(error)
    }
}

/// `error` and its causes, `: `-joined: a tokio-postgres error shows only
/// its kind (`db error`, `error performing TLS handshake`), the reason is
/// its source. (So the variants above show it, and have no source.)
fn with_causes(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

impl handoff_core::loops::Categorized for MirrorError {
    fn category(&self) -> handoff_core::loops::Category {
        match self {
            Self::Url(_) | Self::Dsn(_) | Self::Tls(_) | Self::Pool(_) | Self::Object { .. } => {
                handoff_core::loops::Category::Invalid
            }
            Self::Connect { .. } | Self::Postgres(_) | Self::Timeout(_) | Self::Unavailable(_) => {
                handoff_core::loops::Category::Transient
            }
            Self::Batch(error) => error.category(),
        }
    }
}
