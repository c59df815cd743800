//! Why a mirror call failed ([`MirrorError`]), which failures say
//! PostgreSQL is unavailable (the pool's gate and the loops' backoff read
//! it), and whom a failure is owed to ([`Blame`], by SQLSTATE): a value the
//! caller sent that PostgreSQL refused is bad input, not an outage, and a
//! caller is told either in our words — the database's text may quote the
//! value or the schema, so it goes to the log, never to an answer.

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

/// Whom a failed mirror call is owed to, with what a caller may be told,
/// in our words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blame {
    /// PostgreSQL refused a value the statement carried (a data exception,
    /// a query it cannot parse, a value past its limits): what about it.
    Argument(&'static str),
    /// PostgreSQL cannot be reached, did not answer in time, or is not
    /// taking work (shutting down, out of connections): why; retriable.
    Unavailable(String),
    /// Anything else: the mirror's own state or setup (a missing table, a
    /// permission, the URL), which the log says.
    Mirror,
}

/// The blame of a database error by its SQLSTATE (five characters; the
/// first two are its class): class 22 (data exception: 22021, a byte
/// sequence it cannot store, such as NUL; 22001, a value too long), 42601
/// (a syntax error, as a text search query can raise) and class 54
/// (program limit exceeded: a query too large or complex) are the
/// argument's; classes 08 (connection exception), 53 (insufficient
/// resources) and 57 (operator intervention: shutdown, cannot connect now)
/// say PostgreSQL is unavailable; everything else is the mirror's.
fn blame_of_sqlstate(code: &str) -> Blame {
    match (code.get(..2), code) {
        (_, "22021") => Blame::Argument(
            "it holds a character or byte sequence PostgreSQL cannot store (such as NUL)",
        ),
        (_, "22001") => Blame::Argument("it is longer than PostgreSQL stores it"),
        (_, "22003") => Blame::Argument("it is a number out of PostgreSQL's range"),
        (Some("22"), _) => Blame::Argument("PostgreSQL cannot take it as data"),
        (_, "42601") => Blame::Argument("PostgreSQL cannot parse it as a query"),
        (Some("54"), _) => Blame::Argument("it is too large or complex for PostgreSQL"),
        (Some("08"), _) => Blame::Unavailable("the connection to PostgreSQL failed".into()),
        (Some("53"), _) => Blame::Unavailable(
            "PostgreSQL is out of resources (connections, memory or disk)".into(),
        ),
        (Some("57"), _) => Blame::Unavailable(
            "PostgreSQL is not taking work (shutting down, starting or cancelling)".into(),
        ),
        _ => Blame::Mirror,
    }
}

impl MirrorError {
    /// Whom this failure is owed to ([`Blame`]), in words of ours that
    /// quote nothing of the database's.
    pub fn blame(&self) -> Blame {
        match self {
            Self::Postgres(error) => match error.code() {
                Some(state) => blame_of_sqlstate(state.code()),
                None => Blame::Unavailable("the connection to PostgreSQL broke".into()),
            },
            Self::Connect { .. } => {
                Blame::Unavailable("no connection to PostgreSQL could be made".into())
            }
            Self::Timeout(limit) => {
                Blame::Unavailable(format!("PostgreSQL did not answer within {limit:?}"))
            }
            Self::Unavailable(since) => Blame::Unavailable(format!(
                "PostgreSQL has been unavailable for {}s",
                since.as_secs()
            )),
            Self::Batch(error) => error.blame(),
            Self::Url(_) | Self::Dsn(_) | Self::Tls(_) | Self::Pool(_) | Self::Object { .. } => {
                Blame::Mirror
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_blame_the_argument_the_connection_or_the_mirror() {
        // (SQLSTATE, the argument's / unavailable / the mirror's)
        let cases = [
            ("22021", "argument"),
            ("22001", "argument"),
            ("22003", "argument"),
            ("22P02", "argument"),
            ("2200N", "argument"),
            ("42601", "argument"),
            ("54000", "argument"),
            ("54001", "argument"),
            ("08006", "unavailable"),
            ("08001", "unavailable"),
            ("53300", "unavailable"),
            ("57P01", "unavailable"),
            ("57014", "unavailable"),
            ("42P01", "mirror"),
            ("42501", "mirror"),
            ("23505", "mirror"),
            ("40001", "mirror"),
            ("XX000", "mirror"),
            ("", "mirror"),
        ];
        for (code, want) in cases {
            let got = match blame_of_sqlstate(code) {
                Blame::Argument(_) => "argument",
                Blame::Unavailable(_) => "unavailable",
                Blame::Mirror => "mirror",
            };
            assert_eq!(got, want, "{code:?}");
        }
    }

    #[test]
    fn what_a_caller_is_told_is_ours() {
        let cases = [
            (
                MirrorError::Timeout(Duration::from_secs(5)),
                Blame::Unavailable("PostgreSQL did not answer within 5s".into()),
            ),
            (
                MirrorError::Unavailable(Duration::from_secs(3)),
                Blame::Unavailable("PostgreSQL has been unavailable for 3s".into()),
            ),
            (
                MirrorError::Batch(Arc::new(MirrorError::Timeout(Duration::from_secs(1)))),
                Blame::Unavailable("PostgreSQL did not answer within 1s".into()),
            ),
            (MirrorError::Pool("no runtime".into()), Blame::Mirror),
        ];
        for (error, want) in cases {
            assert_eq!(error.blame(), want, "{error}");
        }
    }
}
