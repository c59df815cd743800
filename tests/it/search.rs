//! `search_handoffs`, driven by the real MCP Python SDK: through the
//! PostgreSQL mirror (full-text search) and through the apiserver (a
//! bounded scan) — ranking, identifiers, non-English words, paging, and
//! RBAC (a caller without `list` is refused; another namespace's rows never
//! come back).

use crate::common;
use crate::revisions::Counter;

use std::time::Duration;

use common::agents::writer_token;
use common::{Bridge, agent_token, apply_agent_roles, call, env, err_text, ok};
use handoff_core::api::Handoff;
use handoff_kube::store::HandoffStore;
use handoff_testkit as testing;
use handoff_testkit::spec::{Fields, shop};
use handoff_testkit::wait::eventually;
use kube::api::Api;
use serde_json::{Value, json};

/// Waits until the mirror holds exactly the `expected` handoffs of `namespace`.
async fn mirrored(client: &kube::Client, url: &str, namespace: &str, expected: usize) {
    let db = testing::connect_postgres(url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let api: Api<Handoff> = Api::namespaced(client.clone(), namespace);
    eventually(
        &format!("the mirror of {namespace}"),
        Duration::from_secs(60),
        || async {
            (testing::mirror::converged(&api, &db, namespace).await == Some(expected)).then_some(())
        },
    )
    .await;
}

/// The keys of a search answer, in order.
fn keys(result: &Value) -> Vec<String> {
    ok(result)["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| m["handoff_key"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn search(query: &str) -> Value {
    call(
        "search_handoffs",
        json!({"project": "shop", "query": query}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_ranks_finds_identifiers_and_foreign_words_and_keeps_to_the_caller() {
    let env = env();
    let ns = env.namespace("search").await;
    let elsewhere = env.namespace("search-other").await;
    let client = env.client().await;
    let url = tokio::task::spawn_blocking(testing::shared_postgres_url)
        .await
        .expect("postgres");
    apply_agent_roles(env);
    let reader = writer_token(env, &ns, "reader").await;
    let stranger = agent_token(env, &ns, "stranger", Some("implement"), None).await;
    let here = Counter::start(&client, &ns, Some(&url));
    let there = Counter::start(&client, &elsewhere, Some(&url));

    let store = HandoffStore::new(client.clone(), &ns);
    for (key, project, body) in [
        (
            "twice",
            "shop",
            "## State\nThe refund job failed; the refund retries are off.",
        ),
        ("once", "shop", "## State\nOne refund is pending review."),
        (
            "ids",
            "shop",
            "## State\nFlaky: payments_test.go times out under load.",
        ),
        (
            "de",
            "shop",
            "## Stand\nDer Zahlungsdienst lehnt jede Überweisung ab.",
        ),
        ("quiet", "shop", "## State\nNothing about money here."),
        ("other-project", "bank", "refund refund refund"),
    ] {
        store
            .write(&shop(key, body).project(project))
            .await
            .expect("write");
    }
    HandoffStore::new(client.clone(), &elsewhere)
        .write(&shop("foreign", "refund refund refund refund"))
        .await
        .expect("write elsewhere");
    mirrored(&client, &url, &ns, 6).await;
    mirrored(&client, &url, &elsewhere, 1).await;

    let via_pg = Bridge::start_with(env, &ns, &["--postgres-url", &url]);
    let via_api = Bridge::start(env, &ns);
    for (bridge, source) in [(&via_pg, "mirror"), (&via_api, "apiserver")] {
        let got = bridge.drive(
            &reader,
            "",
            json!([
                search("refund"),
                search("payments_test.go"),
                search("Zahlungsdienst"),
                search("überweisung"),
                search("money -nothing"),
            ]),
        );
        assert_eq!(keys(&got[0]), ["twice", "once"], "{source}: {got:?}");
        let first = &ok(&got[0])["matches"][0];
        assert_eq!(first["matched_words"], json!(["refund"]), "{source}");
        assert!(
            first["rank"].as_f64() > ok(&got[0])["matches"][1]["rank"].as_f64(),
            "{source}: two mentions rank above one"
        );
        assert_eq!(ok(&got[0])["source"], json!(source));
        assert_eq!(keys(&got[1]), ["ids"], "{source}");
        assert_eq!(keys(&got[2]), ["de"], "{source}");
        assert_eq!(keys(&got[3]), ["de"], "{source}");
        assert_eq!(keys(&got[4]), Vec::<String>::new(), "{source}: excluded");

        // Pages: one match each, then no cursor.
        let page = |cursor: Option<&str>| {
            let mut args = json!({"project": "shop", "query": "refund", "limit": 1});
            if let Some(c) = cursor {
                args["cursor"] = json!(c);
            }
            bridge.drive(&reader, "", json!([call("search_handoffs", args)]))
        };
        let one = page(None);
        assert_eq!(keys(&one[0]), ["twice"], "{source}");
        let cursor = ok(&one[0])["next_cursor"]
            .as_str()
            .expect("cursor")
            .to_owned();
        let two = page(Some(&cursor));
        assert_eq!(keys(&two[0]), ["once"], "{source}");
        assert_eq!(ok(&two[0]).get("next_cursor"), None, "{source}");

        // RBAC: no `list` right, refused by the apiserver's words.
        let refused = err_text(&bridge.drive(&stranger, "", json!([search("refund")]))[0]);
        assert!(
            refused.contains("cannot list resource \"handoffs\""),
            "{source}: {refused}"
        );
    }
    let scanned = via_api.drive(&reader, "", json!([search("refund")]));
    assert_eq!(ok(&scanned[0])["scanned"], json!(5), "the project's five");
    let bad = via_pg.drive(
        &reader,
        "",
        json!([
            call(
                "search_handoffs",
                json!({"project": "shop", "query": "-only or"})
            ),
            call(
                "search_handoffs",
                json!({"project": "shop", "query": "x", "cursor": "nope"})
            ),
        ]),
    );
    assert!(err_text(&bad[0]).starts_with("invalid `query`"), "{bad:?}");
    assert!(err_text(&bad[1]).starts_with("invalid `cursor`"), "{bad:?}");
    here.stop().await;
    there.stop().await;
}

#[tokio::test]
async fn a_scan_without_the_mirror_stops_at_its_cap_and_says_so() {
    let env = env();
    let ns = env.namespace("search-cap").await;
    let store = HandoffStore::new(env.client().await, &ns);
    for i in 0..5 {
        store
            .write(&shop(&format!("k{i}"), "refund"))
            .await
            .expect("write");
    }
    store
        .write(&shop("elsewhere", "refund").project("bank"))
        .await
        .expect("write");
    let query = handoff_kube::store::ListQuery {
        project: "shop".into(),
        repo: None,
        kind: None,
    };
    for (cap, expected) in [(3, (3, true)), (5, (5, false)), (10, (5, false))] {
        let mut visited = 0;
        let got = store
            .scan(&query, cap, |page| visited += page.len())
            .await
            .expect("scan");
        assert_eq!(got, expected, "cap {cap}");
        assert_eq!(visited, expected.0, "cap {cap}: handed over");
    }
}

/// Bad input through a bridge with the PostgreSQL mirror: every string
/// argument of every tool (from the tools' schemas) with a NUL or ESC is
/// refused naming that argument, a NUL in a search query is refused as
/// `query`, queries PostgreSQL's own `to_tsquery` would call syntax errors
/// are answered, and no answer carries PostgreSQL's text. And a NUL that
/// does reach PostgreSQL (the mirror's search, called without the bridge's
/// checks) is blamed on the argument, not on PostgreSQL being unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_through_the_mirror_is_refused_as_bad_input() {
    use common::bad_args::{assert_no_postgres_text, hidden_character_calls};
    use handoff_mirror::{Blame, Mirror};

    let env = env();
    let ns = env.namespace("search-bad-input").await;
    let url = tokio::task::spawn_blocking(testing::shared_postgres_url)
        .await
        .expect("postgres");

    // The database's own refusal, classified (this also migrates the schema
    // the bridge reads).
    let mirror = Mirror::new(&url, true).expect("mirror");
    let refused = mirror
        .search(&ns, "shop", None, "refund\u{0}", 0, 10)
        .await
        .expect_err("PostgreSQL refuses a NUL in text");
    assert!(
        matches!(refused.blame(), Blame::Argument(_)),
        "a NUL is the argument's fault, not an outage: {refused} is blamed {:?}",
        refused.blame()
    );
    assert!(!refused.is_unavailability(), "{refused}");
    let odd = [
        "!(&|",
        "\"unclosed",
        "a & | b",
        "<-> :*",
        "'; DROP TABLE handoffs; --",
    ];
    for query in odd {
        mirror
            .search(&ns, "shop", None, query, 0, 10)
            .await
            .unwrap_or_else(|e| panic!("websearch_to_tsquery takes {query:?}: {e}"));
    }

    apply_agent_roles(env);
    let groomer = agent_token(env, &ns, "groomer", Some("refine"), Some("handoff-groomer")).await;
    let bridge = Bridge::start_with(env, &ns, &["--postgres-url", &url]);
    let cases = hidden_character_calls();
    let mut plan: Vec<Value> = cases.iter().map(|(_, step, _)| step.clone()).collect();
    plan.push(search("refund\u{0}"));
    plan.extend(odd.iter().map(|q| search(q)));
    let results = bridge.drive(&groomer, "refine", Value::Array(plan));
    assert_eq!(results.len(), cases.len() + 1 + odd.len(), "{results:?}");
    for ((case, _, field), result) in cases.iter().zip(&results) {
        let text = err_text(result);
        assert!(
            text.starts_with(&format!("invalid `{field}`")),
            "{case}: the refusal does not name `{field}` first: {text}"
        );
        assert_no_postgres_text(case, &result.to_string());
    }
    let nul = &results[cases.len()];
    let text = err_text(nul);
    assert!(
        text.starts_with("invalid `query`") && text.contains("U+0000 (NUL)"),
        "a NUL in the query: {text}"
    );
    assert!(
        !text.contains("unavailable"),
        "reported as an outage: {text}"
    );
    assert_no_postgres_text("a NUL in the query", &nul.to_string());
    for (query, result) in odd.iter().zip(&results[cases.len() + 1..]) {
        assert_eq!(ok(result)["source"], json!("mirror"), "{query:?}: {result}");
        assert_no_postgres_text(query, &result.to_string());
    }
}
