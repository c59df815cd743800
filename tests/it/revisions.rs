//! Optimistic concurrency (`write_handoff{expected_revision}` and
//! [`HandoffStore::write_if_at`]): of sixteen writers expecting the same
//! revision exactly one wins and the others get a conflict; a stale
//! expectation writes nothing. With a controller counting revisions, against
//! the real kube-apiserver, through the store API and the real MCP client.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Bridge, agent_token, apply_agent_roles, call, env, err_text, ok};
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::handoff::outcome::WriteOutcome;
use handoff_core::time::SystemClock;
use handoff_kube::store::{HandoffStore, RevisionConflict, WriteError};
use handoff_testkit::controller::{InProcess, Running};
use handoff_testkit::spec::counted;
use handoff_testkit::spec::shop;
use handoff_testkit::wait::eventually;
use kube::api::Api;
use serde_json::{Value, json};

/// The controller other suites count revisions with.
pub(crate) struct Counter;

impl Counter {
    /// Starts a controller for `namespace` (its own Lease there), mirroring
    /// into `postgres_url` when given.
    pub(crate) fn start(
        client: &kube::Client,
        namespace: &str,
        postgres_url: Option<&str>,
    ) -> Running {
        let controller = InProcess::new(namespace, "a", Arc::new(SystemClock))
            .options(|o| o.mirror_resync_interval = Duration::from_secs(2));
        match postgres_url {
            Some(url) => controller.mirror(url),
            None => controller,
        }
        .start(client.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_sixteen_store_writers_expecting_a_revision_wins() {
    let env = env();
    let ns = env.namespace("occ-store").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let counter = Counter::start(&client, &ns, None);
    let store = HandoffStore::new(client.clone(), &ns);
    store
        .write(&shop("shared", "v1"))
        .await
        .expect("first write");
    counted(&api, "shared", 1).await;

    let writers = (0..16).map(|i| {
        let store = store.clone();
        async move {
            let body = format!("writer {i}");
            (
                body.clone(),
                store.write_if_at(&shop("shared", &body), 1).await,
            )
        }
    });
    let results = futures::future::join_all(writers).await;
    let mut winners = Vec::new();
    let mut conflicts = 0;
    for (body, result) in results {
        match result {
            Ok((WriteOutcome::Updated, stored)) => {
                assert_eq!(stored.spec.body, body);
                winners.push(body);
            }
            Err(WriteError::Conflict(c)) => {
                assert!(
                    matches!(
                        c,
                        RevisionConflict::Uncounted { expected: 1, .. }
                            | RevisionConflict::Moved {
                                expected: 1,
                                current: 2,
                                ..
                            }
                    ),
                    "{c:?}"
                );
                conflicts += 1;
            }
            other => panic!("{body}: {other:?}"),
        }
    }
    assert_eq!((winners.len(), conflicts), (1, 15), "{winners:?}");
    let stored = counted(&api, "shared", 2).await;
    assert_eq!(stored.spec.body, winners[0], "the winner's body is stored");

    // A stale expectation (revision 1, now 2) writes nothing.
    let before = stored.metadata.resource_version.clone();
    let stale = store
        .write_if_at(&shop("shared", "stale"), 1)
        .await
        .expect_err("stale");
    assert_eq!(
        stale.to_string(),
        format!(
            "conflict on `expected_revision`: you expected revision 1 of `shared`, but it is at \
             revision 2, written by writer at {}; nothing was written. Call get_handoff, merge your \
             changes into that revision, and write again with expected_revision 2",
            stored
                .status
                .as_ref()
                .and_then(|s| s.updated_at.as_ref())
                .expect("updatedAt")
                .0
        )
    );
    let after = api.get(&name_for_key("shared")).await.expect("get");
    assert_eq!(after.metadata.resource_version, before, "nothing written");
    assert_eq!(after.spec.body, winners[0]);

    // At the current revision the write goes ahead; on a missing key it cannot.
    let (outcome, _) = store
        .write_if_at(&shop("shared", "v3"), 2)
        .await
        .expect("current");
    assert_eq!(outcome, WriteOutcome::Updated);
    let missing = store
        .write_if_at(&shop("nobody", "x"), 1)
        .await
        .expect_err("missing")
        .to_string();
    assert!(missing.contains("no handoff exists for it"), "{missing}");
    assert!(
        api.get_opt(&name_for_key("nobody"))
            .await
            .expect("get")
            .is_none()
    );
    counter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_sixteen_mcp_writers_expecting_a_revision_wins() {
    let env = env();
    let ns = env.namespace("occ-mcp").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    apply_agent_roles(env);
    let counter = Counter::start(&client, &ns, None);
    let bridge = Bridge::start(env, &ns);
    let token = agent_token(env, &ns, "agent", Some("implement"), Some("handoff-writer")).await;
    let write = |body: &str, expected: Option<i64>| {
        let mut args = json!({"handoff_key": "contended", "project": "shop", "body": body});
        if let Some(expected) = expected {
            args["expected_revision"] = json!(expected);
        }
        args
    };
    ok(&bridge.drive(
        &token,
        "",
        json!([call("write_handoff", write("v1", None))]),
    )[0]);
    counted(&api, "contended", 1).await;
    let got = bridge.drive(
        &token,
        "",
        json!([call("get_handoff", json!({"handoff_key": "contended"}))]),
    );
    assert_eq!(ok(&got[0])["handoff"]["revision"], json!(1));

    let args: Vec<Value> = (0..16)
        .map(|i| write(&format!("writer {i}"), Some(1)))
        .collect();
    let answers = bridge.concurrent(&token, "write_handoff", args);
    let winners: Vec<&Value> = answers
        .iter()
        .filter(|a| a["is_error"] == json!(false))
        .collect();
    let conflicts = answers
        .iter()
        .filter(|a| {
            a["is_error"] == json!(true)
                && err_text(a).starts_with(
                    "conflict on `expected_revision`: you expected revision 1 of `contended`",
                )
        })
        .count();
    assert_eq!((winners.len(), conflicts), (1, 15), "{answers:?}");
    let winner = winners[0]["structured"]["handoff"]["body"].clone();
    let stored = counted(&api, "contended", 2).await;
    assert_eq!(
        json!(stored.spec.body),
        winner,
        "the winner's body is stored"
    );

    // Another agent's write made revision 1 stale: refused, nothing written.
    let before = stored.metadata.resource_version.clone();
    let stale = bridge.drive(
        &token,
        "",
        json!([call("write_handoff", write("stale", Some(1)))]),
    );
    let message = err_text(&stale[0]);
    assert!(
        message.contains("but it is at revision 2, written by system:serviceaccount:"),
        "{message}"
    );
    let after = api.get(&name_for_key("contended")).await.expect("get");
    assert_eq!(after.metadata.resource_version, before, "nothing written");

    // Refused by name: a revision below 1; without the argument, latest wins.
    let refused = bridge.drive(
        &token,
        "",
        json!([
            call("write_handoff", write("zero", Some(0))),
            call("write_handoff", write("latest", None)),
        ]),
    );
    let zero = err_text(&refused[0]);
    assert!(
        zero.contains("expected_revision") && zero.contains("1 or more") && zero.contains("got 0"),
        "{zero}"
    );
    assert_eq!(ok(&refused[1])["outcome"], json!("updated"));
    counter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_revisions_listed_paged_and_diffed_from_the_mirror() {
    let env = env();
    let ns = env.namespace("history-tools").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let url = tokio::task::spawn_blocking(handoff_testkit::shared_postgres_url)
        .await
        .expect("postgres");
    apply_agent_roles(env);
    let reader = agent_token(
        env,
        &ns,
        "reader",
        Some("implement"),
        Some("handoff-writer"),
    )
    .await;
    let stranger = agent_token(env, &ns, "stranger", Some("implement"), None).await;
    let counter = Counter::start(&client, &ns, Some(&url));
    let store = HandoffStore::new(client.clone(), &ns);
    let body =
        |n: usize| -> String { (1..=n).map(|i| format!("- step {i}\n")).collect::<String>() };
    for n in 1..=5 {
        store
            .write(&shop("five", &format!("## Done\n{}", body(n))))
            .await
            .expect("write");
        counted(&api, "five", i64::try_from(n).expect("small")).await;
    }
    let via_pg = Bridge::start_with(env, &ns, &["--postgres-url", &url]);
    let list = |cursor: Option<&str>| {
        let mut args = json!({"handoff_key": "five", "limit": 2});
        if let Some(c) = cursor {
            args["cursor"] = json!(c);
        }
        call("list_revisions", args)
    };
    // The history is written after the count: wait for all five.
    let all = eventually(
        "five revisions in the history",
        Duration::from_secs(60),
        || async {
            let got = via_pg.drive(
                &reader,
                "",
                json!([call("list_revisions", json!({"handoff_key": "five"}))]),
            );
            let revisions = ok(&got[0])["revisions"].as_array().cloned()?;
            (revisions.len() == 5).then_some(revisions)
        },
    )
    .await;
    let numbers: Vec<i64> = all.iter().filter_map(|r| r["revision"].as_i64()).collect();
    assert_eq!(numbers, [5, 4, 3, 2, 1]);
    for r in &all {
        let n = usize::try_from(r["revision"].as_i64().expect("n")).expect("n");
        assert_eq!(
            r["body_bytes"],
            json!(format!("## Done\n{}", body(n)).len())
        );
        assert_eq!(r["created_by"], json!("writer"));
        assert!(
            r["updated_at"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{r}"
        );
    }
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let got = via_pg.drive(&reader, "", json!([list(cursor.as_deref())]));
        let page = ok(&got[0]).clone();
        pages.push(
            page["revisions"]
                .as_array()
                .expect("revisions")
                .iter()
                .filter_map(|r| r["revision"].as_i64())
                .collect::<Vec<_>>(),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, [vec![5, 4], vec![3, 2], vec![1]]);

    let diffs = via_pg.drive(
        &reader,
        "",
        json!([
            call(
                "diff_handoff",
                json!({"handoff_key": "five", "from": 1, "to": 5})
            ),
            call(
                "diff_handoff",
                json!({"handoff_key": "five", "from": 4, "to": 9})
            ),
            call(
                "diff_handoff",
                json!({"handoff_key": "five", "from": 0, "to": 2})
            ),
        ]),
    );
    let diff = ok(&diffs[0]);
    assert_eq!(
        diff["diff"],
        json!(
            "--- revision 1\n+++ revision 5\n@@ -1,2 +1,6 @@\n ## Done\n - step 1\n\
             +- step 2\n+- step 3\n+- step 4\n+- step 5\n"
        )
    );
    assert_eq!(diff["truncated"], json!(false));
    assert_eq!(
        err_text(&diffs[1]),
        "invalid `to`: a revision the history holds (see list_revisions); `five` has no revision 9 in the history"
    );
    assert!(
        err_text(&diffs[2]).starts_with("invalid `from`"),
        "{diffs:?}"
    );

    // Gated like get_handoff{revision}; without the mirror, how to turn it on.
    for tool in [
        call("list_revisions", json!({"handoff_key": "five"})),
        call(
            "diff_handoff",
            json!({"handoff_key": "five", "from": 1, "to": 2}),
        ),
    ] {
        let refused = err_text(&via_pg.drive(&stranger, "", json!([tool.clone()]))[0]);
        assert!(
            refused.contains("cannot get resource \"handoffs\""),
            "{refused}"
        );
        let via_api = Bridge::start(env, &ns);
        let no_mirror = err_text(&via_api.drive(&reader, "", json!([tool]))[0]);
        assert!(
            no_mirror.contains(
                "without it: start the bridge with --postgres-url (or HANDOFF_POSTGRES_URL"
            ),
            "{no_mirror}"
        );
    }
    counter.stop().await;
}
