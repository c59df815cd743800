//! Every page from a literal model: what it must show, what it must not
//! (escaping, actions the person may not take), and the frame's rules
//! (one h1, labels, captions, no inline script or style).

use jiff::Timestamp;

use super::*;
use crate::model::*;

const HOSTILE_KEY: &str = "<b>x</b>";
const ESCAPED_KEY: &str = "&lt;b&gt;x&lt;/b&gt;";

fn viewer() -> Viewer {
    Viewer {
        username: "ada@example.org".into(),
        mode: Mode::Proxy,
        csrf: "csrf-token-123".into(),
    }
}

fn at(s: &str) -> Timestamp {
    s.parse().expect("a literal time")
}

fn row(key: &str) -> HandoffRow {
    HandoffRow {
        name: "h-1".into(),
        key: key.into(),
        project: "web".into(),
        repo: Some("github.com/x/web".into()),
        kind: Some("issue".into()),
        writer: Some("agent-7".into()),
        updated: Some(at("2026-12-05T06:18:50Z")),
        revision: Some(4),
        tokens: Some(812),
        lint: LintStatus::Failed("too long for a summary".into()),
        origin: Origin::Rescued,
        stale: true,
    }
}

fn project_page(rows: Vec<HandoffRow>, may_delete: bool, next: Option<&str>) -> ProjectPage {
    ProjectPage {
        namespace: "team-a".into(),
        project: "web".into(),
        filters: ListFilters::default(),
        rows,
        next: next.map(Into::into),
        may_delete,
        version: Some("17".into()),
    }
}

fn handoff_page(body: &str, may_delete: bool) -> HandoffPage {
    HandoffPage {
        namespace: "team-a".into(),
        row: row(HOSTILE_KEY),
        body: body.into(),
        revisions: Ok(vec![
            RevisionRow {
                revision: 4,
                at: Some(at("2026-12-05T06:18:50Z")),
                writer: Some("agent-7".into()),
                tokens: Some(812),
            },
            RevisionRow {
                revision: 2,
                at: None,
                writer: None,
                tokens: None,
            },
        ]),
        may_delete,
        version: Some("18".into()),
    }
}

fn offer(name: &str, phase: &str, may_reject: bool) -> OfferRow {
    OfferRow {
        name: name.into(),
        project: "web".into(),
        from_key: HOSTILE_KEY.into(),
        phase: phase.into(),
        superseded_by: None,
        created: Some(at("2026-12-04T10:00:00Z")),
        may_reject,
    }
}

/// Every page, named, with what it must contain and must not.
fn pages() -> Vec<(&'static str, String, Vec<&'static str>, Vec<&'static str>)> {
    let v = viewer();
    let overview_page = Overview {
        namespaces: vec![
            NamespaceSummary {
                namespace: "team-a".into(),
                projects: vec![ProjectCount {
                    project: "web".into(),
                    handoffs: Count::AtLeast(500),
                    pending_offers: Count::Exact(2),
                }],
                handoffs: Count::AtLeast(500),
            },
            NamespaceSummary {
                namespace: "team-b".into(),
                projects: vec![],
                handoffs: Count::Exact(0),
            },
        ],
    };
    let diff_page = DiffPage {
        namespace: "team-a".into(),
        name: "h-1".into(),
        key: HOSTILE_KEY.into(),
        from: 2,
        to: 4,
        diff: Ok(UnifiedDiff {
            text: "--- a\n+++ b\n@@ -1 +1 @@\n-old <i>\n+new\n same".into(),
            truncated: true,
        }),
    };
    let search_page = SearchPage {
        namespace: "team-a".into(),
        query: "flaky <test>".into(),
        project: None,
        hits: Ok(vec![SearchHit {
            name: "h-1".into(),
            key: HOSTILE_KEY.into(),
            project: "web".into(),
            snippet: "the <script>flaky</script> test".into(),
            updated: Some(at("2026-12-05T06:18:50Z")),
        }]),
        next: Some("c2".into()),
    };
    let offers_page = OffersPage {
        namespace: "team-a".into(),
        groups: vec![OfferGroup {
            to: "reviewer".into(),
            offers: vec![
                offer("o-old", "Accepted", false),
                offer("o-new", "Pending", true),
            ],
        }],
    };
    let schedules_page = SchedulesPage {
        namespace: "team-a".into(),
        schedules: vec![ScheduleRow {
            name: "nightly".into(),
            project: "web".into(),
            cron: "0 3 * * *".into(),
            time_zone: Some("Europe/Paris".into()),
            suspended: true,
            phase: Some("Refining".into()),
            active_job: Some("nightly-refine-1".into()),
            next: Some(at("2026-12-06T02:00:00Z")),
            cycles: vec![CycleRow {
                tick: at("2026-12-05T02:00:00Z"),
                refine: StepRow {
                    job: "nightly-refine-1".into(),
                    result: Some("Succeeded".into()),
                },
                brainstorm: None,
                result: None,
            }],
        }],
    };
    let problems_page = ProblemsPage {
        namespace: "team-a".into(),
        unbound: vec![Problem {
            name: "h-2".into(),
            key: "k2".into(),
            message: "a twin of h-1".into(),
        }],
        lint_failed: vec![],
        mirror: Health::Degraded("The mirror is 40 s behind.".into()),
        controller: Health::Healthy("Its lease was renewed 3 s ago.".into()),
    };
    vec![
        (
            "overview",
            overview(&v, &overview_page).into_string(),
            vec![
                "Namespace team-a",
                "at least 500",
                "/ns/team-a/projects/web",
                "No handoffs in namespace team-b yet",
                "write_handoff",
                "id=\"ns-team-a\"",
            ],
            vec![],
        ),
        (
            "project",
            project(
                &v,
                &project_page(vec![row(HOSTILE_KEY)], false, Some("c=1")),
            )
            .into_string(),
            vec![
                ESCAPED_KEY,
                "github.com/x/web",
                "agent-7",
                "<time datetime=\"2026-12-05T06:18:50Z\" title=\"2026-12-05 06:18:50 UTC\">2026-12-05 06:18:50 UTC</time>",
                "812",
                "failed",
                "rescued",
                "stale",
                "/ns/team-a/projects/web?cursor=c%3D1",
                "data-live=\"/ns/team-a/live?project=web&amp;since=17\"",
                "<label for=\"f-repo\">",
                "format=json",
                "format=markdown",
            ],
            vec!["<b>x</b>", "/delete"],
        ),
        (
            "project, may delete",
            project(&v, &project_page(vec![row("k")], true, None)).into_string(),
            vec!["/ns/team-a/handoffs/h-1/delete"],
            vec!["Next page"],
        ),
        (
            "project, empty",
            project(&v, &project_page(vec![], false, None)).into_string(),
            vec!["No handoffs in project web yet — an agent writes one with write_handoff."],
            vec!["<table"],
        ),
        (
            "handoff",
            handoff(
                &v,
                &handoff_page(
                    "# Plan\n\n<script>alert(1)</script> [x](javascript:alert(1))",
                    false,
                ),
            )
            .into_string(),
            vec![
                ESCAPED_KEY,
                "<div class=\"body\" dir=\"auto\">",
                "<h3>Plan</h3>",
                "&lt;script&gt;alert(1)&lt;/script&gt;",
                "/ns/team-a/handoffs/h-1/diff?from=2&amp;to=4",
                "<select id=\"d-from\" name=\"from\">",
                "data-live=\"/ns/team-a/live?handoff=h-1&amp;since=18\"",
                "too long for a summary",
            ],
            vec!["<script>alert", "href=\"javascript", "/delete", "<b>x</b>"],
        ),
        (
            "handoff, may delete",
            handoff(&v, &handoff_page("ok", true)).into_string(),
            vec!["href=\"/ns/team-a/handoffs/h-1/delete\""],
            vec![],
        ),
        (
            "handoff, no mirror",
            handoff(
                &v,
                &HandoffPage {
                    revisions: Err(Unavailable("The mirror is not reachable.".into())),
                    ..handoff_page("ok", false)
                },
            )
            .into_string(),
            vec!["The mirror is not reachable."],
            vec!["<select"],
        ),
        (
            "diff",
            diff(&v, &diff_page).into_string(),
            vec![
                "<span class=\"del\">-old &lt;i&gt;</span>",
                "<span class=\"add\">+new</span>",
                "<span class=\"hunk\">@@ -1 +1 @@</span>",
                "cut at the bound",
                ESCAPED_KEY,
            ],
            vec!["<i>"],
        ),
        (
            "search",
            search(&v, &search_page).into_string(),
            vec![
                "the &lt;script&gt;flaky&lt;/script&gt; test",
                "value=\"flaky &lt;test&gt;\"",
                "/ns/team-a/search?q=flaky%20%3Ctest%3E&amp;cursor=c2",
                "<label for=\"q\">",
            ],
            vec!["<script>flaky"],
        ),
        (
            "search, no query",
            search(
                &v,
                &SearchPage {
                    query: String::new(),
                    hits: Ok(vec![]),
                    next: None,
                    ..search_page.clone()
                },
            )
            .into_string(),
            vec!["Type words to search"],
            vec!["Results"],
        ),
        (
            "offers",
            offers(&v, &offers_page).into_string(),
            vec![
                "To reviewer",
                "/ns/team-a/offers/o-new/reject",
                "Pending",
                "Accepted",
            ],
            vec!["/ns/team-a/offers/o-old/reject"],
        ),
        (
            "offers, empty",
            offers(
                &v,
                &OffersPage {
                    namespace: "team-a".into(),
                    groups: vec![],
                },
            )
            .into_string(),
            vec!["No offers in namespace team-a", "offer_handoff"],
            vec!["/reject"],
        ),
        (
            "schedules",
            schedules(&v, &schedules_page).into_string(),
            vec![
                "0 3 * * *",
                "Europe/Paris",
                "Refining",
                "nightly-refine-1</code>: Succeeded",
                "not started",
                "2026-12-06 02:00:00 UTC",
            ],
            vec![],
        ),
        (
            "problems",
            problems(&v, &problems_page).into_string(),
            vec![
                "a twin of h-1",
                "Degraded",
                "40 s behind",
                "Healthy",
                "Every body passed the lint",
            ],
            vec![],
        ),
        (
            "confirm delete",
            confirm_delete(&v, "team-a", &row(HOSTILE_KEY)).into_string(),
            vec![
                "method=\"post\" action=\"/ns/team-a/handoffs/h-1/delete\"",
                "name=\"csrf\" value=\"csrf-token-123\"",
                "Cancel",
                "href=\"/ns/team-a/handoffs/h-1\"",
                ESCAPED_KEY,
            ],
            vec!["<b>x</b>"],
        ),
        (
            "confirm reject",
            confirm_reject(&v, "team-a", &offer("o-new", "Pending", true)).into_string(),
            vec![
                "method=\"post\" action=\"/ns/team-a/offers/o-new/reject\"",
                "name=\"csrf\" value=\"csrf-token-123\"",
                "Cancel",
                "href=\"/ns/team-a/offers\"",
            ],
            vec![],
        ),
        (
            "sign in, laptop",
            sign_in(Mode::Laptop, SignIn::LinkUsed).into_string(),
            vec!["already used", "handoff console"],
            vec!["Signed in as", "csrf", "proxy"],
        ),
        (
            "sign in, proxy",
            sign_in(Mode::Proxy, SignIn::NoToken).into_string(),
            vec!["Sign in through your organisation's proxy"],
            vec!["Signed in as", "<form"],
        ),
        (
            "error",
            error(
                Some(&v),
                404,
                "Not found",
                "No handoff h-9 in namespace team-a.",
            )
            .into_string(),
            vec![
                "Error 404",
                "No handoff h-9 in namespace team-a.",
                "Signed in as",
            ],
            vec![],
        ),
    ]
}

#[test]
fn each_page_shows_what_it_must_and_not_what_it_must_not() {
    for (name, html, present, absent) in pages() {
        for want in present {
            assert!(html.contains(want), "{name}: missing {want:?} in\n{html}");
        }
        for not in absent {
            assert!(!html.contains(not), "{name}: has {not:?} in\n{html}");
        }
    }
}

#[test]
fn every_page_keeps_the_frames_rules() {
    for (name, html, _, _) in pages() {
        assert!(
            html.starts_with("<!DOCTYPE html><html lang=\"en\">"),
            "{name}: doctype and lang"
        );
        assert_eq!(html.matches("<h1>").count(), 1, "{name}: one h1");
        assert_eq!(
            html.matches("<main id=\"content\"").count(),
            1,
            "{name}: one main"
        );
        assert!(
            html.contains("<title>") && html.contains("href=\"#content\""),
            "{name}: title and skip link"
        );
        assert!(!html.contains("style="), "{name}: inline style");
        assert_eq!(
            html.matches("<script").count(),
            1,
            "{name}: only the console's script"
        );
        assert!(
            html.contains("<script src=\"/assets/console.js\" defer></script>"),
            "{name}"
        );
        assert_no_handlers(name, &html);
        assert_eq!(
            html.matches("<table").count(),
            html.matches("<caption>").count(),
            "{name}: every table has a caption"
        );
        for id in field_ids(&html) {
            assert!(
                html.contains(&format!("<label for=\"{id}\">")),
                "{name}: field {id} has no label"
            );
        }
    }
}

/// No element of the page carries an `on…` or `style` attribute, or a
/// `javascript:` or `data:` URL.
fn assert_no_handlers(name: &str, html: &str) {
    for tag in markdown::tests::tags(html) {
        for (attr, value) in &tag.attributes {
            assert!(
                !attr.starts_with("on") && attr != "style",
                "{name}: <{} {attr}>",
                tag.name
            );
            let value = value.to_ascii_lowercase();
            assert!(
                !value.contains("javascript:") && !value.starts_with("data:"),
                "{name}: <{} {attr}={value:?}>",
                tag.name
            );
        }
    }
}

/// The ids of every visible input and select.
fn field_ids(html: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for part in html.split('<').skip(1) {
        let tag = part.split('>').next().unwrap_or("");
        let field = tag.starts_with("input ") || tag.starts_with("select ");
        if field && !tag.contains("type=\"hidden\"") {
            let id = tag.split("id=\"").nth(1).and_then(|s| s.split('"').next());
            ids.push(id.unwrap_or("(no id)").to_owned());
        }
    }
    ids
}

#[test]
fn every_hostile_fixture_is_inert_inside_the_handoff_page() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile");
    for entry in std::fs::read_dir(&dir).expect("the hostile fixtures directory") {
        let path = entry.expect("a fixture").path();
        let body = std::fs::read_to_string(&path).expect("a fixture's text");
        let html = handoff(&viewer(), &handoff_page(&body, false)).into_string();
        let name = path.display();
        assert_eq!(
            html.matches("<script").count(),
            1,
            "{name}: a script element"
        );
        let ids = markdown::tests::tags(&html)
            .into_iter()
            .filter(|t| {
                t.attributes
                    .iter()
                    .any(|(a, v)| a == "id" && v == "content")
            })
            .count();
        assert_eq!(ids, 1, "{name}: id clobbering");
        assert_eq!(html.matches("<h1>").count(), 1, "{name}: a second h1");
        assert_no_handlers(&name.to_string(), &html);
        for absent in ["<img", "<iframe", "<svg", "<form action=\"/ns/x"] {
            assert!(!html.contains(absent), "{name}: {absent}");
        }
    }
}

#[test]
fn sign_in_says_what_to_do_for_every_reason_and_mode() {
    let reasons = [
        (SignIn::NoToken, "You are not signed in"),
        (SignIn::TokenRejected, "refused"),
        (SignIn::LinkUsed, "already used"),
        (SignIn::LinkMissing, "missing its secret"),
        (SignIn::SessionExpired, "session"),
    ];
    let modes = [
        (Mode::Laptop, "Run <code>handoff console</code> again"),
        (Mode::Proxy, "Sign in through your organisation's proxy"),
    ];
    for (why, reason) in reasons {
        for (mode, todo) in modes {
            let html = sign_in(mode, why).into_string();
            assert!(html.contains(reason), "{why:?}/{mode:?}: {reason}");
            assert!(html.contains(todo), "{why:?}/{mode:?}: {todo}");
        }
    }
}

#[test]
fn counts_cut_at_a_bound_say_at_least() {
    let cases = [
        (Count::Exact(3), "3"),
        (Count::AtLeast(500), "at least 500"),
    ];
    for (c, want) in cases {
        assert_eq!(common::count(c), want);
    }
}

#[test]
fn assets_are_the_files_served() {
    assert!(STYLESHEET.contains(":focus-visible"));
    assert!(SCRIPT.contains("EventSource") && SCRIPT.contains("\"changed\""));
}
