//! The mirror's connections: a small pool, a timeout on every call, and a
//! gate that fails calls fast while PostgreSQL is known to be unavailable.
//!
//! The pool is `deadpool-postgres` (the deadpool project's tokio-postgres
//! manager), chosen over `bb8-postgres` because it is async end to end
//! (no blocking `Mutex` in its hot path), actively maintained by the same
//! authors as its tokio-postgres integration, has separate `wait`,
//! `create` and `recycle` timeouts enforced by the pool itself, and takes a
//! [`deadpool_postgres::Connect`] of our own: each new connection builds its
//! rustls connector with [`super::tls::connector`] from the `sslmode` /
//! `sslrootcert` of [`super::dsn`], so a rotated CA bundle is still read at
//! the next connection (bb8-postgres takes one `MakeTlsConnect` for the
//! pool's life). Connections are recycled with its `Fast` method (a closed
//! connection is dropped, an open one reused).
//!
//! What bounds a call ([`PoolSettings::timeout`], `--postgres-timeout`):
//!
//! - the client side: waiting for a pooled connection, connecting (TCP,
//!   TLS, authentication) and the statement itself all fit in one
//!   deadline; a connection whose statement ran out of time is taken out
//!   of the pool (its state is unknown), never handed out again;
//! - the server side: every session starts with `statement_timeout` and
//!   `idle_in_transaction_session_timeout` set to the same value, so a
//!   statement the client gave up on does not hold locks on a live server.
//!
//! A stalled server (a process stopped, not dead: connections open, no
//! answer) would otherwise cost every caller the whole timeout. The
//! [`Gate`] remembers that a call failed for want of PostgreSQL: until the
//! next probe is due, calls fail at once with [`super::MirrorError::Unavailable`];
//! one call at a time probes (after [`PROBE_PAUSE`]), and the first success
//! opens the gate for everyone.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::MirrorError;
use super::dsn::TlsSettings;

pub(crate) mod settings;

pub use self::settings::PoolSettings;

/// How long calls fail fast after a failure before one probes again.
pub(crate) const PROBE_PAUSE: Duration = Duration::from_secs(1);

/// Pure: the startup `options` of a session — the timeouts first, then
/// whatever the URL's own `options` set (which so win over ours).
pub(crate) fn session_options(existing: Option<&str>, timeout: Duration) -> String {
    let ms = timeout.as_millis().max(1);
    let ours = format!("-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}");
    match existing.map(str::trim).filter(|o| !o.is_empty()) {
        Some(theirs) => format!("{ours} {theirs}"),
        None => ours,
    }
}

/// The pool for `config` (whose TLS is `tls`), bounded by `settings`.
pub fn build(
    mut config: tokio_postgres::Config,
    tls: TlsSettings,
    settings: PoolSettings,
) -> Result<Pool, MirrorError> {
    let initial = super::tls::connector(&tls)?;
    let options = session_options(config.get_options(), settings.timeout);
    config.options(&options);
    config.connect_timeout(settings.timeout);
    let manager = Manager::from_connect(
        config,
        Connector { tls, initial },
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let limit = Some(settings.timeout);
    Pool::builder(manager)
        .max_size(settings.size.max(1))
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: limit,
            create: limit,
            recycle: limit,
        })
        .build()
        .map_err(|e| MirrorError::Pool(e.to_string()))
}

/// Makes each connection with a TLS connector built for it.
struct Connector {
    tls: TlsSettings,
    initial: MakeRustlsConnect,
}

impl deadpool_postgres::Connect for Connector {
    fn connect(
        &self,
        config: &tokio_postgres::Config,
    ) -> BoxFuture<'_, Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error>>
    {
        let config = config.clone();
        Box::pin(async move {
            // The root certificates are read again for each connection; if
            // they became unreadable since, the ones read at start serve.
            let tls = super::tls::connector(&self.tls).unwrap_or_else(|err| {
                tracing::warn!(error = %err, "PostgreSQL root certificates unreadable; using those read at start");
                self.initial.clone()
            });
            let (client, connection) = config.connect(tls).await?;
            let task = tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::warn!(error = %err, "the PostgreSQL connection ended");
                }
            });
            Ok((client, task))
        })
    }
}

/// Whether calls may try PostgreSQL now (see the module docs).
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
}

/// The gate's state: pure transitions, so they are tested without time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GateState {
    /// When the current unavailability began (`None`: available).
    pub down_since: Option<Instant>,
    /// No call before this, while unavailable (a probe is in flight or
    /// the pause after a failure runs).
    pub next_try: Option<Instant>,
}

impl GateState {
    /// Whether a call may go to PostgreSQL at `now`; a call let through
    /// while unavailable is the probe, and holds off the others for `hold`
    /// (its own timeout).
    pub(crate) fn admit(&mut self, now: Instant, hold: Duration) -> bool {
        match (self.down_since, self.next_try) {
            (None, _) => true,
            (Some(_), Some(next)) if now < next => false,
            (Some(_), _) => {
                self.next_try = Some(now + hold);
                true
            }
        }
    }

    /// PostgreSQL answered.
    pub(crate) fn succeeded(&mut self) {
        *self = Self::default();
    }

    /// A call failed for want of PostgreSQL at `now`: the next may try
    /// after `pause`.
    pub(crate) fn failed(&mut self, now: Instant, pause: Duration) {
        self.down_since.get_or_insert(now);
        self.next_try = Some(now + pause);
    }
}

impl Gate {
    /// Lets a call through, or says since when PostgreSQL is unavailable.
    pub fn admit(&self, hold: Duration) -> Result<(), Duration> {
        let Ok(mut state) = self.state.lock() else {
            return Ok(());
        };
        let now = Instant::now();
        if state.admit(now, hold) {
            Ok(())
        } else {
            Err(state.down_since.map(|s| now - s).unwrap_or_default())
        }
    }

    /// Records the outcome of a call let through: `unavailable` when it
    /// failed for want of PostgreSQL (no connection, no answer in time).
    pub fn record(&self, unavailable: bool) {
        if let Ok(mut state) = self.state.lock() {
            if unavailable {
                state.failed(Instant::now(), PROBE_PAUSE);
            } else {
                state.succeeded();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_get_both_timeouts_and_keep_the_urls_options() {
        let five = Duration::from_secs(5);
        assert_eq!(
            session_options(None, five),
            "-c statement_timeout=5000 -c idle_in_transaction_session_timeout=5000"
        );
        assert_eq!(
            session_options(Some("-c search_path=mirror"), Duration::from_millis(250)),
            "-c statement_timeout=250 -c idle_in_transaction_session_timeout=250 -c search_path=mirror"
        );
        assert_eq!(
            session_options(Some("  "), Duration::ZERO),
            "-c statement_timeout=1 -c idle_in_transaction_session_timeout=1",
            "0 would turn the server's timeout off"
        );
    }

    #[test]
    fn the_gate_fails_fast_while_down_and_lets_one_probe_through() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let hold = Duration::from_secs(5);
        let mut gate = GateState::default();
        assert!(gate.admit(s(0), hold) && gate.admit(s(0), hold), "open");
        gate.failed(s(1), PROBE_PAUSE);
        assert_eq!(gate.down_since, Some(s(1)));
        assert!(!gate.admit(s(1), hold), "within the pause");
        assert!(gate.admit(s(2), hold), "the probe");
        assert!(!gate.admit(s(3), hold), "while the probe is out");
        gate.failed(s(7), PROBE_PAUSE);
        assert_eq!(gate.down_since, Some(s(1)), "down since the first failure");
        assert!(!gate.admit(s(7), hold));
        assert!(gate.admit(s(8), hold), "the next probe");
        gate.succeeded();
        assert_eq!(gate, GateState::default());
        assert!(
            gate.admit(s(8), hold) && gate.admit(s(8), hold),
            "open again"
        );
    }

    #[test]
    fn a_pool_is_built_without_connecting() {
        let config: tokio_postgres::Config = "postgres://u@127.0.0.1:1/db".parse().expect("url");
        let tls = super::super::dsn::split("postgres://u@127.0.0.1:1/db?sslmode=disable", |_| None)
            .expect("dsn")
            .tls;
        let pool = build(
            config,
            tls,
            PoolSettings {
                timeout: Duration::from_millis(1500),
                size: 2,
            },
        )
        .expect("pool");
        let status = pool.status();
        assert_eq!((status.max_size, status.size), (2, 0));
        let timeouts = pool.timeouts();
        assert_eq!(timeouts.create, Some(Duration::from_millis(1500)));
        assert_eq!(timeouts.wait, Some(Duration::from_millis(1500)));
    }
}
