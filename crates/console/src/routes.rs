//! Every URL the console serves, built here and nowhere else, so a page's
//! links and the router's paths cannot drift apart. The namespace is in
//! every data URL: a person is not a ServiceAccount and has no namespace of
//! their own, and a bookmarked page must mean the same thing tomorrow.
//!
//! The router's patterns are the `*_PATTERN` constants; the functions build
//! the matching links with their parts percent-encoded.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Characters escaped in a path segment or a query value: everything but
/// the unreserved set of RFC 3986.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The front page: namespaces and projects.
pub const HOME: &str = "/";
/// Laptop mode's one-time sign-in link (`?token=`).
pub const LOGIN: &str = "/login";
/// The page that says how to sign in.
pub const SIGN_IN: &str = "/sign-in";
/// Liveness of the console itself.
pub const HEALTHZ: &str = "/healthz";
/// The console's stylesheet.
pub const STYLESHEET: &str = "/assets/console.css";
/// The console's one script (live refresh, local times); pages work without it.
pub const SCRIPT: &str = "/assets/console.js";

pub const PROJECT_PATTERN: &str = "/ns/{namespace}/projects/{project}";
pub const EXPORT_PATTERN: &str = "/ns/{namespace}/projects/{project}/export";
pub const HANDOFF_PATTERN: &str = "/ns/{namespace}/handoffs/{name}";
pub const DIFF_PATTERN: &str = "/ns/{namespace}/handoffs/{name}/diff";
pub const DELETE_PATTERN: &str = "/ns/{namespace}/handoffs/{name}/delete";
pub const SEARCH_PATTERN: &str = "/ns/{namespace}/search";
pub const OFFERS_PATTERN: &str = "/ns/{namespace}/offers";
pub const REJECT_PATTERN: &str = "/ns/{namespace}/offers/{name}/reject";
pub const SCHEDULES_PATTERN: &str = "/ns/{namespace}/schedules";
pub const PROBLEMS_PATTERN: &str = "/ns/{namespace}/problems";
/// Server-Sent Events: `?project=` or `?handoff=` says what to watch.
pub const LIVE_PATTERN: &str = "/ns/{namespace}/live";

fn seg(s: &str) -> String {
    utf8_percent_encode(s, ESCAPED).to_string()
}

/// `path?k=v&…` with the pairs whose value is present, values encoded.
fn with_query(path: String, pairs: &[(&str, Option<&str>)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", seg(v))))
        .collect();
    if query.is_empty() {
        path
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// A project's handoffs; `cursor` is a `list_handoffs` page cursor.
pub fn project(
    namespace: &str,
    project: &str,
    repo: Option<&str>,
    kind: Option<&str>,
    cursor: Option<&str>,
) -> String {
    with_query(
        format!("/ns/{}/projects/{}", seg(namespace), seg(project)),
        &[("repo", repo), ("kind", kind), ("cursor", cursor)],
    )
}

/// A project's handoffs as a download (`format` is `markdown` or `json`).
pub fn export(namespace: &str, project: &str, format: &str) -> String {
    with_query(
        format!("/ns/{}/projects/{}/export", seg(namespace), seg(project)),
        &[("format", Some(format))],
    )
}

/// One handoff, by object name.
pub fn handoff(namespace: &str, name: &str) -> String {
    format!("/ns/{}/handoffs/{}", seg(namespace), seg(name))
}

/// The diff between two revisions of one handoff.
pub fn diff(namespace: &str, name: &str, from: i64, to: i64) -> String {
    format!(
        "/ns/{}/handoffs/{}/diff?from={from}&to={to}",
        seg(namespace),
        seg(name)
    )
}

/// The confirmation (GET) and the action (POST) of deleting a handoff.
pub fn delete(namespace: &str, name: &str) -> String {
    format!("/ns/{}/handoffs/{}/delete", seg(namespace), seg(name))
}

/// The mirror's full-text search.
pub fn search(namespace: &str, query: Option<&str>, project: Option<&str>) -> String {
    with_query(
        format!("/ns/{}/search", seg(namespace)),
        &[("q", query), ("project", project)],
    )
}

/// A further page of the mirror's full-text search (`cursor` is a
/// `search_handoffs` page cursor).
pub fn search_page(
    namespace: &str,
    query: &str,
    project: Option<&str>,
    cursor: Option<&str>,
) -> String {
    with_query(
        format!("/ns/{}/search", seg(namespace)),
        &[("q", Some(query)), ("project", project), ("cursor", cursor)],
    )
}

/// Offers per destination.
pub fn offers(namespace: &str) -> String {
    format!("/ns/{}/offers", seg(namespace))
}

/// The confirmation (GET) and the action (POST) of rejecting an offer.
pub fn reject(namespace: &str, name: &str) -> String {
    format!("/ns/{}/offers/{}/reject", seg(namespace), seg(name))
}

/// Schedules and their last cycles.
pub fn schedules(namespace: &str) -> String {
    format!("/ns/{}/schedules", seg(namespace))
}

/// Twins and squats, failed lint, the mirror's lag, the controller.
pub fn problems(namespace: &str) -> String {
    format!("/ns/{}/problems", seg(namespace))
}

/// The event stream of a project's list or of one handoff, watching from
/// `since` (the resourceVersion the page drew) when given.
pub fn live(
    namespace: &str,
    project: Option<&str>,
    handoff: Option<&str>,
    since: Option<&str>,
) -> String {
    with_query(
        format!("/ns/{}/live", seg(namespace)),
        &[("project", project), ("handoff", handoff), ("since", since)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_encode_their_parts() {
        let cases = [
            (
                project("team-a", "web", None, None, None),
                "/ns/team-a/projects/web",
            ),
            (
                project(
                    "team-a",
                    "web",
                    Some("github.com/x/y"),
                    Some("a b"),
                    Some("c=1&d"),
                ),
                "/ns/team-a/projects/web?repo=github.com%2Fx%2Fy&kind=a%20b&cursor=c%3D1%26d",
            ),
            (handoff("ns", "h-1.x"), "/ns/ns/handoffs/h-1.x"),
            (diff("ns", "h", 2, 5), "/ns/ns/handoffs/h/diff?from=2&to=5"),
            (
                search("ns", Some("<script>"), None),
                "/ns/ns/search?q=%3Cscript%3E",
            ),
            (search("ns", None, None), "/ns/ns/search"),
            (
                search_page("ns", "a b", Some("p"), Some("c=1")),
                "/ns/ns/search?q=a%20b&project=p&cursor=c%3D1",
            ),
            (
                export("ns", "p", "json"),
                "/ns/ns/projects/p/export?format=json",
            ),
            (live("ns", Some("p"), None, None), "/ns/ns/live?project=p"),
            (
                live("ns", None, Some("h"), Some("42")),
                "/ns/ns/live?handoff=h&since=42",
            ),
            (reject("ns", "o/../x"), "/ns/ns/offers/o%2F..%2Fx/reject"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn every_pattern_matches_its_builder() {
        let fill = |p: &str| {
            p.replace("{namespace}", "n")
                .replace("{project}", "p")
                .replace("{name}", "x")
        };
        let cases = [
            (PROJECT_PATTERN, project("n", "p", None, None, None)),
            (
                EXPORT_PATTERN,
                export("n", "p", "json").replace("?format=json", ""),
            ),
            (HANDOFF_PATTERN, handoff("n", "x")),
            (
                DIFF_PATTERN,
                diff("n", "x", 1, 2).replace("?from=1&to=2", ""),
            ),
            (DELETE_PATTERN, delete("n", "x")),
            (SEARCH_PATTERN, search("n", None, None)),
            (OFFERS_PATTERN, offers("n")),
            (REJECT_PATTERN, reject("n", "x")),
            (SCHEDULES_PATTERN, schedules("n")),
            (PROBLEMS_PATTERN, problems("n")),
            (LIVE_PATTERN, live("n", None, None, None)),
        ];
        for (pattern, built) in cases {
            assert_eq!(fill(pattern), built, "{pattern}");
        }
    }
}
