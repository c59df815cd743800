//! The schema: hand-written SQL in `migrations/*.sql`, embedded and
//! applied once per process under an advisory lock (several controllers
//! may start at once), recorded in `handoff_schema_migrations`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::{Mirror, MirrorError};

/// The embedded migrations, in order: `(version, SQL)`.
const MIGRATIONS: [(i32, &str); 4] = [
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_history_retention.sql")),
    (3, include_str!("migrations/0003_search.sql")),
    (4, include_str!("migrations/0004_object_rows.sql")),
];

/// The advisory lock key that serializes migrations across processes.
const MIGRATION_LOCK: i64 = 0x68616e646f6666; // "handoff"

/// Most time applying the schema migrations may take (its transaction's
/// `statement_timeout` too), however short `--postgres-timeout` is.
pub(crate) const MIGRATION_TIMEOUT: Duration = Duration::from_secs(300);

impl Mirror {
    /// Applies the migrations once per process (when this mirror migrates),
    /// bounded by [`MIGRATION_TIMEOUT`] rather than the call timeout: an
    /// index build on a large table may take longer than one statement
    /// should. Calls made meanwhile wait for it at most the call timeout.
    pub(crate) async fn migrated(&self) -> Result<(), MirrorError> {
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
