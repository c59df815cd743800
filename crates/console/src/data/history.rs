//! What the mirror's history answers, through the bridge's tools as the
//! person: the diff between two revisions (`diff_handoff`, bounded as the
//! tool bounds it) and the full-text search (`search_handoffs`). A part
//! the mirror cannot give is an [`Unavailable`] sentence in the page, not
//! an error page; bad input (an unknown revision, a query that does not
//! parse, a stale cursor) is [`ReadError::Invalid`].

use jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::{Doing, ReadError, no_mirror};
use super::handoff::stored;
use super::tool;
use crate::model::{DiffPage, SearchHit, SearchPage, Unavailable, UnifiedDiff};
use handoff_bridge::auth::Caller;
use handoff_bridge::call::Services;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::validation::{self, FieldError};

/// The diff of handoff `name` from revision `from` to `to`.
pub async fn diff(
    caller: &Caller,
    services: &Services,
    name: &str,
    from: i64,
    to: i64,
) -> Result<DiffPage, ReadError> {
    for (field, value) in [("from", from), ("to", to)] {
        if value < 1 {
            return Err(FieldError {
                field,
                rule: "a revision number, 1 or more (see the handoff's revisions)".into(),
                problem: format!("got {value}"),
            }
            .into());
        }
    }
    let h = stored(caller, name).await?;
    let diff = if services.mirror.is_none() {
        Err(Unavailable(no_mirror("Diffs")))
    } else {
        let doing = Doing {
            action: "read the history of handoffs",
            namespace: caller.store().namespace(),
        };
        let args = json!({ "handoff_key": h.spec.handoff_key, "from": from, "to": to });
        part(tool::call(services, caller, "diff_handoff", args, doing).await)?.map(|a| unified(&a))
    };
    Ok(DiffPage {
        namespace: caller.store().namespace().to_owned(),
        name: name.to_owned(),
        key: h.spec.handoff_key,
        from,
        to,
        diff,
    })
}

/// A part of a page from a tool's answer: bad input and refusals are the
/// page's error; anything else is shown in the part as unavailable.
fn part(answer: Result<Value, ReadError>) -> Result<Result<Value, Unavailable>, ReadError> {
    match answer {
        Ok(value) => Ok(Ok(value)),
        Err(err @ (ReadError::Invalid { .. } | ReadError::Forbidden(_))) => Err(err),
        Err(other) => Ok(Err(Unavailable(other.to_string()))),
    }
}

/// The diff of a `diff_handoff` answer.
fn unified(answer: &Value) -> UnifiedDiff {
    UnifiedDiff {
        text: answer["diff"].as_str().unwrap_or_default().to_owned(),
        truncated: answer["truncated"].as_bool().unwrap_or(false),
    }
}

/// The search of `query` in `project`, from `cursor`. An empty query is
/// the empty search form; a query needs a project (the tool searches one).
pub async fn search(
    caller: &Caller,
    services: &Services,
    query: &str,
    project: Option<&str>,
    cursor: Option<&str>,
) -> Result<SearchPage, ReadError> {
    let namespace = caller.store().namespace().to_owned();
    let project = project.filter(|p| !p.trim().is_empty());
    let page = |hits, next| SearchPage {
        namespace: namespace.clone(),
        query: query.to_owned(),
        project: project.map(str::to_owned),
        hits,
        next,
    };
    if query.trim().is_empty() {
        return Ok(page(Ok(Vec::new()), None));
    }
    let Some(project) = project else {
        return Err(ReadError::Invalid {
            field: "project",
            rule: "a project of this namespace: a search looks in one project".into(),
            problem: "none was chosen".into(),
        });
    };
    validation::project(project)?;
    let doing = Doing {
        action: "search handoffs",
        namespace: &namespace,
    };
    let mut args = json!({ "project": project, "query": query });
    if let Some(cursor) = cursor.filter(|c| !c.is_empty()) {
        args["cursor"] = json!(cursor);
    }
    let answer = part(tool::call(services, caller, "search_handoffs", args, doing).await)?;
    let next = answer
        .as_ref()
        .ok()
        .and_then(|a| a["next_cursor"].as_str())
        .map(str::to_owned);
    Ok(page(answer.map(|a| hits(&a)), next))
}

/// The hits of a `search_handoffs` answer.
fn hits(answer: &Value) -> Vec<SearchHit> {
    answer["matches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let key = m["handoff_key"].as_str()?;
            Some(SearchHit {
                name: name_for_key(key),
                key: key.to_owned(),
                project: m["project"].as_str().unwrap_or_default().to_owned(),
                snippet: m["preview"].as_str().unwrap_or_default().to_owned(),
                updated: m["updated_at"]
                    .as_str()
                    .and_then(|t| t.parse::<Timestamp>().ok()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_the_pages_parts() {
        let found = json!({"matches": [
            {"handoff_key": "acme/api#1", "project": "shop", "preview": "…refund", "updated_at": "2026-12-01T10:00:00Z"},
            {"project": "shop"},
        ]});
        let got = hits(&found);
        assert_eq!(got.len(), 1, "a match without a key is skipped");
        assert_eq!(
            (
                got[0].name.as_str(),
                got[0].key.as_str(),
                got[0].snippet.as_str()
            ),
            (name_for_key("acme/api#1").as_str(), "acme/api#1", "…refund")
        );
        assert_eq!(got[0].updated.map(|t| t.as_second()), Some(1_796_119_200));
        assert_eq!(
            unified(&json!({"diff": "@@ -1 +1 @@", "truncated": true})),
            UnifiedDiff {
                text: "@@ -1 +1 @@".into(),
                truncated: true
            }
        );
    }

    #[test]
    fn bad_input_and_refusals_are_the_pages_error_the_rest_is_the_parts() {
        let invalid = ReadError::Invalid {
            field: "from",
            rule: "r".into(),
            problem: "p".into(),
        };
        let forbidden = ReadError::Forbidden("no".into());
        let down = ReadError::Unavailable("the mirror is down".into());
        // (answer, the page's error, or the part)
        let cases = [
            (Ok(json!(1)), Ok(Ok(json!(1)))),
            (Err(invalid.clone()), Err(invalid)),
            (Err(forbidden.clone()), Err(forbidden)),
            (Err(down), Ok(Err(Unavailable("the mirror is down".into())))),
        ];
        for (answer, want) in cases {
            assert_eq!(part(answer.clone()), want, "{answer:?}");
        }
    }
}
