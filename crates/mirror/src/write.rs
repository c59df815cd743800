//! The controller's writes: upserts (rows never move backwards, and a row
//! is written only by its own object: the `WHERE` of the `ON CONFLICT`
//! clause), history appends that keep each key's cap, and deletes of one
//! object's row and history.
//!
//! A row belongs to an object: its uid (`id`) and its name. It is updated
//! by the same uid, or replaced by another object of the same name — a
//! newer incarnation, since a namespace holds one object per name at a
//! time — never by an object of another name that names the same key. Rows
//! written before migration 0004 carry no name and may be replaced by the
//! key's current object. The controller writes only objects whose name is
//! derived from their key ([`handoff_core::handoff::canonical`]), so the row
//! of a key is its current handoff's.

use std::collections::HashSet;

use k8s_openapi::jiff::Timestamp;

use crate::{Mirror, MirrorError, Row};

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
    name: Vec<&'a str>,
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
            name: rows.iter().map(|r| r.name.as_str()).collect(),
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

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 13] {
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
            &self.name,
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

/// Writes rows given as arrays of their columns (one array per column, the
/// rows in the same order; no `(namespace, handoff_key)` twice), each
/// unless the mirror holds it or something newer, or the key's row belongs
/// to an object of another name (see the module docs); returns the keys of
/// the rows it changed. One row is the arrays of one element.
const UPSERT: &str = r#"
INSERT INTO handoffs AS h (id, namespace, handoff_key, project, repo, kind, created_by, body,
                           revision, resource_version, created_at, updated_at, name)
SELECT u.id::uuid, u.namespace, u.handoff_key, u.project, u.repo, u.kind, u.created_by, u.body,
       u.revision, u.resource_version, u.created_at, u.updated_at, u.name
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::text[], $9::bigint[], $10::bigint[], $11::timestamptz[], $12::timestamptz[],
            $13::text[])
     AS u(id, namespace, handoff_key, project, repo, kind, created_by, body,
          revision, resource_version, created_at, updated_at, name)
ON CONFLICT (namespace, handoff_key) DO UPDATE SET
    id = EXCLUDED.id, project = EXCLUDED.project, repo = EXCLUDED.repo, kind = EXCLUDED.kind,
    created_by = EXCLUDED.created_by, body = EXCLUDED.body, revision = EXCLUDED.revision,
    resource_version = EXCLUDED.resource_version, created_at = EXCLUDED.created_at,
    updated_at = EXCLUDED.updated_at, name = EXCLUDED.name
WHERE (h.id = EXCLUDED.id
       AND ((h.revision, h.resource_version) < (EXCLUDED.revision, EXCLUDED.resource_version)
            OR ((h.revision, h.resource_version) = (EXCLUDED.revision, EXCLUDED.resource_version)
                AND h.name IS NULL)))
   OR (h.id <> EXCLUDED.id AND (h.name IS NULL OR h.name = EXCLUDED.name))
RETURNING h.namespace, h.handoff_key
"#;

/// Records a revision and keeps the key's newest `$11` (by `written_at`,
/// then revision) in one statement, reading only that key's rows. The
/// revision is inserted only when it is among the newest `$11` (a stale
/// record of an old revision adds nothing) and only while the object's row
/// is there (the row is written first; a record that arrives after the
/// object's delete removed its row and history would bring back a revision
/// of a deleted handoff); the rows it displaces are deleted. Returns the
/// rows deleted.
const RECORD_REVISION: &str = r#"
WITH inserted AS (
    INSERT INTO handoff_revisions (namespace, handoff_key, handoff_id, revision, project, repo,
                                   kind, body, created_by, written_at)
    SELECT $1::text, $2::text, $3::text::uuid, $4::bigint, $5::text, $6::text, $7::text,
           $8::text, $9::text, $10::timestamptz
    WHERE (SELECT count(*) FROM handoff_revisions
           WHERE namespace = $1 AND handoff_key = $2
             AND (written_at, revision) > ($10::timestamptz, $4::bigint)) < $11::bigint
      AND EXISTS (SELECT 1 FROM handoffs
                  WHERE namespace = $1 AND handoff_key = $2 AND id = $3::text::uuid)
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

/// Deletes one object's row and, when `$4`, its history, in one
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

impl Mirror {
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
        self.remove(namespace, key, id, !self.retention.keep_on_delete)
            .await
    }

    /// Deletes the row and the history of object `id` (uid) naming `key` in
    /// `namespace`, whatever the retention: an object whose name is not
    /// derived from its key is not the key's handoff, and what the mirror
    /// holds of it (written before the mirror refused such objects) goes.
    pub async fn forget(
        &self,
        namespace: &str,
        key: &str,
        id: &str,
    ) -> Result<Deleted, MirrorError> {
        self.remove(namespace, key, id, true).await
    }

    async fn remove(
        &self,
        namespace: &str,
        key: &str,
        id: &str,
        purge: bool,
    ) -> Result<Deleted, MirrorError> {
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
}
