//! The four tools: their arguments, results, schemas, annotations, argument
//! validation and text rendering. Pure: no I/O here (see `server.rs`).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::offer_tools::{
    ListOffersArgs, ListOffersResult, OfferArgs, OfferResult, RejectArgs, RejectResult,
};
use super::profiles::ToolName;
use crate::api::naming::name_for_key;
use crate::api::validation::{self, FieldError};
use crate::api::{Handoff, HandoffSpec, preview_line};
use crate::mirror::{HistoryRow, ListAfter, ListedRow};
use crate::store::{SortKey, WriteOutcome, newest_first, sort_key, updated_at};

/// Default and largest page of `list_handoffs`.
pub const DEFAULT_LIST_LIMIT: u32 = 50;
/// See [`DEFAULT_LIST_LIMIT`].
pub const MAX_LIST_LIMIT: u32 = 200;

/// Arguments of `write_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The continuation key from your preamble (the conversation object key, stable per issue).
    pub handoff_key: String,
    /// The project (a label value: letters, digits, '-', '_', '.', at most 63 characters).
    pub project: String,
    /// The repository, e.g. `org/repo` (optional).
    #[serde(default)]
    pub repo: Option<String>,
    /// The kind of work, e.g. `issue`, `incident`, `pr` (optional).
    #[serde(default)]
    pub kind: Option<String>,
    /// A COMPACT markdown summary: current state, done, next, open questions, key files/PRs.
    /// A summary, not a log: at most 32768 characters.
    pub body: String,
}

/// Arguments of `get_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// The continuation key from your preamble.
    pub handoff_key: String,
    /// A past content revision (1 = the first) instead of the current
    /// handoff; served from the history kept by the PostgreSQL mirror.
    #[serde(default)]
    pub revision: Option<i64>,
}

/// Arguments of `delete_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// The key of the handoff to delete.
    pub handoff_key: String,
}

/// Arguments of `list_handoffs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// The project whose handoffs to list.
    pub project: String,
    /// Only handoffs of this repository (optional).
    #[serde(default)]
    pub repo: Option<String>,
    /// Page size, 1–200 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, to continue.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Include each full body (default false: a preview and `body_bytes` only).
    #[serde(default)]
    pub include_body: Option<bool>,
}

/// A handoff as tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct HandoffView {
    /// The conversation key.
    pub handoff_key: String,
    /// Project.
    pub project: String,
    /// Repository, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Kind of work, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The summary.
    pub body: String,
    /// Who wrote this version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// When the content last changed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Content revision (1 after creation), once the controller has counted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The Kubernetes object holding it (`namespace/name`).
    pub object: String,
}

impl HandoffView {
    /// The view of a stored handoff.
    pub fn of(h: &Handoff) -> Self {
        Self {
            handoff_key: h.spec.handoff_key.clone(),
            project: h.spec.project.clone(),
            repo: h.spec.repo.clone(),
            kind: h.spec.kind.clone(),
            body: h.spec.body.clone(),
            created_by: h.spec.created_by.clone(),
            updated_at: updated_at(h).map(|t| t.0.to_string()),
            revision: h.status.as_ref().and_then(|s| s.revision),
            object: format!("{}/{}", h.namespace().unwrap_or_default(), h.name_any()),
        }
    }
}

impl HandoffView {
    /// The view of a past revision from the mirror's history.
    pub fn of_revision(namespace: &str, row: &HistoryRow) -> Self {
        Self {
            handoff_key: row.handoff_key.clone(),
            project: row.project.clone(),
            repo: row.repo.clone(),
            kind: row.kind.clone(),
            body: row.body.clone(),
            created_by: Some(row.created_by.clone()).filter(|w| !w.is_empty()),
            updated_at: Some(row.written_at.to_string()),
            revision: Some(row.revision),
            object: format!("{namespace}/{}", name_for_key(&row.handoff_key)),
        }
    }
}

/// Result of `write_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteResult {
    /// `created`, `updated`, or `unchanged` (identical content: nothing written).
    pub outcome: WriteOutcome,
    /// The handoff as stored.
    pub handoff: HandoffView,
}

/// Result of `get_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GetResult {
    /// Whether a handoff exists for the key.
    pub found: bool,
    /// The handoff, when found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffView>,
}

/// One entry of `list_handoffs`.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct ListEntry {
    /// The conversation key.
    pub handoff_key: String,
    /// Project.
    pub project: String,
    /// Repository, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Kind of work, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// When the content last changed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Who wrote this version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Size of the body in bytes.
    pub body_bytes: usize,
    /// The first characters of the body, on one line.
    pub preview: String,
    /// The whole body (only with `include_body`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl ListEntry {
    /// The entry for a stored handoff.
    pub fn of(h: &Handoff, include_body: bool) -> Self {
        Self {
            handoff_key: h.spec.handoff_key.clone(),
            project: h.spec.project.clone(),
            repo: h.spec.repo.clone(),
            kind: h.spec.kind.clone(),
            updated_at: updated_at(h).map(|t| t.0.to_string()),
            created_by: h.spec.created_by.clone(),
            body_bytes: h.spec.body.len(),
            preview: preview_line(&h.spec.body),
            body: include_body.then(|| h.spec.body.clone()),
        }
    }
}

impl ListEntry {
    /// The entry for a mirror row (the same fields as [`ListEntry::of`]).
    pub fn of_row(row: &ListedRow, include_body: bool) -> Self {
        Self {
            handoff_key: row.handoff_key.clone(),
            project: row.project.clone(),
            repo: row.repo.clone(),
            kind: row.kind.clone(),
            updated_at: Some(row.updated_at.to_string()),
            created_by: Some(row.created_by.clone()).filter(|w| !w.is_empty()),
            body_bytes: row.body.len(),
            preview: preview_line(&row.body),
            body: include_body.then(|| row.body.clone()),
        }
    }
}

/// Result of `list_handoffs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListResult {
    /// Handoffs, newest `updated_at` first.
    pub handoffs: Vec<ListEntry>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Result of `delete_handoff`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeleteResult {
    /// Whether a handoff existed and was deleted (false: there was none).
    pub deleted: bool,
    /// The key.
    pub handoff_key: String,
}

/// The MCP definition of a tool: schemas, description, annotations.
pub fn definition(tool: ToolName) -> Tool {
    let (description, input, output, annotations) = match tool {
        ToolName::Offer => (
            "Offer your handoff to a destination agent (e.g. dev-lead). At most one offer is pending per \
             destination: a repeat in the same session returns the pending one, a new artifact or another \
             session supersedes it; an agent already at work is refused (agent_already_active).",
            schema::<OfferArgs>(),
            schema::<OfferResult>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        ToolName::ListOffers => (
            "List a project's offers (optionally to one agent, or in one phase).",
            schema::<ListOffersArgs>(),
            schema::<ListOffersResult>(),
            ToolAnnotations::new().read_only(true).open_world(false),
        ),
        ToolName::RejectOffer => (
            "Reject an offer addressed to you (it stays as a record, phase Rejected).",
            schema::<RejectArgs>(),
            schema::<RejectResult>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
        ToolName::Get => (
            "Get the current handoff (compact summary left by the previous agent) for a continuation key. \
             Call it at the start with the key from your preamble. If none exists, start fresh.",
            schema::<GetArgs>(),
            schema::<GetResult>(),
            ToolAnnotations::new().read_only(true).open_world(false),
        ),
        ToolName::Write => (
            "Write (create or replace) the handoff for a continuation key: a COMPACT markdown summary of \
             current state, what is done, what is next, open questions and key files/PRs. Call it before \
             you finish. Writing identical content changes nothing.",
            schema::<WriteArgs>(),
            schema::<WriteResult>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        ToolName::List => (
            "List a project's handoffs, newest first (optionally one repository). Entries carry a preview and \
             body_bytes; set include_body for full bodies. Page with limit and next_cursor.",
            schema::<ListArgs>(),
            schema::<ListResult>(),
            ToolAnnotations::new().read_only(true).open_world(false),
        ),
        ToolName::Delete => (
            "Delete the handoff for a key (stale or done work). Deleting a key that has no handoff is not an error.",
            schema::<DeleteArgs>(),
            schema::<DeleteResult>(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
    };
    Tool::new(tool.as_str(), description, input)
        .with_raw_output_schema(output)
        .with_annotations(annotations)
}

/// The JSON schema of `T` as an MCP schema object.
pub fn schema<T: JsonSchema>() -> Arc<JsonObject> {
    let value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    Arc::new(match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

/// Parses a tool's arguments; the message names the tool and serde's reason
/// (missing field, wrong type, unknown field).
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: ToolName,
    args: Option<JsonObject>,
) -> Result<T, String> {
    let value = serde_json::Value::Object(args.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| format!("invalid arguments for {tool}: {e}"))
}

/// Validates write arguments into a request (the writer is filled in later).
pub fn write_request(args: WriteArgs) -> Result<HandoffSpec, FieldError> {
    validation::handoff_key(&args.handoff_key)?;
    validation::project(&args.project)?;
    let repo = args.repo.filter(|r| !r.is_empty());
    let kind = args.kind.filter(|k| !k.is_empty());
    if let Some(repo) = &repo {
        validation::repo(repo)?;
    }
    if let Some(kind) = &kind {
        validation::kind(kind)?;
    }
    validation::body(&args.body)?;
    Ok(HandoffSpec {
        handoff_key: args.handoff_key,
        project: args.project,
        repo,
        kind,
        body: args.body,
        created_by: None,
    })
}

/// The page size asked for, checked.
pub fn list_limit(limit: Option<u32>) -> Result<usize, FieldError> {
    match limit {
        None => Ok(DEFAULT_LIST_LIMIT as usize),
        Some(n) if (1..=MAX_LIST_LIMIT).contains(&n) => Ok(n as usize),
        Some(n) => Err(FieldError {
            field: "limit",
            rule: format!("a page size from 1 to {MAX_LIST_LIMIT}"),
            problem: format!("got {n}"),
        }),
    }
}

/// The wire form of a position in list order.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Cursor {
    /// `updated_at`, RFC 3339, or null.
    u: Option<String>,
    /// The key.
    k: String,
}

/// Encodes the position after which the next page starts.
pub fn encode_cursor(key: &SortKey) -> String {
    let cursor = Cursor {
        u: key.0.as_ref().map(|t| t.0.to_string()),
        k: key.1.clone(),
    };
    B64URL.encode(serde_json::to_vec(&cursor).unwrap_or_default())
}

/// Decodes a cursor from a previous page.
pub fn decode_cursor(cursor: &str) -> Result<SortKey, FieldError> {
    let invalid = |problem: &str| FieldError {
        field: "cursor",
        rule: "the next_cursor of a previous list_handoffs answer, unchanged".into(),
        problem: problem.into(),
    };
    let bytes = B64URL
        .decode(cursor.trim())
        .map_err(|_| invalid("it is not valid base64url"))?;
    let cursor: Cursor =
        serde_json::from_slice(&bytes).map_err(|_| invalid("it does not decode to a position"))?;
    let updated = match cursor.u {
        Some(u) => Some(Time(
            u.parse()
                .map_err(|_| invalid("its timestamp is malformed"))?,
        )),
        None => None,
    };
    Ok((updated, cursor.k))
}

/// One page of items sorted by [`newest_first`]: those strictly after
/// `after`, at most `limit`, and the position to continue from when more remain.
pub fn page<T>(
    sorted: Vec<T>,
    key: impl Fn(&T) -> SortKey,
    after: Option<&SortKey>,
    limit: usize,
) -> (Vec<T>, Option<SortKey>) {
    let mut rest = sorted
        .into_iter()
        .filter(|item| after.is_none_or(|a| newest_first(&key(item), a).is_gt()))
        .peekable();
    let items: Vec<T> = rest.by_ref().take(limit).collect();
    let next = rest
        .peek()
        .is_some()
        .then(|| items.last().map(&key))
        .flatten();
    (items, next)
}

/// The position a `cursor` argument continues after (`None`: from the start).
pub fn list_after(cursor: Option<&str>) -> Result<Option<SortKey>, FieldError> {
    cursor
        .filter(|c| !c.is_empty())
        .map(decode_cursor)
        .transpose()
}

/// Pages stored handoffs for `list_handoffs`.
pub fn list_page(
    sorted: Vec<Handoff>,
    after: Option<&SortKey>,
    limit: usize,
    include_body: bool,
) -> ListResult {
    let (items, next) = page(sorted, sort_key, after, limit);
    ListResult {
        handoffs: items
            .iter()
            .map(|h| ListEntry::of(h, include_body))
            .collect(),
        next_cursor: next.as_ref().map(encode_cursor),
    }
}

/// Where a mirror page starts.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorStart {
    /// From the newest entry.
    Top,
    /// Strictly after this position.
    After(ListAfter),
    /// After every dated entry: the mirror holds no undated ones, so the
    /// page is empty.
    PastEnd,
}

/// Decodes a `list_handoffs` cursor for a mirror query.
pub fn mirror_start(cursor: Option<&str>) -> Result<MirrorStart, FieldError> {
    let Some(cursor) = cursor.filter(|c| !c.is_empty()) else {
        return Ok(MirrorStart::Top);
    };
    Ok(match decode_cursor(cursor)? {
        (Some(at), key) => MirrorStart::After((at.0, key)),
        (None, _) => MirrorStart::PastEnd,
    })
}

/// A `list_handoffs` page from mirror rows fetched with `limit + 1`.
pub fn mirror_page(mut rows: Vec<ListedRow>, limit: usize, include_body: bool) -> ListResult {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = more
        .then(|| rows.last())
        .flatten()
        .map(|r| encode_cursor(&(Some(Time(r.updated_at)), r.handoff_key.clone())));
    ListResult {
        handoffs: rows
            .iter()
            .map(|r| ListEntry::of_row(r, include_body))
            .collect(),
        next_cursor,
    }
}

/// Text shown to the agent next to the structured result.
pub mod text {
    use super::*;

    /// After a write.
    pub fn write(result: &WriteResult) -> String {
        let h = &result.handoff;
        match result.outcome {
            WriteOutcome::Unchanged => {
                format!(
                    "Handoff `{}` unchanged: it already holds this content; nothing was written.",
                    h.handoff_key
                )
            }
            outcome => format!(
                "Handoff `{}` {} in project {} ({} bytes). The next agent with this key will start from it.",
                h.handoff_key,
                if outcome == WriteOutcome::Created {
                    "created"
                } else {
                    "updated"
                },
                h.project,
                h.body.len()
            ),
        }
    }

    /// After a get of a past revision.
    pub fn get_revision(key: &str, revision: i64, result: &GetResult) -> String {
        match &result.handoff {
            None => format!(
                "The history holds no revision {revision} of `{key}` (revisions start at 1; \
                 call get_handoff without `revision` for the current one)."
            ),
            Some(_) => format!("(revision {revision}) {}", get(key, result)),
        }
    }

    /// After a get.
    pub fn get(key: &str, result: &GetResult) -> String {
        match &result.handoff {
            None => format!(
                "No handoff exists for `{key}`: there is no prior context to continue, so start fresh. \
                 Call write_handoff with this key before you finish."
            ),
            Some(h) => {
                let mut meta = vec![format!("project {}", h.project)];
                meta.extend(h.repo.as_ref().map(|r| format!("repo {r}")));
                meta.extend(h.kind.as_ref().map(|k| format!("kind {k}")));
                meta.extend(h.updated_at.as_ref().map(|u| format!("updated {u}")));
                meta.extend(h.created_by.as_ref().map(|w| format!("by {w}")));
                format!("Handoff for `{key}` ({}):\n\n{}", meta.join(", "), h.body)
            }
        }
    }

    /// After a list.
    pub fn list(project: &str, result: &ListResult) -> String {
        if result.handoffs.is_empty() {
            return format!("No handoffs in project {project}.");
        }
        let mut out = format!(
            "{} handoff(s) in project {project}, newest first:\n",
            result.handoffs.len()
        );
        for e in &result.handoffs {
            let when = e.updated_at.as_deref().unwrap_or("unknown time");
            out.push_str(&format!(
                "- `{}` (updated {when}, {} bytes): {}\n",
                e.handoff_key, e.body_bytes, e.preview
            ));
        }
        if let Some(cursor) = &result.next_cursor {
            out.push_str(&format!(
                "More: call list_handoffs again with cursor \"{cursor}\".\n"
            ));
        }
        out
    }

    /// After a delete.
    pub fn delete(result: &DeleteResult) -> String {
        if result.deleted {
            format!("Deleted the handoff for `{}`.", result.handoff_key)
        } else {
            format!(
                "No handoff existed for `{}`; nothing to delete.",
                result.handoff_key
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Option<Time> {
        Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(secs).expect("ts"),
        ))
    }

    #[test]
    fn pages_cover_everything_once_in_order() {
        let mut items: Vec<SortKey> = (0..23).map(|i| (at(i % 7), format!("k{i:02}"))).collect();
        items.push((None, "undated".into()));
        items.sort_by(newest_first);
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let (page_items, next) = page(items.clone(), Clone::clone, after.as_ref(), 5);
            assert!(page_items.len() <= 5);
            seen.extend(page_items);
            match next {
                Some(n) => {
                    after = Some(decode_cursor(&encode_cursor(&n)).expect("cursor round trip"))
                }
                None => break,
            }
        }
        assert_eq!(seen, items);
    }

    #[test]
    fn a_last_page_has_no_cursor() {
        let items = vec![(at(2), "a".to_owned()), (at(1), "b".to_owned())];
        let (p, next) = page(items, Clone::clone, None, 2);
        assert_eq!(p.len(), 2);
        assert!(next.is_none());
    }

    #[test]
    fn bad_cursors_and_limits_are_named() {
        for bad in [
            "%%%",
            "bm90IGpzb24",
            &B64URL.encode(br#"{"u":"yesterday","k":"a"}"#),
        ] {
            let err = decode_cursor(bad).expect_err(bad);
            assert_eq!(err.field, "cursor");
        }
        assert_eq!(list_limit(Some(0)).expect_err("0").field, "limit");
        assert_eq!(list_limit(Some(201)).expect_err("201").field, "limit");
        assert_eq!(list_limit(None).expect("default"), 50);
    }

    #[test]
    fn write_arguments_are_validated_in_contract_order() {
        let args = |key: &str, project: &str, body: &str| WriteArgs {
            handoff_key: key.into(),
            project: project.into(),
            repo: Some(String::new()),
            kind: None,
            body: body.into(),
        };
        assert_eq!(
            write_request(args("", "p", "b")).expect_err("key").field,
            "handoff_key"
        );
        assert_eq!(
            write_request(args("k", "bad project", "b"))
                .expect_err("project")
                .field,
            "project"
        );
        assert_eq!(
            write_request(args("k", "p", "")).expect_err("body").field,
            "body"
        );
        let ok = write_request(args("k", "p", "b")).expect("valid");
        assert_eq!(ok.repo, None, "an empty repo means none");
    }

    #[test]
    fn parse_errors_name_the_tool_and_the_field() {
        let args = |v: serde_json::Value| v.as_object().cloned();
        let err = parse_args::<WriteArgs>(
            ToolName::Write,
            args(serde_json::json!({"handoff_key": "k"})),
        )
        .expect_err("missing");
        assert!(
            err.contains("write_handoff") && err.contains("missing field `project`"),
            "{err}"
        );
        let err = parse_args::<GetArgs>(ToolName::Get, args(serde_json::json!({"handoff_key": 5})))
            .expect_err("type");
        assert!(
            err.contains("invalid type: integer `5`, expected a string"),
            "{err}"
        );
        let err = parse_args::<GetArgs>(
            ToolName::Get,
            args(serde_json::json!({"handoff_key": "k", "x": 1})),
        )
        .expect_err("unknown");
        assert!(err.contains("unknown field `x`"), "{err}");
        assert!(parse_args::<GetArgs>(ToolName::Get, None).is_err());
    }

    #[test]
    fn every_tool_has_object_schemas_and_honest_annotations() {
        // (tool, read-only, destructive, idempotent)
        let expected = [
            (ToolName::Get, true, None, None),
            (ToolName::List, true, None, None),
            (ToolName::ListOffers, true, None, None),
            (ToolName::Write, false, Some(false), Some(true)),
            (ToolName::Delete, false, Some(true), Some(true)),
            (ToolName::Offer, false, Some(false), Some(false)),
            (ToolName::RejectOffer, false, Some(true), Some(true)),
        ];
        assert_eq!(expected.len(), ToolName::ALL.len());
        for (tool, read_only, destructive, idempotent) in expected {
            let def = definition(tool);
            let kind = def.input_schema.get("type").and_then(|t| t.as_str());
            assert_eq!(kind, Some("object"), "{tool}");
            assert!(def.output_schema.is_some(), "{tool}");
            let a = def.annotations.expect("annotations");
            assert_eq!(a.read_only_hint, Some(read_only), "{tool}");
            assert_eq!(a.destructive_hint, destructive, "{tool}");
            assert_eq!(a.idempotent_hint, idempotent, "{tool}");
        }
    }
}
