//! The revisions of one key in the history (`list_revisions`, `handoff
//! history`): newest first, one entry per revision number (of the newest
//! object incarnation that had it, as [`Mirror::revision`] reads it).

use k8s_openapi::jiff::Timestamp;

use super::{Mirror, MirrorError};

const REVISIONS: &str = r#"
SELECT revision, written_at, created_by, bytes FROM (
    SELECT DISTINCT ON (revision) revision, written_at, created_by, octet_length(body)::bigint AS bytes
    FROM handoff_revisions
    WHERE namespace = $1 AND handoff_key = $2 AND ($3::bigint IS NULL OR revision < $3)
    ORDER BY revision DESC, written_at DESC
) AS newest
ORDER BY revision DESC
LIMIT $4
"#;

/// One revision of a key, without its body.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionEntry {
    /// Revision number.
    pub revision: i64,
    /// When it was counted (its `updatedAt`).
    pub written_at: Timestamp,
    /// Who wrote it (empty when unknown).
    pub created_by: String,
    /// Size of its body in bytes.
    pub bytes: i64,
}

impl Mirror {
    /// At most `limit` revisions of `key` in `namespace`, newest first,
    /// below `before` when given.
    pub async fn revisions(
        &self,
        namespace: &str,
        key: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<RevisionEntry>, MirrorError> {
        self.with(|c| async move {
            let rows = c
                .query(REVISIONS, &[&namespace, &key, &before, &limit])
                .await?;
            Ok(rows
                .iter()
                .map(|r| RevisionEntry {
                    revision: r.get(0),
                    written_at: r.get(1),
                    created_by: r.get(2),
                    bytes: r.get(3),
                })
                .collect())
        })
        .await
    }
}
