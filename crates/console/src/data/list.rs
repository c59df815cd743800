//! A project's handoffs, one page at a time, as `list_handoffs` pages them
//! (the same page size, order and cursor: a cursor from one works in the
//! other), read from the apiserver as the person, so RBAC decides. Each
//! row carries what the tool's entries do not: revision, size in tokens,
//! lint, rescued or written, and stale by the project's TTL.

use jiff::Timestamp;

use super::errors::{Doing, ReadError};
use super::reads::project_ttl;
use super::rows::handoff_row;
use crate::model::{ListFilters, ProjectPage};
use handoff_bridge::auth::Caller;
use handoff_bridge::tools::list::{decode_cursor, encode_cursor, page};
use handoff_bridge::tools::page::DEFAULT_LIST_LIMIT;
use handoff_core::api::validation;
use handoff_kube::store::{ListQuery, SortKey, sort_key};

/// The filters and the cursor, checked; the query and where the page starts.
pub(super) fn request(
    project: &str,
    filters: &ListFilters,
    cursor: Option<&str>,
) -> Result<(ListQuery, Option<SortKey>), ReadError> {
    validation::project(project)?;
    let given = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
    let (repo, kind) = (given(&filters.repo), given(&filters.kind));
    if let Some(repo) = &repo {
        validation::repo(repo)?;
    }
    if let Some(kind) = &kind {
        validation::kind(kind)?;
    }
    let after = cursor
        .filter(|c| !c.is_empty())
        .map(decode_cursor)
        .transpose()?;
    Ok((
        ListQuery {
            project: project.to_owned(),
            repo,
            kind,
        },
        after,
    ))
}

/// One page of `project`'s handoffs (filtered), from `cursor`.
pub async fn project(
    caller: &Caller,
    project: &str,
    filters: &ListFilters,
    cursor: Option<&str>,
) -> Result<ProjectPage, ReadError> {
    let (query, after) = request(project, filters, cursor)?;
    let namespace = caller.store().namespace();
    let doing = Doing {
        action: "list handoffs",
        namespace,
    };
    let limit = DEFAULT_LIST_LIMIT as usize;
    // One more than the page: whether another page follows.
    let (first, ttl, may_delete) = futures::join!(
        caller
            .store()
            .list_first(&query, after.as_ref(), limit.saturating_add(1)),
        project_ttl(caller, project),
        caller.may("delete"),
    );
    let first = first.map_err(|e| doing.kube(&e, "project"))?;
    let (items, next) = page(first.items, sort_key, after.as_ref(), limit);
    let now = Timestamp::now();
    Ok(ProjectPage {
        namespace: namespace.to_owned(),
        project: project.to_owned(),
        filters: ListFilters {
            repo: query.repo,
            kind: query.kind,
        },
        rows: items.iter().map(|h| handoff_row(h, ttl, now)).collect(),
        next: next.as_ref().map(encode_cursor),
        may_delete: may_delete.unwrap_or(false),
        version: first.version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(repo: Option<&str>, kind: Option<&str>) -> ListFilters {
        ListFilters {
            repo: repo.map(Into::into),
            kind: kind.map(Into::into),
        }
    }

    #[test]
    fn bad_filters_and_cursors_are_named() {
        let long = "k".repeat(64);
        // (project, repo, kind, cursor, the field refused)
        let cases = [
            ("Bad Project", None, None, None, "project"),
            ("", None, None, None, "project"),
            ("shop", Some("a\u{0}b"), None, None, "repo"),
            ("shop", None, Some(long.as_str()), None, "kind"),
            ("shop", None, None, Some("%%%"), "cursor"),
            ("shop", None, None, Some("bm90IGpzb24"), "cursor"),
        ];
        for (project, repo, kind, cursor, field) in cases {
            match request(project, &filters(repo, kind), cursor) {
                Err(ReadError::Invalid {
                    field: got,
                    rule,
                    problem,
                }) => {
                    assert_eq!(got, field, "{project:?} {repo:?} {kind:?} {cursor:?}");
                    assert!(!rule.is_empty() && !problem.is_empty());
                }
                other => panic!("{project:?} {repo:?} {kind:?} {cursor:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn good_requests_keep_the_filters_given_and_the_cursor_position() {
        let position = (None, "k".to_owned());
        let cursor = encode_cursor(&position);
        // (repo, kind, cursor, the query's repo and kind, the position)
        let cases = [
            (None, None, None, (None, None), None),
            (Some(""), Some(" "), Some(""), (None, None), None),
            (
                Some("o/r"),
                Some("issue"),
                Some(cursor.as_str()),
                (Some("o/r"), Some("issue")),
                Some(position.clone()),
            ),
        ];
        for (repo, kind, cursor, (want_repo, want_kind), want_after) in cases {
            let (query, after) = request("shop", &filters(repo, kind), cursor).expect("valid");
            assert_eq!(query.project, "shop");
            assert_eq!(
                (query.repo.as_deref(), query.kind.as_deref(), after),
                (want_repo, want_kind, want_after)
            );
        }
    }
}
