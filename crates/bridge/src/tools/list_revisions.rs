//! `list_revisions` (extension): the past revisions of a key that the
//! PostgreSQL mirror's history keeps — number, time, writer, size — newest
//! first, paged. Gated like `get_handoff{revision}`: a
//! SelfSubjectAccessReview for `get` (RBAC is not in that path), only the
//! caller's namespace; without the mirror, an error saying how to turn it on.
//! The revisions are those of the key's current handoff only (the mirror's
//! history never crosses objects: see `handoff_mirror`'s history), so an
//! object holding the key under another name can neither add revisions nor
//! hide one.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer, needs_mirror};
use super::definition::{definition, reads};
use super::page;
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};
use handoff_mirror::Mirror;

const NAME: &str = "list_revisions";

/// The row of `list_revisions` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "get",
    definition: || {
        definition::<RevisionsArgs, RevisionsResult>(
            NAME,
            "List the past revisions of a handoff (number, time, writer, size), newest first, from the \
             history. Read one with get_handoff{revision}; compare two with diff_handoff.",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `list_revisions`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevisionsArgs {
    /// The continuation key.
    pub handoff_key: String,
    /// Page size, 1–200 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, to continue.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One revision.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub(crate) struct RevisionView {
    /// Revision number (1 = the first).
    pub revision: i64,
    /// When it was written (RFC 3339).
    pub updated_at: String,
    /// Who wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Size of its body in bytes.
    pub body_bytes: i64,
}

/// Result of `list_revisions`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RevisionsResult {
    /// Revisions, newest first.
    pub revisions: Vec<RevisionView>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: RevisionsArgs = call.args(args)?;
    validation::handoff_key(&args.handoff_key)?;
    let limit = page::limit(args.limit)?;
    let before = page::given(args.cursor.as_deref())
        .map(decode_cursor)
        .transpose()?;
    let Some(mirror) = call.mirror else {
        return Err(needs_mirror(NAME));
    };
    call.authorize("get").await?;
    let result = page(mirror, call.namespace(), &args.handoff_key, before, limit).await?;
    let text = text(&args.handoff_key, &result);
    Ok(answer(&result, text))
}

/// One page of revisions of `key`, below `before`.
pub(crate) async fn page(
    mirror: &Mirror,
    namespace: &str,
    key: &str,
    before: Option<i64>,
    limit: usize,
) -> Result<RevisionsResult, CallError> {
    let take = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    let rows = mirror.revisions(namespace, key, before, take).await?;
    let more = rows.len() > limit;
    let revisions: Vec<RevisionView> = rows
        .into_iter()
        .take(limit)
        .map(|r| RevisionView {
            revision: r.revision,
            updated_at: r.written_at.to_string(),
            created_by: Some(r.created_by).filter(|w| !w.is_empty()),
            body_bytes: r.bytes,
        })
        .collect();
    let next_cursor = more
        .then(|| {
            revisions
                .last()
                .map(|r| page::encode(&Before { r: r.revision }))
        })
        .flatten();
    Ok(RevisionsResult {
        revisions,
        next_cursor,
    })
}

/// The position of a page of revisions: the ones below `r`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Before {
    /// The revision number the next page is below (1 or more).
    r: i64,
}

fn decode_cursor(cursor: &str) -> Result<i64, FieldError> {
    let invalid = |problem: &str| {
        page::invalid(
            "the next_cursor of a previous list_revisions answer",
            problem,
        )
    };
    let before = page::decode::<Before>(cursor).map_err(|why| invalid(why.problem()))?;
    if before.r < 1 {
        return Err(invalid("its revision is below 1"));
    }
    Ok(before.r)
}

/// The text of a `list_revisions` answer.
pub(crate) fn text(key: &str, result: &RevisionsResult) -> String {
    if result.revisions.is_empty() {
        return format!(
            "The history holds no revisions of `{key}` (never written, deleted, or not mirrored yet)."
        );
    }
    let mut lines = vec![format!("Revisions of `{key}`, newest first:")];
    for r in &result.revisions {
        lines.push(format!(
            "- revision {} at {} by {} ({} bytes)",
            r.revision,
            r.updated_at,
            r.created_by.as_deref().unwrap_or("an unknown writer"),
            r.body_bytes
        ));
    }
    if result.next_cursor.is_some() {
        lines.push("Older revisions: call again with next_cursor.".into());
    }
    lines.join("\n")
}
