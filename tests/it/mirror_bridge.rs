//! The bridge reading from the PostgreSQL mirror, driven by the real MCP
//! Python SDK: `list_handoffs` via PostgreSQL returns the same entries in
//! the same order as via the apiserver, RBAC still decides (a caller
//! without `list` gets the same Forbidden), and `get_handoff{revision}`
//! serves history.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Bridge, agent_token, apply_agent_roles, call, env, err_text, ok};
use handoff::api::Handoff;
use handoff::api::HandoffSpec;
use handoff::controller::leader::LeaseConfig;
use handoff::controller::{self, ControllerMetrics, ControllerOptions};
use handoff::schedule::ttl::DefaultTtl;
use handoff::store::HandoffStore;
use handoff::time::SystemClock;
use handoff_testkit as testing;
use kube::api::Api;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Every page of a list, following cursors.
fn pages(bridge: &Bridge, token: &str, args: Value) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = args.clone();
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let result = bridge.drive(token, "refine", json!([call("list_handoffs", args)]));
        let page = ok(&result[0]).clone();
        all.extend(page["handoffs"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return all,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_via_postgres_match_the_apiserver_and_rbac_still_decides() {
    let env = env();
    let ns = env.namespace("mirror-bridge").await;
    let client = env.client().await;
    let url = tokio::task::spawn_blocking(testing::shared_postgres_url)
        .await
        .expect("postgres");
    apply_agent_roles(env);
    let groomer = agent_token(env, &ns, "groomer", Some("refine"), Some("handoff-groomer")).await;
    let stranger = agent_token(env, &ns, "stranger", Some("refine"), None).await;

    let shutdown = CancellationToken::new();
    let options = ControllerOptions {
        namespace: Some(ns.clone()),
        lease: LeaseConfig {
            name: "handoff-controller".into(),
            namespace: ns.clone(),
            identity: "a".into(),
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(250),
        },
        concurrency: 8,
        postgres_url: Some(url.clone()),
        resync_interval: Duration::from_secs(2),
        groom_interval: Duration::from_secs(60),
        ttl: Arc::new(DefaultTtl(None)),
        active_agent_selector: handoff::offers::decision::DEFAULT_ACTIVE_SELECTOR.into(),
    };
    let task = tokio::spawn(controller::run(
        client.clone(),
        options,
        Arc::new(SystemClock),
        ControllerMetrics::new(),
        shutdown.clone(),
    ));

    let store = HandoffStore::new(client.clone(), &ns);
    for i in 0..40 {
        let project = if i % 4 == 3 { "other" } else { "shop" };
        store
            .write(&HandoffSpec {
                handoff_key: format!("Key {i:02}"),
                project: project.into(),
                repo: Some(if i % 2 == 0 { "org/a" } else { "org/b" }.into()),
                kind: Some("issue".into()),
                body: format!("## State\nstep {i}\n{}", "detail ".repeat(i * 3)),
                created_by: Some("writer".into()),
            })
            .await
            .expect("write");
        if i % 7 == 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
    }
    store
        .write(&HandoffSpec {
            handoff_key: "Key 05".into(),
            project: "shop".into(),
            repo: Some("org/b".into()),
            kind: Some("issue".into()),
            body: "second revision".into(),
            created_by: Some("writer".into()),
        })
        .await
        .expect("rewrite");

    // Wait until the mirror holds every handoff at its counted revision.
    let db = handoff_testkit::connect_postgres(&url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    while handoff_testkit::mirror::converged(&api, &db, &ns).await != Some(40) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the mirror did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let via_api = Bridge::start(env, &ns);
    let via_pg = Bridge::start_with(env, &ns, &["--postgres-url", &url]);
    for args in [
        json!({"project": "shop", "limit": 7}),
        json!({"project": "shop", "repo": "org/b", "limit": 4, "include_body": true}),
        json!({"project": "other"}),
        json!({"project": "nobody"}),
    ] {
        let a = pages(&via_api, &groomer, args.clone());
        let p = pages(&via_pg, &groomer, args.clone());
        assert_eq!(a, p, "same entries in the same order for {args}");
        if args["project"] == "shop" && args.get("repo").is_none() {
            assert_eq!(a.len(), 30);
        }
    }

    // RBAC: no `list` right, the same Forbidden either way.
    let list = json!([call("list_handoffs", json!({"project": "shop"}))]);
    let refused_api = err_text(&via_api.drive(&stranger, "refine", list.clone())[0]);
    let refused_pg = err_text(&via_pg.drive(&stranger, "refine", list)[0]);
    assert_eq!(refused_api, refused_pg);
    assert!(refused_pg.contains("cannot list resource"), "{refused_pg}");
    let history = json!([call(
        "get_handoff",
        json!({"handoff_key": "Key 05", "revision": 1})
    )]);
    let refused = err_text(&via_pg.drive(&stranger, "refine", history.clone())[0]);
    assert!(refused.contains("cannot get resource"), "{refused}");

    // History: revision 1 from the mirror; without the mirror, a clear error.
    let got = via_pg.drive(&groomer, "refine", history.clone());
    let old = &ok(&got[0])["handoff"];
    assert_eq!(old["revision"], json!(1));
    assert!(
        old["body"]
            .as_str()
            .unwrap_or_default()
            .starts_with("## State\nstep 5")
    );
    let current = via_pg.drive(
        &groomer,
        "refine",
        json!([
            call(
                "get_handoff",
                json!({"handoff_key": "Key 05", "revision": 2})
            ),
            call(
                "get_handoff",
                json!({"handoff_key": "Key 05", "revision": 9})
            )
        ]),
    );
    assert_eq!(ok(&current[0])["handoff"]["body"], json!("second revision"));
    assert_eq!(ok(&current[1])["found"], json!(false));
    let no_mirror = err_text(&via_api.drive(&groomer, "refine", history)[0]);
    assert!(
        no_mirror.contains("needs the PostgreSQL mirror") && no_mirror.contains("--postgres-url"),
        "{no_mirror}"
    );

    shutdown.cancel();
    task.await.expect("task").expect("controller");
}
