//! The PostgreSQL mirror of `Handoff` objects: a relational copy for fast,
//! indexed lists and for history, kept by the controller (the only writer)
//! and read by the bridge.
//!
//! Why a mirror and not the source of truth: the apiserver stays the
//! authority (RBAC, admission, `kubectl`, GitOps); the mirror answers what
//! etcd answers badly — a project's handoffs sorted by `updated_at` without
//! reading the whole project, and every past revision of a handoff.
//!
//! - schema: hand-written SQL in `migrations/*.sql`, embedded with
//!   `include_str!` and applied at start under an advisory lock (several
//!   controllers may start at once), recorded in `handoff_schema_migrations`.
//! - the mirror holds objects, not guesses: only the current handoff of a
//!   key (the object whose name is derived from its key,
//!   [`handoff_core::handoff::canonical`]) has a row ([`Row::of`] refuses any
//!   other), a row is written only by its own object (`id` is the uid) or a
//!   newer incarnation of the same name, and history reads never cross
//!   objects (`history`).
//! - rows never move backwards: an upsert replaces a row only of an older
//!   `(revision, resource_version)`, or of an older incarnation — the
//!   `WHERE` of its `ON CONFLICT` clause, checked against PostgreSQL by the
//!   integration suite.
//! - `handoff_revisions` holds one row per counted revision, recorded only
//!   once the revision is stored in the object's status, and forgets (see
//!   [`Retention`]): a deleted object's revisions go with its row, in the
//!   same statement (unless `--keep-history-on-delete`); each key keeps at
//!   most `--history-revisions` (the statement that records a revision
//!   drops the oldest beyond it); resync drops past revisions older than
//!   `--history-max-age`; and `handoff mirror purge` ([`purge`]) removes a
//!   leaked body by hand.
//! - history is scoped by object incarnation where it is deleted with an
//!   object: rows record the object's uid (`handoff_id`), and a delete
//!   removes only that uid's revisions, so a newer incarnation of the key
//!   never loses its own. Revisions an older incarnation left (kept for
//!   audit) count against the key's cap and are the first dropped.
//! - the controller's Handoff loop writes through [`batch`]: concurrent
//!   reconciles' upserts share one multi-row statement (the same
//!   `ON CONFLICT` rule; [`Mirror::upsert`] is the batch of one) and their
//!   history appends one transaction, pipelined.
//! - connections come from a small pool ([`pool`], deadpool-postgres),
//!   made lazily and dropped after a failure, so PostgreSQL being down is
//!   an error of the call, never of the process; the controller retries
//!   with backoff and its resync catches up. Every call is bounded by
//!   `--postgres-timeout` (client side, and `statement_timeout` on the
//!   server), and while PostgreSQL is known to be unavailable calls fail at
//!   once ([`pool::Gate`]): a stalled server costs no caller more than one
//!   timeout.
//! - the URL is checked when the mirror is made (a wrong one stops the
//!   process at start); `sslmode` / `sslrootcert` mean what they mean to
//!   libpq ([`dsn`]), TLS is rustls ([`tls`]), and the password is never
//!   shown: errors and logs name the URL through [`dsn::redact`].
//!
//! Modules by concern: [`MirrorError`] (`error`), the rows (`row`), the
//! schema (`migrate`), the controller's writes (`write`), the history and
//! its retention (`history`), search ([`search`]), the resync plan
//! ([`resync`]), the write batcher ([`batch`]), connections ([`pool`],
//! [`dsn`], `tls`) and `handoff mirror purge` ([`purge`]); this file is the
//! [`Mirror`] itself (its pool, its bounded calls) and its list reads.
//!
//! Kubernetes resourceVersions are opaque strings by contract, but every
//! apiserver backed by etcd issues the etcd revision, an integer; the mirror
//! stores it as `BIGINT` to compare. A resourceVersion that is not an integer
//! is refused with an error naming it rather than compared wrongly.

pub mod batch;
pub mod dsn;
mod error;
mod history;
mod migrate;
pub mod pool;
pub mod purge;
pub mod resync;
mod row;
pub mod search;
pub(crate) mod tls;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use self::error::{Blame, MirrorError};
pub use self::history::{DEFAULT_HISTORY_REVISIONS, Retention, RevisionEntry};
pub use self::row::{ListAfter, ListedRow, Row, RowVersion};
pub use self::write::{Deleted, Written};

use self::dsn::TlsSettings;
use self::pool::{Gate, PoolSettings};

/// Rows read per statement when resync reads the rows' versions.
pub(crate) const VERSIONS_PAGE: i64 = 1000;

/// One page of a project's rows in list order, strictly after a position
/// (`$4`, `$5`).
const LIST: &str = r#"
SELECT handoff_key, project, repo, kind, created_by, body, updated_at, revision
FROM handoffs
WHERE namespace = $1 AND project = $2 AND ($3::text IS NULL OR repo = $3)
  AND ($4::timestamptz IS NULL OR updated_at < $4
       OR (updated_at = $4 AND handoff_key COLLATE "C" > $5::text COLLATE "C"))
ORDER BY updated_at DESC, handoff_key COLLATE "C" ASC
LIMIT $6
"#;

/// A pooled connection, shared with the statement of one call.
type Client = Arc<deadpool_postgres::Object>;

/// The mirror: a pool of connections made on first use ([`pool`]).
pub struct Mirror {
    config: tokio_postgres::Config,
    tls: TlsSettings,
    shown: String,
    migrate: bool,
    migrated: AtomicBool,
    migration: tokio::sync::Mutex<()>,
    retention: Retention,
    settings: PoolSettings,
    pool: deadpool_postgres::Pool,
    gate: Gate,
}

impl Mirror {
    /// A mirror at `url` (`sslmode` / `sslrootcert` as libpq reads them:
    /// from the URL, else `PGSSLMODE` / `PGSSLROOTCERT`). `migrate`: apply
    /// the embedded migrations before the first call, and again after a
    /// call found a table missing (a database re-created under it); the
    /// controller does, the bridge only reads. Everything but the connection itself is
    /// checked here, the root certificates included.
    pub fn new(url: &str, migrate: bool) -> Result<Self, MirrorError> {
        let dsn = dsn::split(url, |name| std::env::var(name).ok())?;
        let shown = dsn::redact(url);
        let mut config: tokio_postgres::Config =
            dsn.rest.parse().map_err(|e: tokio_postgres::Error| {
                MirrorError::Url(format!(
                    "the PostgreSQL URL {shown} is not valid: {e} \
                     (expected postgres://user:password@host:port/db?sslmode=verify-full&sslrootcert=/path/ca.crt)"
                ))
            })?;
        config.ssl_mode(dsn.tls.negotiation());
        if config.get_application_name().is_none() {
            config.application_name("handoff");
        }
        let settings = PoolSettings::default();
        let pool = pool::build(config.clone(), dsn.tls.clone(), settings)?;
        Ok(Self {
            config,
            tls: dsn.tls,
            shown,
            migrate,
            migrated: AtomicBool::new(false),
            migration: tokio::sync::Mutex::new(()),
            retention: Retention::default(),
            settings,
            pool,
            gate: Gate::default(),
        })
    }

    /// This mirror with its calls bounded and pooled as `settings` say
    /// (`--postgres-timeout`, `--postgres-pool-size`).
    pub fn with_pool(mut self, settings: PoolSettings) -> Result<Self, MirrorError> {
        self.pool = pool::build(self.config.clone(), self.tls.clone(), settings)?;
        self.settings = settings;
        Ok(self)
    }

    /// This mirror, keeping history as `retention` says (the default keeps
    /// [`DEFAULT_HISTORY_REVISIONS`] per key and forgets on delete).
    pub fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// The URL with its password hidden, and what TLS it asks for (logs).
    pub fn describe(&self) -> String {
        format!("{} ({})", self.shown, self.tls)
    }

    /// A pooled connection (made if needed).
    async fn client(&self) -> Result<deadpool_postgres::Object, MirrorError> {
        self.pool.get().await.map_err(|err| match err {
            deadpool_postgres::PoolError::Timeout(_) => MirrorError::Timeout(self.settings.timeout),
            deadpool_postgres::PoolError::Backend(error) => MirrorError::Connect {
                tls: self.tls.clone(),
                error,
            },
            other => MirrorError::Pool(other.to_string()),
        })
    }

    /// Runs `f` with a pooled connection, all within `--postgres-timeout`,
    /// unless PostgreSQL is known to be unavailable ([`Gate`]). A
    /// connection whose statement ran out of time leaves the pool.
    async fn with<T, F, Fut>(&self, f: F) -> Result<T, MirrorError>
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let timeout = self.settings.timeout;
        self.gate.admit(timeout).map_err(MirrorError::Unavailable)?;
        if let Err(err) = self.migrated().await {
            self.gate.record(err.is_unavailability());
            return Err(err);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let result = match tokio::time::timeout_at(deadline, self.client()).await {
            Err(_) => Err(MirrorError::Timeout(timeout)),
            Ok(Err(err)) => Err(err),
            Ok(Ok(client)) => {
                let client = Arc::new(client);
                let outcome = tokio::time::timeout_at(deadline, f(client.clone())).await;
                match outcome {
                    Ok(result) => result.map_err(MirrorError::from),
                    Err(_) => {
                        // Its statement may still be running: not reused.
                        if let Ok(client) = Arc::try_unwrap(client) {
                            drop(deadpool_postgres::Object::take(client));
                        }
                        Err(MirrorError::Timeout(timeout))
                    }
                }
            }
        };
        self.gate.record(
            result
                .as_ref()
                .err()
                .is_some_and(MirrorError::is_unavailability),
        );
        if let Err(MirrorError::Postgres(error)) = &result
            && error.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE)
        {
            self.migrated.store(false, Ordering::Release);
        }
        result
    }

    /// The version of every row (no body), of one namespace or of all,
    /// read [`VERSIONS_PAGE`] rows per statement in `(namespace, key)` order.
    pub async fn versions(&self, namespace: Option<&str>) -> Result<Vec<RowVersion>, MirrorError> {
        let mut all = Vec::new();
        loop {
            let after = all
                .last()
                .map(|v: &RowVersion| (v.namespace.clone(), v.handoff_key.clone()));
            let page = self.versions_after(namespace, after).await?;
            let last = page.len() < usize::try_from(VERSIONS_PAGE).unwrap_or(usize::MAX);
            all.extend(page);
            if last {
                return Ok(all);
            }
        }
    }

    /// One page of [`Mirror::versions`], strictly after `after`.
    async fn versions_after(
        &self,
        namespace: Option<&str>,
        after: Option<(String, String)>,
    ) -> Result<Vec<RowVersion>, MirrorError> {
        let (after_ns, after_key) = after.unzip();
        self.with(|c| async move {
            let rows = c
                .query(
                    r#"SELECT namespace, handoff_key, id::text, revision, resource_version FROM handoffs
                       WHERE ($1::text IS NULL OR namespace = $1)
                         AND ($2::text IS NULL OR (namespace, handoff_key) > ($2, $3::text))
                       ORDER BY namespace, handoff_key LIMIT $4"#,
                    &[&namespace, &after_ns, &after_key, &VERSIONS_PAGE],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| RowVersion {
                    namespace: r.get(0),
                    handoff_key: r.get(1),
                    id: r.get(2),
                    revision: r.get(3),
                    resource_version: r.get(4),
                })
                .collect())
        })
        .await
    }

    /// One page of a project's rows in list order (`updated_at` desc, key
    /// asc in byte order), strictly after `after`.
    pub async fn list(
        &self,
        namespace: &str,
        project: &str,
        repo: Option<&str>,
        after: Option<&ListAfter>,
        limit: i64,
    ) -> Result<Vec<ListedRow>, MirrorError> {
        let after_at = after.map(|a| a.0);
        let after_key = after.map(|a| a.1.as_str()).unwrap_or_default();
        self.with(|c| async move {
            let rows = c
                .query(
                    LIST,
                    &[&namespace, &project, &repo, &after_at, &after_key, &limit],
                )
                .await?;
            Ok(rows.iter().map(ListedRow::of).collect())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_up_front_and_shown_without_their_password() {
        let err = Mirror::new("postgres://u:secret@h:notaport/db", true)
            .err()
            .expect("invalid")
            .to_string();
        assert!(
            err.starts_with("the PostgreSQL URL postgres://u:***@h:notaport/db is not valid: "),
            "{err}"
        );
        assert!(!err.contains("secret"), "{err}");
        let err = Mirror::new("postgres://u:secret@h/db?sslmode=bogus", true)
            .err()
            .expect("invalid")
            .to_string();
        assert_eq!(
            err,
            "invalid sslmode \"bogus\" in the PostgreSQL URL: expected one of disable, prefer, require, verify-ca, verify-full"
        );
        let mirror = Mirror::new(
            "postgres://u:secret@127.0.0.1:5432/postgres?sslmode=require",
            true,
        )
        .expect("valid");
        assert_eq!(
            mirror.describe(),
            "postgres://u:***@127.0.0.1:5432/postgres?sslmode=require (sslmode=require)"
        );
        assert_eq!(
            mirror.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
    }
}
