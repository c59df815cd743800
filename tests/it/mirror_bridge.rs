//! The bridge reading from the PostgreSQL mirror, driven by the real MCP
//! Python SDK: `list_handoffs` via PostgreSQL returns the same entries in
//! the same order as via the apiserver, RBAC still decides (a caller
//! without `list` gets the same Forbidden, and a revoked RoleBinding stops
//! mirror reads within the access review cache's TTL), rows mirrored for
//! another namespace never reach a caller, and `get_handoff{revision}`
//! serves history.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Bridge, agent_token, apply_agent_roles, call, env, err_text, ok};
use handoff_bridge::auth::ACCESS_TTL;
use handoff_core::api::Handoff;
use handoff_core::time::{Clock, ManualClock, SystemClock};
use handoff_kube::store::HandoffStore;
use handoff_testkit as testing;
use handoff_testkit::controller::{InProcess, Running};
use handoff_testkit::spec::{Fields, shop, spec};
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

/// A controller of `namespace` mirroring it into PostgreSQL at `url`,
/// reading `clock`.
fn mirror_controller(
    client: &kube::Client,
    namespace: &str,
    url: &str,
    clock: Arc<dyn Clock>,
) -> Running {
    InProcess::new(namespace, "a", clock)
        .mirror(url)
        .options(|o| o.mirror_resync_interval = Duration::from_secs(2))
        .start(client.clone())
}

/// Waits until the mirror holds exactly the `expected` handoffs of `namespace`.
async fn await_mirror(client: &kube::Client, url: &str, namespace: &str, expected: usize) {
    let db = handoff_testkit::connect_postgres(url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let api: Api<Handoff> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    while handoff_testkit::mirror::converged(&api, &db, namespace).await != Some(expected) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the mirror of {namespace} did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

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

    // `updatedAt` is each write's time (the apiserver's, whole seconds):
    // the writes share a few seconds, so both listings order by those times
    // and break the ties by key alike. (The controller's clock dates
    // neither; it is moved on a second every 7 writes all the same.)
    let clock = Arc::new(ManualClock::new(Timestamp::now()));
    let controller = mirror_controller(&client, &ns, &url, clock.clone());

    let store = HandoffStore::new(client.clone(), &ns);
    for i in 0..40 {
        let project = if i % 4 == 3 { "other" } else { "shop" };
        store
            .write(
                &spec(format!("Key {i:02}"))
                    .project(project)
                    .repo(if i % 2 == 0 { "org/a" } else { "org/b" })
                    .kind("issue")
                    .body(format!("## State\nstep {i}\n{}", "detail ".repeat(i * 3)))
                    .by("writer"),
            )
            .await
            .expect("write");
        if i % 7 == 0 {
            clock.set(clock.now() + SignedDuration::from_secs(1));
        }
    }
    store
        .write(
            &spec("Key 05")
                .repo("org/b")
                .kind("issue")
                .body("second revision")
                .by("writer"),
        )
        .await
        .expect("rewrite");

    // Wait until the mirror holds every handoff at its counted revision.
    await_mirror(&client, &url, &ns, 40).await;

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

    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_role_binding_stops_mirror_lists_within_the_access_review_ttl() {
    let env = env();
    let ns = env.namespace("mirror-revoke").await;
    let client = env.client().await;
    let url = tokio::task::spawn_blocking(testing::shared_postgres_url)
        .await
        .expect("postgres");
    apply_agent_roles(env);
    let token = agent_token(env, &ns, "groomer", Some("refine"), Some("handoff-groomer")).await;
    let controller = mirror_controller(&client, &ns, &url, Arc::new(SystemClock));
    HandoffStore::new(client.clone(), &ns)
        .write(&shop("Key 1", "## State\nmirrored"))
        .await
        .expect("write");
    await_mirror(&client, &url, &ns, 1).await;

    // Allowed: served from PostgreSQL, and the access review's "yes" is cached.
    let via_pg = Bridge::start_with(env, &ns, &["--postgres-url", &url]);
    let list = json!([call("list_handoffs", json!({"project": "shop"}))]);
    let listed = via_pg.drive(&token, "refine", list.clone());
    assert_eq!(ok(&listed[0])["handoffs"][0]["handoff_key"], json!("Key 1"));

    // Revoked: refused with the apiserver's Forbidden once the cached answer
    // expires (ACCESS_TTL), never later; the margin covers RBAC propagation
    // in the apiserver and one round of the driver.
    Api::<RoleBinding>::namespaced(client.clone(), &ns)
        .delete("groomer-handoff-groomer", &DeleteParams::default())
        .await
        .expect("delete RoleBinding");
    let revoked = Instant::now();
    let deadline = ACCESS_TTL + Duration::from_secs(15);
    let refusal = loop {
        let answer = via_pg.drive(&token, "refine", list.clone());
        if answer[0]["is_error"] == json!(true) {
            break err_text(&answer[0]);
        }
        assert_eq!(
            ok(&answer[0])["handoffs"][0]["handoff_key"],
            json!("Key 1"),
            "until refused, the list is the mirror's"
        );
        assert!(
            revoked.elapsed() < deadline,
            "still served from PostgreSQL {:?} after the RoleBinding was deleted (access reviews are cached for {ACCESS_TTL:?})",
            revoked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        refusal.contains("is forbidden") && refusal.contains("cannot list resource \"handoffs\""),
        "{refusal}"
    );

    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_rows_of_another_namespace_never_reach_a_caller() {
    let env = env();
    let ns_a = env.namespace("mirror-ns-a").await;
    let ns_b = env.namespace("mirror-ns-b").await;
    let client = env.client().await;
    let url = tokio::task::spawn_blocking(testing::shared_postgres_url)
        .await
        .expect("postgres");
    apply_agent_roles(env);
    let token_a = agent_token(
        env,
        &ns_a,
        "groomer",
        Some("refine"),
        Some("handoff-groomer"),
    )
    .await;
    let token_b = agent_token(
        env,
        &ns_b,
        "groomer",
        Some("refine"),
        Some("handoff-groomer"),
    )
    .await;
    let controller_a = mirror_controller(&client, &ns_a, &url, Arc::new(SystemClock));
    let controller_b = mirror_controller(&client, &ns_b, &url, Arc::new(SystemClock));

    // The same project in both namespaces, and one key in both; B's are newer.
    HandoffStore::new(client.clone(), &ns_a)
        .write(&shop("Key shared", "## State\nnamespace A"))
        .await
        .expect("write A");
    let store_b = HandoffStore::new(client.clone(), &ns_b);
    for (key, body) in [
        ("Key shared", "## State\nnamespace B"),
        ("Key b1", "## State\nonly in B"),
        ("Key b2", "## State\nonly in B"),
    ] {
        store_b.write(&shop(key, body)).await.expect("write B");
    }
    await_mirror(&client, &url, &ns_a, 1).await;
    await_mirror(&client, &url, &ns_b, 3).await;

    let via_pg_a = Bridge::start_with(env, &ns_a, &["--postgres-url", &url]);
    let via_pg_b = Bridge::start_with(env, &ns_b, &["--postgres-url", &url]);
    let args = json!({"project": "shop", "include_body": true, "limit": 1});
    let listed_a = pages(&via_pg_a, &token_a, args.clone());
    let seen_a: Vec<(&Value, &Value)> = listed_a
        .iter()
        .map(|e| (&e["handoff_key"], &e["body"]))
        .collect();
    assert_eq!(
        seen_a,
        [(&json!("Key shared"), &json!("## State\nnamespace A"))],
        "namespace A lists its own row only"
    );
    // B's rows are in the mirror and servable — to B's callers.
    assert_eq!(pages(&via_pg_b, &token_b, args).len(), 3);

    let history = via_pg_a.drive(
        &token_a,
        "refine",
        json!([
            call(
                "get_handoff",
                json!({"handoff_key": "Key b1", "revision": 1})
            ),
            call(
                "get_handoff",
                json!({"handoff_key": "Key shared", "revision": 1})
            ),
        ]),
    );
    assert_eq!(
        ok(&history[0])["found"],
        json!(false),
        "B's history stays in B"
    );
    assert_eq!(
        ok(&history[1])["handoff"]["body"],
        json!("## State\nnamespace A")
    );

    controller_a.stop().await;
    controller_b.stop().await;
}
