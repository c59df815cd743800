//! Load and security through the HTTP bridge: 64 concurrent agents × 200
//! mixed calls with zero unexpected errors, every acknowledged write
//! readable afterwards, the bridge's memory bounded; and tokens never
//! appear in the bridge's logs, even at debug level.

mod common;

use std::path::Path;

use common::agents::writer_token;
use common::{agent_token, apply_agent_roles, env};
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::bench::memory_mib;
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::{BridgeProcess, TestEnv};
use kube::api::Api;
use serde_json::json;

/// The bridge's memory must stay bounded under load: a generous ceiling
/// (it uses a few tens of MiB), not a speed threshold.
const BRIDGE_PEAK_CEILING_MIB: f64 = 256.0;

/// A bridge serving `namespace` as admin, logging at `level` (RUST_LOG),
/// with `extra` flags.
fn bridge_logging(env: &TestEnv, namespace: &str, level: &str, extra: &[&str]) -> BridgeProcess {
    BridgeProcess::start_with_env(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        env.kubeconfig_path(),
        namespace,
        extra,
        &[("RUST_LOG", level)],
    )
    .unwrap_or_else(|e| panic!("bridge: {e:#}"))
}

#[tokio::test]
async fn sixty_four_agents_times_two_hundred_calls() {
    let env = env();
    let ns = env.namespace("load").await;
    apply_agent_roles(env);
    let token = writer_token(env, &ns, "agent").await;
    // The 64 agents share one token, so to the bridge they are one caller:
    // its fair share is raised to all of them (real agents have a token
    // each, and a share each).
    let bridge = bridge_logging(env, &ns, "warn", &["--max-in-flight-per-caller", "64"]);
    let results = common::drive(
        &["http", bridge.url(), &token, ""],
        json!([{"op": "load", "agents": 64, "calls": 200, "project": "load"}]),
        &[],
    );
    let report = &results[0];
    assert_eq!(
        report["error_count"],
        json!(0),
        "unexpected errors: {}",
        report["errors"]
    );
    let acknowledged = report["acknowledged"]
        .as_object()
        .expect("acknowledged writes");
    assert_eq!(
        acknowledged.len(),
        64 * 7,
        "every agent wrote each of its keys"
    );
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    for (key, body) in acknowledged {
        let stored = api
            .get(&name_for_key(key))
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(
            Some(stored.spec.body.as_str()),
            body.as_str(),
            "{key}: the last acknowledged write is what is stored"
        );
    }
    let peak = memory_mib(bridge.pid(), "VmHWM").expect("the bridge's /proc status");
    assert!(
        peak < BRIDGE_PEAK_CEILING_MIB,
        "bridge peak RSS {peak:.0} MiB"
    );
    eprintln!("bridge peak RSS after 12,800 calls: {peak:.0} MiB");
}

#[tokio::test]
async fn tokens_never_appear_in_the_logs() {
    let env = env();
    let ns = env.namespace("no-token-logs").await;
    apply_agent_roles(env);
    let token = agent_token(env, &ns, "agent", Some("refine"), Some("handoff-writer")).await;
    let bridge = bridge_logging(env, &ns, "debug", &[]);
    let plan = json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "write_handoff", "args": {"handoff_key": "k", "project": "p", "body": "b"}},
        {"op": "call", "tool": "delete_handoff", "args": {"handoff_key": "k"}},
    ]);
    let results = common::drive(&["http", bridge.url(), &token, ""], plan, &[]);
    assert_eq!(results[1]["structured"]["outcome"], json!("created"));
    assert_eq!(
        results[2]["is_error"],
        json!(true),
        "a writer-bound token cannot delete"
    );
    let bad = common::drive(
        &[
            "http",
            bridge.url(),
            "not-a-real-token-but-secret-looking",
            "",
        ],
        json!([{"op": "raw_post", "body": "{}"}]),
        &[],
    );
    assert_eq!(bad[0]["status"], json!(401));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let log = bridge.log();
    assert!(
        log.contains("tool call"),
        "the debug log was captured: {} bytes",
        log.len()
    );
    assert!(
        !log.contains(&token),
        "the bearer token appeared in the bridge's logs"
    );
    assert!(
        !log.contains(&token[..24]),
        "a prefix of the bearer token appeared in the logs"
    );
    assert!(
        !log.contains("not-a-real-token-but-secret-looking"),
        "a rejected token appeared in the logs"
    );
}

/// The bridge's peak memory while listing a large project without the
/// mirror: one apiserver page and one result page are in memory, never the
/// project (40 MB of bodies here). Measured on the process, not timed.
const LIST_PEAK_CEILING_MIB: f64 = 96.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_a_large_project_without_the_mirror_keeps_the_bridge_small() {
    use futures::StreamExt;
    use handoff_testkit::rpc::McpHttp;

    const HANDOFFS: usize = 5_000;
    let env = env();
    let ns = env.namespace("big-project").await;
    apply_agent_roles(env);
    let token = writer_token(env, &ns, "agent").await;
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let body = "b".repeat(8 * 1024);
    let created = futures::stream::iter(0..HANDOFFS)
        .map(|i| {
            let api = api.clone();
            let key = format!("big-{i:05}");
            let handoff = Handoff::new(
                &name_for_key(&key),
                spec(key).project("big").body(body.clone()),
            );
            async move { api.create(&Default::default(), &handoff).await }
        })
        .buffer_unordered(16)
        .filter(|r| std::future::ready(r.is_ok()))
        .count()
        .await;
    assert_eq!(created, HANDOFFS);

    let bridge = bridge_logging(env, &ns, "warn", &[]);
    let url = bridge.url().to_owned();
    let pages = tokio::task::spawn_blocking(move || {
        let mut client = McpHttp::connect(&url, &token, "implement").expect("connect");
        let first = client
            .call(
                "list_handoffs",
                json!({"project": "big", "limit": 200, "include_body": true}),
            )
            .expect("first page");
        let cursor = first["next_cursor"]
            .as_str()
            .expect("a next page")
            .to_owned();
        let second = client
            .call(
                "list_handoffs",
                json!({"project": "big", "limit": 200, "cursor": cursor}),
            )
            .expect("second page");
        (first, second)
    })
    .await
    .expect("join");
    let keys = |page: &serde_json::Value| -> Vec<String> {
        page["handoffs"]
            .as_array()
            .expect("handoffs")
            .iter()
            .map(|h| h["handoff_key"].as_str().expect("key").to_owned())
            .collect()
    };
    let (first, second) = (keys(&pages.0), keys(&pages.1));
    assert_eq!((first.len(), second.len()), (200, 200));
    assert!(
        first.iter().all(|k| !second.contains(k)),
        "pages do not overlap"
    );
    let peak = memory_mib(bridge.pid(), "VmHWM").expect("the bridge's /proc status");
    eprintln!("bridge peak RSS listing a {HANDOFFS}-handoff project: {peak:.0} MiB");
    assert!(
        peak < LIST_PEAK_CEILING_MIB,
        "bridge peak RSS {peak:.0} MiB listing {HANDOFFS} handoffs of 8 KiB"
    );
}
