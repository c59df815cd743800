//! `search_handoffs` (extension): a project's handoffs that mention some
//! words, best match first, with a preview and the words that matched.
//!
//! - with the PostgreSQL mirror: full-text search ([`handoff_mirror::search`],
//!   `websearch_to_tsquery('simple', …)`, `ts_rank`), after a
//!   SelfSubjectAccessReview for `list` — RBAC is not in that path, exactly
//!   as `list_handoffs` reads the mirror; only the caller's namespace is read.
//! - without it: a bounded scan of the project through the apiserver (as the
//!   caller, page by page, at most [`SCAN_CAP`] handoffs; the result says
//!   how many were read and whether the cap cut the scan), matching words
//!   as case-insensitive substrings of key and body, ranked by how often
//!   they occur.
//!
//! Both page with an opaque cursor (the offset of the next page), and both
//! answer only the current handoff of each key (the object whose name is
//! derived from its key, [`handoff_core::handoff::canonical`]): the mirror
//! holds no other, and the scan skips any other.

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer, mirror_error};
use super::definition::{definition, reads};
use super::page;
use super::views::HandoffFacts;
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::api::{Handoff, preview_line};
use handoff_kube::store::{ListQuery, SortKey, newest_first, sort_key};
use handoff_mirror::search::SearchRow;

const NAME: &str = "search_handoffs";

/// Most handoffs a search without the mirror reads from the apiserver.
pub(crate) const SCAN_CAP: usize = 5000;

/// Longest query, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 500;

/// The row of `search_handoffs` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "list",
    definition: || {
        definition::<SearchArgs, SearchResult>(
            NAME,
            "Find a project's handoffs by what they say: words (any language, identifiers such as \
             payments_test.go), \"quoted phrases\", `or`, and -excluded words, matched against key and \
             body. Best match first, with a preview and the matched words. Page with limit and \
             next_cursor.",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `search_handoffs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The project to search.
    pub project: String,
    /// What to look for: words, "quoted phrases", `or`, `-excluded` (at most 500 characters).
    pub query: String,
    /// Only handoffs of this repository (optional).
    #[serde(default)]
    pub repo: Option<String>,
    /// Page size, 1–200 (default 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, to continue.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One match of `search_handoffs`.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct SearchMatch {
    /// Key, project, repo, kind, writer, time.
    #[serde(flatten)]
    pub facts: HandoffFacts,
    /// How well it matches (higher is better; comparable within one answer).
    pub rank: f64,
    /// The query's words found in key or body.
    pub matched_words: Vec<String>,
    /// The body around the first matched word, on one line.
    pub preview: String,
}

impl SearchMatch {
    /// The match of a handoff with these facts and this body, whether
    /// found by the mirror or by the scan.
    fn new(facts: HandoffFacts, body: &str, rank: f64, wanted: &[String]) -> Self {
        let matched = matched_words(wanted, &facts.handoff_key, body);
        Self {
            preview: preview_around(body, &matched),
            facts,
            rank,
            matched_words: matched,
        }
    }
}

/// Result of `search_handoffs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResult {
    /// Matches, best first.
    pub matches: Vec<SearchMatch>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `mirror` (PostgreSQL full-text search) or `apiserver` (a bounded scan).
    pub source: String,
    /// Without the mirror: how many handoffs were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scanned: Option<usize>,
    /// Without the mirror: true when the scan stopped at its cap, so
    /// handoffs beyond it were not searched.
    pub scan_capped: bool,
}

/// The words of a query, as both paths match them: lower-cased, without
/// quotes, `or` and excluded (`-word`) words; and the excluded ones.
pub fn terms(query: &str) -> (Vec<String>, Vec<String>) {
    let mut wanted = Vec::new();
    let mut excluded = Vec::new();
    for word in query.split_whitespace() {
        let word = word.trim_matches('"').to_lowercase();
        match word.strip_prefix('-') {
            Some(rest) if !rest.is_empty() => excluded.push(rest.trim_matches('"').to_owned()),
            _ if word.is_empty() || word == "or" => {}
            _ => {
                if !wanted.contains(&word) {
                    wanted.push(word);
                }
            }
        }
    }
    (wanted, excluded)
}

/// The words of `wanted` found in `key` or `body` (case-insensitive).
pub fn matched_words(wanted: &[String], key: &str, body: &str) -> Vec<String> {
    let text = format!("{key}\n{body}").to_lowercase();
    wanted
        .iter()
        .filter(|w| text.contains(w.as_str()))
        .cloned()
        .collect()
}

/// How often the words of `wanted` occur in `key` and `body` together, or
/// `None` when an excluded word occurs.
pub fn occurrences(wanted: &[String], excluded: &[String], key: &str, body: &str) -> Option<usize> {
    let text = format!("{key}\n{body}").to_lowercase();
    if excluded.iter().any(|w| text.contains(w.as_str())) {
        return None;
    }
    Some(
        wanted
            .iter()
            .map(|w| text.matches(w.as_str()).count())
            .sum(),
    )
}

/// About 160 characters of `body` on one line, starting a little before
/// the first of `words` found in it (from the start when none is).
pub fn preview_around(body: &str, words: &[String]) -> String {
    let flat = preview_source(body);
    let lower = flat.to_lowercase();
    let first = words.iter().filter_map(|w| lower.find(w.as_str())).min();
    // Lower-casing can change byte lengths: fall back to the start then.
    let start_byte = first.filter(|_| lower.len() == flat.len()).unwrap_or(0);
    let start_char = flat
        .get(..start_byte)
        .map_or(0, |before| before.chars().count());
    let skip = start_char.saturating_sub(40);
    let rest: String = flat.chars().skip(skip).collect();
    let preview = preview_line(&rest);
    if skip > 0 {
        format!("…{preview}")
    } else {
        preview
    }
}

fn preview_source(body: &str) -> String {
    body.split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: SearchArgs = call.args(args)?;
    let (limit, offset) = validate(&args)?;
    let (wanted, excluded) = terms(&args.query);
    let repo = args.repo.clone().filter(|r| !r.is_empty());
    let result = match call.mirror {
        Some(mirror) => {
            call.authorize("list").await?;
            let rows = mirror
                .search(
                    call.namespace(),
                    &args.project,
                    repo.as_deref(),
                    &args.query,
                    i64::try_from(offset).unwrap_or(i64::MAX),
                    i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX),
                )
                .await
                // The query is the one free text of the statement.
                .map_err(|e| mirror_error(e, Some("query")))?;
            let more = rows.len() > limit;
            SearchResult {
                matches: rows
                    .iter()
                    .take(limit)
                    .map(|r| of_row(r, &wanted))
                    .collect(),
                next_cursor: more.then(|| encode_cursor(offset + limit)),
                source: "mirror".into(),
                scanned: None,
                scan_capped: false,
            }
        }
        None => {
            let query = ListQuery {
                project: args.project.clone(),
                repo,
                kind: None,
            };
            // Only the matches' entries are kept (previews, not bodies).
            let mut found: Vec<(usize, SortKey, SearchMatch)> = Vec::new();
            let (scanned, capped) = call
                .caller
                .store()
                .scan(&query, SCAN_CAP, |page| {
                    // Only the current handoff of each key is searched.
                    let current = page.iter().filter(|h| handoff_core::handoff::canonical(h));
                    found.extend(current.filter_map(|h| {
                        occurrences(&wanted, &excluded, &h.spec.handoff_key, &h.spec.body)
                            .filter(|n| *n > 0)
                            .map(|n| (n, sort_key(h), of_handoff(h, n, &wanted)))
                    }));
                })
                .await
                .map_err(|e| call.kube_error(e))?;
            found.sort_by(|(a, ka, _), (b, kb, _)| b.cmp(a).then_with(|| newest_first(ka, kb)));
            let more = found.len() > offset + limit;
            SearchResult {
                matches: found
                    .into_iter()
                    .skip(offset)
                    .take(limit)
                    .map(|(_, _, m)| m)
                    .collect(),
                next_cursor: more.then(|| encode_cursor(offset + limit)),
                source: "apiserver".into(),
                scanned: Some(scanned),
                scan_capped: capped,
            }
        }
    };
    let text = text(&args.project, &args.query, &result);
    Ok(answer(&result, text))
}

fn of_row(found: &SearchRow, wanted: &[String]) -> SearchMatch {
    let row = &found.row;
    let facts = HandoffFacts::of_row(row);
    SearchMatch::new(facts, &row.body, f64::from(found.rank), wanted)
}

fn of_handoff(h: &Handoff, occurrences: usize, wanted: &[String]) -> SearchMatch {
    SearchMatch::new(
        HandoffFacts::of(h),
        &h.spec.body,
        occurrences as f64,
        wanted,
    )
}

/// Checks the project, the query, the page size and the cursor, in that
/// order; returns the page size and the offset.
fn validate(args: &SearchArgs) -> Result<(usize, usize), FieldError> {
    validation::project(&args.project)?;
    validation::search_query(&args.query, MAX_QUERY_CHARS)?;
    let chars = args.query.chars().count();
    if terms(&args.query).0.is_empty() || chars > MAX_QUERY_CHARS {
        return Err(FieldError {
            field: "query",
            rule: format!(
                "at least one word to look for (not only `or` or -excluded words), at most {MAX_QUERY_CHARS} characters"
            ),
            problem: format!("got {chars} characters: {:?}", preview_line(&args.query)),
        });
    }
    if let Some(repo) = args.repo.as_deref().filter(|r| !r.is_empty()) {
        validation::repo(repo)?;
    }
    let limit = page::limit(args.limit)?;
    let offset = match page::given(args.cursor.as_deref()) {
        None => 0,
        Some(cursor) => decode_cursor(cursor)?,
    };
    Ok((limit, offset))
}

/// The position of a page of matches: how many came before it (each path
/// orders its matches totally, so the same search continues where its
/// last page ended).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Offset {
    /// Matches before the page.
    o: usize,
}

fn encode_cursor(offset: usize) -> String {
    page::encode(&Offset { o: offset })
}

fn decode_cursor(cursor: &str) -> Result<usize, FieldError> {
    page::decode::<Offset>(cursor)
        .map(|offset| offset.o)
        .map_err(|why| {
            page::invalid(
                "the next_cursor of a previous search_handoffs answer",
                why.problem(),
            )
        })
}

/// The text of a `search_handoffs` answer.
pub fn text(project: &str, query: &str, result: &SearchResult) -> String {
    let mut lines = Vec::new();
    if result.matches.is_empty() {
        lines.push(format!(
            "No handoff of project {project} matches {query:?}."
        ));
    } else {
        lines.push(format!(
            "{} handoff(s) of project {project} match {query:?}, best first:",
            result.matches.len()
        ));
        for m in &result.matches {
            lines.push(format!(
                "- `{}` (matched: {}): {}",
                m.facts.handoff_key,
                m.matched_words.join(", "),
                m.preview
            ));
        }
    }
    if let Some(scanned) = result.scanned {
        lines.push(if result.scan_capped {
            format!(
                "Searched the first {scanned} handoffs through the Kubernetes API (the cap without the \
                 PostgreSQL mirror); later ones were not searched."
            )
        } else {
            format!("Searched all {scanned} handoffs of the project through the Kubernetes API.")
        });
    }
    if result.next_cursor.is_some() {
        lines.push("More matches: call again with next_cursor.".into());
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_become_words_and_exclusions() {
        let (wanted, excluded) = terms(r#"Refund "payments_test.go" or Überweisung -draft refund"#);
        assert_eq!(wanted, ["refund", "payments_test.go", "überweisung"]);
        assert_eq!(excluded, ["draft"]);
        assert_eq!(terms("or -x").0, Vec::<String>::new());
    }

    #[test]
    fn occurrences_rank_and_exclusions_drop() {
        let wanted = vec!["refund".to_owned()];
        assert_eq!(
            occurrences(&wanted, &[], "k", "Refund, then refund"),
            Some(2)
        );
        assert_eq!(occurrences(&wanted, &[], "k", "a refund"), Some(1));
        assert_eq!(
            occurrences(&wanted, &["draft".into()], "k", "refund draft"),
            None
        );
    }

    #[test]
    fn previews_start_near_the_first_match() {
        let body = format!("{} needle here", "word ".repeat(100));
        let preview = preview_around(&body, &["needle".into()]);
        assert!(preview.starts_with('…'), "{preview}");
        assert!(preview.contains("needle here"), "{preview}");
        assert!(preview_around("short body", &[]).starts_with("short"));
    }

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused_by_name() {
        assert_eq!(decode_cursor(&encode_cursor(50)).ok(), Some(50));
        let err = decode_cursor("nope").expect_err("refused");
        assert_eq!(err.field, "cursor");
    }
}
