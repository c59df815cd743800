//! Full-text search over the current handoffs of one project
//! (`search_handoffs`): `websearch_to_tsquery('simple', …)` against the
//! generated `search` column and its GIN index (migration 0003, which says
//! why the configuration is `simple` and text is lower-cased with the ICU
//! root collation; the query is lower-cased the same way), ranked by `ts_rank`, then newest
//! first, then by key, so pages are stable.

use super::{ListedRow, Mirror, MirrorError};

const SEARCH: &str = r#"
SELECT handoff_key, project, repo, kind, created_by, body, updated_at, revision,
       ts_rank(search, query) AS rank
FROM handoffs, websearch_to_tsquery('simple', lower($3::text COLLATE "und-x-icu")) AS query
WHERE namespace = $1 AND project = $2 AND ($4::text IS NULL OR repo = $4) AND search @@ query
ORDER BY rank DESC, updated_at DESC, handoff_key COLLATE "C"
OFFSET $5
LIMIT $6
"#;

/// A handoff that matched, with its rank.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRow {
    /// The row, as `list_handoffs` reads it.
    pub row: ListedRow,
    /// `ts_rank` of the row for the query.
    pub rank: f32,
}

impl Mirror {
    /// One page (`offset`, `limit`) of the handoffs of `project` (and
    /// `repo`) in `namespace` that match `query` (web-search syntax:
    /// words, "quoted phrases", `or`, `-excluded`), best first.
    pub async fn search(
        &self,
        namespace: &str,
        project: &str,
        repo: Option<&str>,
        query: &str,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<SearchRow>, MirrorError> {
        self.with(|c| async move {
            let rows = c
                .query(
                    SEARCH,
                    &[&namespace, &project, &query, &repo, &offset, &limit],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| SearchRow {
                    row: ListedRow::of(r),
                    rank: r.get(8),
                })
                .collect())
        })
        .await
    }
}
