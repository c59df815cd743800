//! `list_handoffs` (contract): a project's handoffs, newest first, paged
//! with a cursor. From the apiserver (the whole project read in chunks,
//! sorted and paged here), or — when the bridge has the PostgreSQL mirror —
//! one indexed page from the mirror, after a SelfSubjectAccessReview for
//! `list`, since RBAC is not in that path. Both give the same entries in
//! the same order, and their cursors are the same. Both list only the
//! current handoff of each key (the object whose name is derived from its
//! key, [`handoff_core::handoff::canonical`]): the mirror holds no other, and
//! the apiserver read skips any other (an object made past the name check,
//! holding another object's key, must not speak for it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer};
use super::definition::{definition, reads};
use super::page;
use super::views::HandoffFacts;
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::api::{Handoff, preview_line};
use handoff_kube::store::{ListQuery, SortKey, newest_first, sort_key};
use handoff_mirror::{ListAfter, ListedRow, Mirror};

const NAME: &str = "list_handoffs";

/// The row of `list_handoffs` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "list",
    definition: || {
        definition::<ListArgs, ListResult>(
            NAME,
            "List a project's handoffs, newest first (optionally one repository). Entries carry a preview and \
             body_bytes; set include_body for full bodies. Page with limit and next_cursor.",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `list_handoffs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
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

/// One entry of `list_handoffs`.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub(crate) struct ListEntry {
    /// Key, project, repo, kind, writer, time.
    #[serde(flatten)]
    pub facts: HandoffFacts,
    /// Size of the body in bytes.
    pub body_bytes: usize,
    /// The first characters of the body, on one line.
    pub preview: String,
    /// The whole body (only with `include_body`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl ListEntry {
    /// The entry of a handoff with these facts and this body, whether read
    /// from the apiserver or the mirror.
    fn new(facts: HandoffFacts, body: &str, include_body: bool) -> Self {
        Self {
            facts,
            body_bytes: body.len(),
            preview: preview_line(body),
            body: include_body.then(|| body.to_owned()),
        }
    }
}

/// Result of `list_handoffs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListResult {
    /// Handoffs, newest `updated_at` first.
    pub handoffs: Vec<ListEntry>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The page asked for, validated.
struct PageRequest {
    /// At most this many entries.
    limit: usize,
    /// Strictly after this position (`None`: from the newest).
    after: Option<SortKey>,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: ListArgs = call.args(args)?;
    let page = validate(&args)?;
    let include_body = args.include_body.unwrap_or(false);
    let result = match call.mirror {
        Some(mirror) => {
            call.authorize("list").await?;
            from_mirror(mirror, call.namespace(), &args, page, include_body).await?
        }
        None => {
            let query = ListQuery {
                project: args.project.clone(),
                repo: args.repo.clone(),
                kind: None,
            };
            // One more than the page: whether another page follows.
            let first = call
                .caller
                .store()
                .list_first(&query, page.after.as_ref(), page.limit.saturating_add(1))
                .await
                .map_err(|e| call.kube_error(e))?;
            list_page(first.items, page.after.as_ref(), page.limit, include_body)
        }
    };
    let text = text(&args.project, &result);
    Ok(answer(&result, text))
}

/// Checks the project, the repository, the page size and the cursor, in
/// that order.
fn validate(args: &ListArgs) -> Result<PageRequest, FieldError> {
    validation::project(&args.project)?;
    if let Some(repo) = args.repo.as_deref().filter(|r| !r.is_empty()) {
        validation::repo(repo)?;
    }
    let limit = page::limit(args.limit)?;
    let after = page::given(args.cursor.as_deref())
        .map(decode_cursor)
        .transpose()?;
    Ok(PageRequest { limit, after })
}

/// One page from the mirror of `namespace`.
async fn from_mirror(
    mirror: &Mirror,
    namespace: &str,
    args: &ListArgs,
    page: PageRequest,
    include_body: bool,
) -> Result<ListResult, CallError> {
    let after = match mirror_start(page.after) {
        MirrorStart::PastEnd => {
            return Ok(ListResult {
                handoffs: Vec::new(),
                next_cursor: None,
            });
        }
        MirrorStart::Top => None,
        MirrorStart::After(after) => Some(after),
    };
    let repo = args.repo.as_deref().filter(|r| !r.is_empty());
    let fetch = i64::try_from(page.limit)
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    let rows = mirror
        .list(namespace, &args.project, repo, after.as_ref(), fetch)
        .await?;
    Ok(mirror_page(rows, page.limit, include_body))
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
    page::encode(&Cursor {
        u: key.0.as_ref().map(|t| t.0.to_string()),
        k: key.1.clone(),
    })
}

/// Decodes a cursor from a previous page.
pub fn decode_cursor(cursor: &str) -> Result<SortKey, FieldError> {
    let invalid = |problem: &str| {
        page::invalid(
            "the next_cursor of a previous list_handoffs answer, unchanged",
            problem,
        )
    };
    let cursor: Cursor = page::decode(cursor).map_err(|why| invalid(why.problem()))?;
    let updated = match cursor.u {
        Some(u) => Some(Time(
            u.parse()
                .map_err(|_| invalid("its timestamp is malformed"))?,
        )),
        None => None,
    };
    // The key goes to PostgreSQL as the page's start: the key's own rule.
    validation::handoff_key(&cursor.k)
        .map_err(|e| invalid(&format!("its key is not one: {}", e.problem)))?;
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

/// One page of the handoffs the apiserver path read and sorted.
fn list_page(
    sorted: Vec<Handoff>,
    after: Option<&SortKey>,
    limit: usize,
    include_body: bool,
) -> ListResult {
    let (items, next) = page(sorted, sort_key, after, limit);
    ListResult {
        handoffs: items
            .iter()
            .map(|h| ListEntry::new(HandoffFacts::of(h), &h.spec.body, include_body))
            .collect(),
        next_cursor: next.as_ref().map(encode_cursor),
    }
}

/// Where a mirror page starts.
#[derive(Debug, Clone, PartialEq)]
enum MirrorStart {
    /// From the newest entry.
    Top,
    /// Strictly after this position.
    After(ListAfter),
    /// After every dated entry: the mirror holds no undated ones, so the
    /// page is empty.
    PastEnd,
}

/// Where a mirror query continues after a cursor's position.
fn mirror_start(after: Option<SortKey>) -> MirrorStart {
    match after {
        None => MirrorStart::Top,
        Some((Some(at), key)) => MirrorStart::After((at.0, key)),
        Some((None, _)) => MirrorStart::PastEnd,
    }
}

/// A page from mirror rows fetched with `limit + 1`.
fn mirror_page(mut rows: Vec<ListedRow>, limit: usize, include_body: bool) -> ListResult {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = more
        .then(|| rows.last())
        .flatten()
        .map(|r| encode_cursor(&(Some(Time(r.updated_at)), r.handoff_key.clone())));
    ListResult {
        handoffs: rows
            .iter()
            .map(|r| ListEntry::new(HandoffFacts::of_row(r), &r.body, include_body))
            .collect(),
        next_cursor,
    }
}

/// The text of a `list_handoffs` answer.
pub(crate) fn text(project: &str, result: &ListResult) -> String {
    if result.handoffs.is_empty() {
        return format!("No handoffs in project {project}.");
    }
    let mut out = format!(
        "{} handoff(s) in project {project}, newest first:\n",
        result.handoffs.len()
    );
    for e in &result.handoffs {
        let when = e.facts.updated_at.as_deref().unwrap_or("unknown time");
        out.push_str(&format!(
            "- `{}` (updated {when}, {} bytes): {}\n",
            e.facts.handoff_key, e.body_bytes, e.preview
        ));
    }
    if let Some(cursor) = &result.next_cursor {
        out.push_str(&format!(
            "More: call list_handoffs again with cursor \"{cursor}\".\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A position's time, `secs` after the epoch.
    fn at(secs: i64) -> Option<Time> {
        k8s_openapi::jiff::Timestamp::from_second(secs)
            .ok()
            .map(Time)
    }

    #[test]
    fn pages_cover_everything_once_in_order() {
        let mut items: Vec<SortKey> = (0..23).map(|i| (at(i % 7), format!("k{i:02}"))).collect();
        items.push((None, "undated".into()));
        items.sort_by(newest_first);
        for limit in [1, 5, 23, 24, 50] {
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let (page_items, next) = page(items.clone(), Clone::clone, after.as_ref(), limit);
                assert!(page_items.len() <= limit);
                seen.extend(page_items);
                match next {
                    Some(n) => {
                        after = Some(decode_cursor(&encode_cursor(&n)).expect("cursor round trip"))
                    }
                    None => break,
                }
            }
            assert_eq!(seen, items, "limit {limit}");
        }
    }

    #[test]
    fn a_last_page_has_no_cursor() {
        let items = vec![(at(2), "a".to_owned()), (at(1), "b".to_owned())];
        let (p, next) = page(items, Clone::clone, None, 2);
        assert_eq!(p.len(), 2);
        assert!(next.is_none());
    }

    #[test]
    fn bad_cursors_are_named() {
        let bad_time = page::encode(&Cursor {
            u: Some("yesterday".into()),
            k: "a".into(),
        });
        let bad_key = page::encode(&Cursor {
            u: None,
            k: "a\0b".into(),
        });
        // (cursor, the problem named)
        let cases = [
            (
                "%%%",
                "it contains '%' at byte 0, which is not base64url (A-Z, a-z, 0-9, '-', '_')",
            ),
            (
                "bm90\0",
                "it contains the control character U+0000 (NUL) at byte 4",
            ),
            ("bm90IGpzb24", "it does not decode to a position"),
            (&*bad_time, "its timestamp is malformed"),
            (
                &*bad_key,
                "its key is not one: it contains the control character U+0000 (NUL) at byte 1",
            ),
        ];
        for (bad, problem) in cases {
            let err = decode_cursor(bad).expect_err(bad);
            assert_eq!((err.field, err.problem.as_str()), ("cursor", problem));
        }
    }

    #[test]
    fn mirror_pages_start_where_the_cursor_points() {
        let dated = at(5).expect("ts");
        let cases = [
            (None, MirrorStart::Top),
            (Some((None, "undated".to_owned())), MirrorStart::PastEnd),
            (
                Some((Some(dated.clone()), "k".to_owned())),
                MirrorStart::After((dated.0, "k".to_owned())),
            ),
        ];
        for (after, want) in cases {
            assert_eq!(mirror_start(after.clone()), want, "{after:?}");
        }
    }
}
