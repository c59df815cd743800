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
//! - rows never move backwards: an upsert only replaces a row of another
//!   object incarnation (`id` is the uid) or of an older `(revision,
//!   resource_version)` — the `WHERE` of its `ON CONFLICT` clause, checked
//!   against PostgreSQL by the integration suite.
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
//! Kubernetes resourceVersions are opaque strings by contract, but every
//! apiserver backed by etcd issues the etcd revision, an integer; the mirror
//! stores it as `BIGINT` to compare. A resourceVersion that is not an integer
//! is refused with an error naming it rather than compared wrongly.

pub mod batch;
pub mod dsn;
pub mod pool;
pub mod purge;
pub mod resync;
pub(crate) mod revisions;
pub mod search;
pub(crate) mod tls;

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use self::dsn::{DsnError, TlsSettings};
use self::pool::{Gate, PoolSettings};
use handoff_core::api::Handoff;

/// The embedded migrations, in order: `(version, SQL)`.
const MIGRATIONS: [(i32, &str); 3] = [
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_history_retention.sql")),
    (3, include_str!("migrations/0003_search.sql")),
];

/// The advisory lock key that serializes migrations across processes.
const MIGRATION_LOCK: i64 = 0x68616e646f6666; // "handoff"

/// Most time applying the schema migrations may take (its transaction's
/// `statement_timeout` too), however short `--postgres-timeout` is.
pub(crate) const MIGRATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Rows read per statement when resync reads the rows' versions.
pub(crate) const VERSIONS_PAGE: i64 = 1000;

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

impl handoff_kube::loops::Categorized for MirrorError {
    fn category(&self) -> handoff_kube::loops::Category {
        match self {
            Self::Url(_) | Self::Dsn(_) | Self::Tls(_) | Self::Pool(_) | Self::Object { .. } => {
                handoff_kube::loops::Category::Invalid
            }
            Self::Connect { .. } | Self::Postgres(_) | Self::Timeout(_) | Self::Unavailable(_) => {
                handoff_kube::loops::Category::Transient
            }
            Self::Batch(error) => error.category(),
        }
    }
}

/// One row of `handoffs`: the mirror's copy of a counted Handoff.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `metadata.uid`.
    pub id: String,
    /// Namespace.
    pub namespace: String,
    /// `spec.handoffKey`.
    pub handoff_key: String,
    /// `spec.project`.
    pub project: String,
    /// `spec.repo`.
    pub repo: Option<String>,
    /// `spec.kind`.
    pub kind: Option<String>,
    /// `spec.createdBy`, empty when the object names no writer.
    pub created_by: String,
    /// `spec.body`.
    pub body: String,
    /// `status.revision`.
    pub revision: i64,
    /// `metadata.resourceVersion`, as the integer etcd issued.
    pub resource_version: i64,
    /// `metadata.creationTimestamp`.
    pub created_at: Timestamp,
    /// `status.updatedAt`.
    pub updated_at: Timestamp,
}

impl Row {
    /// The row for `h`; `Ok(None)` while the controller has not counted it
    /// yet (no `status.revision` / `status.updatedAt`).
    pub fn of(h: &Handoff) -> Result<Option<Row>, MirrorError> {
        let Some(status) = h.status.as_ref() else {
            return Ok(None);
        };
        let (Some(revision), Some(updated_at)) = (status.revision, status.updated_at.as_ref())
        else {
            return Ok(None);
        };
        let object = handoff_kube::store::describe(h);
        let problem = |problem: &str| MirrorError::Object {
            object: object.clone(),
            problem: problem.to_owned(),
        };
        let id = h.uid().ok_or_else(|| problem("it has no metadata.uid"))?;
        let namespace = h
            .namespace()
            .ok_or_else(|| problem("it has no namespace"))?;
        let rv = h.resource_version().unwrap_or_default();
        let resource_version = parse_resource_version(&rv)
            .ok_or_else(|| problem(&format!("resourceVersion {rv:?} is not an integer")))?;
        let created_at = h
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(updated_at.0);
        Ok(Some(Row {
            id,
            namespace,
            handoff_key: h.spec.handoff_key.clone(),
            project: h.spec.project.clone(),
            repo: h.spec.repo.clone(),
            kind: h.spec.kind.clone(),
            created_by: h.spec.created_by.clone().unwrap_or_default(),
            body: h.spec.body.clone(),
            revision,
            resource_version,
            created_at,
            updated_at: updated_at.0,
        }))
    }
}

/// What identifies a row's version, for resync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowVersion {
    /// Namespace.
    pub namespace: String,
    /// The key.
    pub handoff_key: String,
    /// `metadata.uid` of the object it was written from.
    pub id: String,
    /// Content revision.
    pub revision: i64,
    /// resourceVersion it was written from.
    pub resource_version: i64,
}

/// One row of `handoff_revisions`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRow {
    /// The key.
    pub handoff_key: String,
    /// Revision number.
    pub revision: i64,
    /// Project at that revision.
    pub project: String,
    /// Repo at that revision.
    pub repo: Option<String>,
    /// Kind at that revision.
    pub kind: Option<String>,
    /// Body at that revision.
    pub body: String,
    /// Writer of that revision (empty when unknown).
    pub created_by: String,
    /// When that revision was counted (its `updatedAt`).
    pub written_at: Timestamp,
}

/// The default of `--history-revisions`: revisions kept per key.
pub const DEFAULT_HISTORY_REVISIONS: NonZeroU32 = NonZeroU32::new(50).expect("50 is not zero");

/// How much history the mirror keeps (the controller's `--history-*` and
/// `--keep-history-on-delete` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Most revisions kept per key (namespace + key, every incarnation);
    /// recording one more drops the oldest.
    pub revisions: NonZeroU32,
    /// Past revisions written longer ago than this are dropped by resync
    /// (the current revision of a live handoff stays). Off when unset.
    pub max_age: Option<Duration>,
    /// Keep a deleted handoff's revisions (audit) instead of deleting them
    /// with its row.
    pub keep_on_delete: bool,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            revisions: DEFAULT_HISTORY_REVISIONS,
            max_age: None,
            keep_on_delete: false,
        }
    }
}

/// Pure: revisions written before the returned time are past `max_age` at
/// `now`; `None` when nothing can be that old (no limit, or before the
/// earliest time there is).
pub(crate) fn history_cutoff(now: Timestamp, max_age: Option<Duration>) -> Option<Timestamp> {
    now.checked_sub(max_age?).ok()
}

/// What [`Mirror::write_batch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// `(namespace, handoff_key)` of each row the upserts changed.
    pub changed: HashSet<(String, String)>,
    /// History rows each append dropped beyond the cap, in its order.
    pub dropped: Vec<u64>,
}

/// Rows as the column arrays [`UPSERT`] takes.
struct Columns<'a> {
    id: Vec<&'a str>,
    namespace: Vec<&'a str>,
    handoff_key: Vec<&'a str>,
    project: Vec<&'a str>,
    repo: Vec<Option<&'a str>>,
    kind: Vec<Option<&'a str>>,
    created_by: Vec<&'a str>,
    body: Vec<&'a str>,
    revision: Vec<i64>,
    resource_version: Vec<i64>,
    created_at: Vec<Timestamp>,
    updated_at: Vec<Timestamp>,
}

impl<'a> Columns<'a> {
    fn of(rows: &[&'a Row]) -> Self {
        Self {
            id: rows.iter().map(|r| r.id.as_str()).collect(),
            namespace: rows.iter().map(|r| r.namespace.as_str()).collect(),
            handoff_key: rows.iter().map(|r| r.handoff_key.as_str()).collect(),
            project: rows.iter().map(|r| r.project.as_str()).collect(),
            repo: rows.iter().map(|r| r.repo.as_deref()).collect(),
            kind: rows.iter().map(|r| r.kind.as_deref()).collect(),
            created_by: rows.iter().map(|r| r.created_by.as_str()).collect(),
            body: rows.iter().map(|r| r.body.as_str()).collect(),
            revision: rows.iter().map(|r| r.revision).collect(),
            resource_version: rows.iter().map(|r| r.resource_version).collect(),
            created_at: rows.iter().map(|r| r.created_at).collect(),
            updated_at: rows.iter().map(|r| r.updated_at).collect(),
        }
    }

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 12] {
        [
            &self.id,
            &self.namespace,
            &self.handoff_key,
            &self.project,
            &self.repo,
            &self.kind,
            &self.created_by,
            &self.body,
            &self.revision,
            &self.resource_version,
            &self.created_at,
            &self.updated_at,
        ]
    }
}

/// What [`Mirror::delete`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    /// Whether the row was there.
    pub row: bool,
    /// History rows of that incarnation deleted with it (0 when kept).
    pub history: u64,
}

/// A resourceVersion as the integer etcd issued, if it is one.
pub(crate) fn parse_resource_version(rv: &str) -> Option<i64> {
    rv.parse::<i64>().ok().filter(|v| *v >= 0)
}

/// Whether resync must rewrite the row `row` (if any) for the object of
/// uid `id` at content revision `revision`.
pub(crate) fn is_stale(row: Option<&RowVersion>, id: &str, revision: i64) -> bool {
    row.is_none_or(|row| row.id != id || row.revision < revision)
}

/// A position in list order: `(updated_at, handoff_key)`.
pub type ListAfter = (Timestamp, String);

/// Writes rows given as arrays of their columns (one array per column, the
/// rows in the same order; no `(namespace, handoff_key)` twice), each
/// unless the mirror holds it or something newer; returns the keys of the
/// rows it changed. One row is the arrays of one element.
const UPSERT: &str = r#"
INSERT INTO handoffs AS h (id, namespace, handoff_key, project, repo, kind, created_by, body,
                           revision, resource_version, created_at, updated_at)
SELECT u.id::uuid, u.namespace, u.handoff_key, u.project, u.repo, u.kind, u.created_by, u.body,
       u.revision, u.resource_version, u.created_at, u.updated_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::text[], $9::bigint[], $10::bigint[], $11::timestamptz[], $12::timestamptz[])
     AS u(id, namespace, handoff_key, project, repo, kind, created_by, body,
          revision, resource_version, created_at, updated_at)
ON CONFLICT (namespace, handoff_key) DO UPDATE SET
    id = EXCLUDED.id, project = EXCLUDED.project, repo = EXCLUDED.repo, kind = EXCLUDED.kind,
    created_by = EXCLUDED.created_by, body = EXCLUDED.body, revision = EXCLUDED.revision,
    resource_version = EXCLUDED.resource_version, created_at = EXCLUDED.created_at,
    updated_at = EXCLUDED.updated_at
WHERE h.id <> EXCLUDED.id
   OR h.revision < EXCLUDED.revision
   OR (h.revision = EXCLUDED.revision AND h.resource_version < EXCLUDED.resource_version)
RETURNING h.namespace, h.handoff_key
"#;

/// Records a revision and keeps the key's newest `$11` (by `written_at`,
/// then revision) in one statement, reading only that key's rows. The
/// revision is inserted only when it is among the newest `$11` (a stale
/// record of an old revision adds nothing); the rows it displaces are
/// deleted. Returns the rows deleted.
const RECORD_REVISION: &str = r#"
WITH inserted AS (
    INSERT INTO handoff_revisions (namespace, handoff_key, handoff_id, revision, project, repo,
                                   kind, body, created_by, written_at)
    SELECT $1::text, $2::text, $3::text::uuid, $4::bigint, $5::text, $6::text, $7::text,
           $8::text, $9::text, $10::timestamptz
    WHERE (SELECT count(*) FROM handoff_revisions
           WHERE namespace = $1 AND handoff_key = $2
             AND (written_at, revision) > ($10::timestamptz, $4::bigint)) < $11::bigint
    ON CONFLICT DO NOTHING
    RETURNING 1
), beyond AS (
    SELECT handoff_id, revision FROM handoff_revisions
    WHERE namespace = $1 AND handoff_key = $2
    ORDER BY written_at DESC, revision DESC, handoff_id DESC
    OFFSET $11::bigint - (SELECT count(*) FROM inserted)
)
DELETE FROM handoff_revisions r USING beyond b
WHERE r.namespace = $1 AND r.handoff_key = $2
  AND r.handoff_id = b.handoff_id AND r.revision = b.revision
"#;

/// Deletes one incarnation's row and, when `$4`, its history, in one
/// statement (so one transaction): `(rows, history rows)` deleted.
const DELETE: &str = r#"
WITH row AS (
    DELETE FROM handoffs
    WHERE namespace = $1 AND handoff_key = $2 AND id = $3::text::uuid
    RETURNING 1
), history AS (
    DELETE FROM handoff_revisions
    WHERE $4::boolean AND namespace = $1 AND handoff_key = $2 AND handoff_id = $3::text::uuid
    RETURNING 1
)
SELECT (SELECT count(*) FROM row), (SELECT count(*) FROM history)
"#;

/// At most `$3` past revisions written before `$2` (of namespace `$1`, or
/// of all): never the revision a live row holds.
const EXPIRE_HISTORY: &str = r#"
DELETE FROM handoff_revisions
WHERE (namespace, handoff_key, handoff_id, revision) IN (
    SELECT r.namespace, r.handoff_key, r.handoff_id, r.revision FROM handoff_revisions r
    WHERE ($1::text IS NULL OR r.namespace = $1) AND r.written_at < $2
      AND NOT EXISTS (SELECT 1 FROM handoffs h
                      WHERE h.namespace = r.namespace AND h.handoff_key = r.handoff_key
                        AND h.id = r.handoff_id AND h.revision = r.revision)
    LIMIT $3
)
"#;

/// Rows deleted per statement when history expires (a first pass after
/// the limit is set may have many; each batch is its own transaction).
const EXPIRE_BATCH: i64 = 1000;

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

    /// Applies the migrations once per process (when this mirror migrates),
    /// bounded by [`MIGRATION_TIMEOUT`] rather than the call timeout: an
    /// index build on a large table may take longer than one statement
    /// should. Calls made meanwhile wait for it at most the call timeout.
    async fn migrated(&self) -> Result<(), MirrorError> {
        if !self.migrate || self.migrated.load(Ordering::Acquire) {
            return Ok(());
        }
        let timeout = self.settings.timeout;
        let _migrating = tokio::time::timeout(timeout, self.migration.lock())
            .await
            .map_err(|_| MirrorError::Timeout(timeout))?;
        if self.migrated.load(Ordering::Acquire) {
            return Ok(());
        }
        let limit = MIGRATION_TIMEOUT.max(timeout);
        let mut client = tokio::time::timeout(timeout, self.client())
            .await
            .map_err(|_| MirrorError::Timeout(timeout))??;
        let connection: &mut tokio_postgres::Client = &mut client;
        match tokio::time::timeout(limit, migrate(connection, limit)).await {
            Ok(result) => result?,
            Err(_) => {
                drop(deadpool_postgres::Object::take(client));
                return Err(MirrorError::Timeout(limit));
            }
        }
        self.migrated.store(true, Ordering::Release);
        Ok(())
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

    /// Writes `row` unless the mirror already holds it or something newer;
    /// `true` when the row changed.
    pub async fn upsert(&self, row: &Row) -> Result<bool, MirrorError> {
        let written = self.write_batch(&[row], &[]).await?;
        Ok(!written.changed.is_empty())
    }

    /// Writes `upserts` (as [`Mirror::upsert`], in one statement; no key
    /// twice) and appends `records` to the history (as
    /// [`Mirror::record_revision`], pipelined), in one transaction: all of
    /// it or none (see [`batch`]).
    pub async fn write_batch(
        &self,
        upserts: &[&Row],
        records: &[&Row],
    ) -> Result<Written, MirrorError> {
        let cap = i64::from(self.retention.revisions.get());
        self.with(|client| async move {
            let c = &client;
            let upsert = match upserts {
                [] => None,
                _ => Some(c.prepare_cached(UPSERT).await?),
            };
            let record = match records {
                [] => None,
                _ => Some(c.prepare_cached(RECORD_REVISION).await?),
            };
            let columns = Columns::of(upserts);
            let single = usize::from(upsert.is_some()) + records.len() == 1;
            // Sent in this order on the one connection, answered in it.
            let begin = async {
                match single {
                    true => Ok(()),
                    false => c.batch_execute("BEGIN").await,
                }
            };
            let rows = async {
                match &upsert {
                    None => Ok(Vec::new()),
                    Some(statement) => c.query(statement, &columns.params()).await,
                }
            };
            let appended = futures::future::join_all(records.iter().map(|row| {
                let record = record.clone();
                let cap = &cap;
                async move {
                    match record {
                        None => Ok(0),
                        Some(statement) => {
                            c.execute(
                                &statement,
                                &[
                                    &row.namespace,
                                    &row.handoff_key,
                                    &row.id,
                                    &row.revision,
                                    &row.project,
                                    &row.repo,
                                    &row.kind,
                                    &row.body,
                                    &row.created_by,
                                    &row.updated_at,
                                    cap,
                                ],
                            )
                            .await
                        }
                    }
                }
            }));
            let commit = async {
                match single {
                    true => Ok(()),
                    false => c.batch_execute("COMMIT").await,
                }
            };
            let (begun, rows, appended, committed) = futures::join!(begin, rows, appended, commit);
            begun?;
            let changed = rows?
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                .collect();
            let dropped = appended.into_iter().collect::<Result<Vec<u64>, _>>()?;
            // After a failed statement COMMIT rolls back: the error above
            // is the one to report.
            committed?;
            Ok(Written { changed, dropped })
        })
        .await
    }

    /// Appends `row`'s revision to the history (nothing when it is already
    /// there) and drops the key's oldest revisions beyond the retention's
    /// cap, in one statement; returns how many were dropped. Call it only
    /// for a revision the apiserver has stored in `status`, so a number is
    /// never recorded for content it was not given.
    pub async fn record_revision(&self, row: &Row) -> Result<u64, MirrorError> {
        let written = self.write_batch(&[], &[row]).await?;
        Ok(written.dropped.first().copied().unwrap_or_default())
    }

    /// Deletes the row of object `id` (uid) of `key` in `namespace`, and
    /// that object's history unless the retention keeps it, in one
    /// statement. A newer incarnation's row and history stay.
    pub async fn delete(
        &self,
        namespace: &str,
        key: &str,
        id: &str,
    ) -> Result<Deleted, MirrorError> {
        let purge = !self.retention.keep_on_delete;
        self.with(|c| async move {
            let counts = c
                .query_one(DELETE, &[&namespace, &key, &id, &purge])
                .await?;
            let (rows, history): (i64, i64) = (counts.get(0), counts.get(1));
            Ok(Deleted {
                row: rows > 0,
                history: u64::try_from(history).unwrap_or_default(),
            })
        })
        .await
    }

    /// Drops past revisions (of `namespace`, or of all) older than the
    /// retention's `max_age` at `now`, in batches; returns how many. The
    /// revision a live row holds stays. Nothing without an age limit.
    pub async fn expire_history(
        &self,
        namespace: Option<&str>,
        now: Timestamp,
    ) -> Result<u64, MirrorError> {
        let Some(cutoff) = history_cutoff(now, self.retention.max_age) else {
            return Ok(0);
        };
        let mut total = 0;
        loop {
            let n = self
                .with(|c| async move {
                    c.execute(EXPIRE_HISTORY, &[&namespace, &cutoff, &EXPIRE_BATCH])
                        .await
                })
                .await?;
            total += n;
            if n < EXPIRE_BATCH.unsigned_abs() {
                return Ok(total);
            }
        }
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

    /// Revision `revision` of `key` from the history (of the newest object
    /// incarnation that had it).
    pub async fn revision(
        &self,
        namespace: &str,
        key: &str,
        revision: i64,
    ) -> Result<Option<HistoryRow>, MirrorError> {
        self.with(|c| async move {
            let row = c
                .query_opt(
                    "SELECT handoff_key, revision, project, repo, kind, body, created_by, written_at \
                     FROM handoff_revisions WHERE namespace = $1 AND handoff_key = $2 AND revision = $3 \
                     ORDER BY written_at DESC LIMIT 1",
                    &[&namespace, &key, &revision],
                )
                .await?;
            Ok(row.map(|r| HistoryRow {
                handoff_key: r.get(0),
                revision: r.get(1),
                project: r.get(2),
                repo: r.get(3),
                kind: r.get(4),
                body: r.get(5),
                created_by: r.get(6),
                written_at: r.get(7),
            }))
        })
        .await
    }
}

/// A row as `list_handoffs` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedRow {
    /// The key.
    pub handoff_key: String,
    /// Project.
    pub project: String,
    /// Repo.
    pub repo: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Writer (empty when unknown).
    pub created_by: String,
    /// Body.
    pub body: String,
    /// `status.updatedAt`.
    pub updated_at: Timestamp,
    /// Content revision.
    pub revision: i64,
}

impl ListedRow {
    /// A row whose first eight columns are key, project, repo, kind,
    /// writer, body, updated_at and revision (the list and search queries).
    pub fn of(r: &tokio_postgres::Row) -> Self {
        Self {
            handoff_key: r.get(0),
            project: r.get(1),
            repo: r.get(2),
            kind: r.get(3),
            created_by: r.get(4),
            body: r.get(5),
            updated_at: r.get(6),
            revision: r.get(7),
        }
    }
}

/// Applies the embedded migrations not yet recorded, in one transaction
/// holding an advisory lock, so concurrent starts apply each exactly once.
async fn migrate(
    client: &mut tokio_postgres::Client,
    limit: Duration,
) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    // The session's statement_timeout is the call timeout; not here.
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {}",
        limit.as_millis().max(1)
    ))
    .await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS handoff_schema_migrations (\
             version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .await?;
    for (version, sql) in MIGRATIONS {
        let done = tx
            .query_opt(
                "SELECT 1 FROM handoff_schema_migrations WHERE version = $1",
                &[&version],
            )
            .await?
            .is_some();
        if !done {
            tx.batch_execute(sql).await?;
            tx.execute(
                "INSERT INTO handoff_schema_migrations (version) VALUES ($1)",
                &[&version],
            )
            .await?;
            tracing::info!(version, "applied a mirror migration");
        }
    }
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_must_be_integers() {
        assert_eq!(parse_resource_version("12345"), Some(12345));
        assert_eq!(parse_resource_version(""), None);
        assert_eq!(parse_resource_version("abc"), None);
        assert_eq!(parse_resource_version("-1"), None);
    }

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

    #[test]
    fn history_keeps_fifty_revisions_and_forgets_on_delete_by_default() {
        let retention = Retention::default();
        assert_eq!(retention.revisions.get(), 50);
        assert_eq!(retention.max_age, None);
        assert!(!retention.keep_on_delete);
    }

    #[test]
    fn history_cutoffs() {
        let now = Timestamp::from_second(10_000).expect("ts");
        let hour = Duration::from_secs(3600);
        assert_eq!(history_cutoff(now, None), None, "no limit");
        assert_eq!(
            history_cutoff(now, Some(hour)),
            Some(Timestamp::from_second(6_400).expect("ts"))
        );
        assert_eq!(history_cutoff(now, Some(Duration::ZERO)), Some(now));
        assert_eq!(
            history_cutoff(now, Some(Duration::from_secs(u64::MAX))),
            None,
            "older than any time there is"
        );
    }

    #[test]
    fn migrations_are_ordered_and_unique() {
        let versions: Vec<i32> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        let mut sorted = versions.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(versions, sorted);
        let statements = MIGRATIONS
            .iter()
            .flat_map(|(_, sql)| sql.lines())
            .filter(|l| !l.trim_start().starts_with("--"));
        for line in statements {
            assert!(
                !line.to_uppercase().contains("JSON"),
                "typed columns only: {line}"
            );
        }
    }
}
