//! Load and security through the HTTP bridge: 64 concurrent agents × 200
//! mixed calls with zero unexpected errors, every acknowledged write
//! readable afterwards, the bridge's memory bounded; and tokens never
//! appear in the bridge's logs, even at debug level.

mod common;

use std::path::Path;

use common::{agent_token, apply_agent_roles, env};
use handoff::api::Handoff;
use handoff::api::naming::name_for_key;
use handoff_testkit::BridgeProcess;
use handoff_testkit::bench::memory_mib;
use kube::api::Api;
use serde_json::json;

/// The bridge's memory must stay bounded under load: a generous ceiling
/// (it uses a few tens of MiB), not a speed threshold.
const BRIDGE_PEAK_CEILING_MIB: f64 = 256.0;

#[tokio::test]
async fn sixty_four_agents_times_two_hundred_calls() {
    let env = env();
    let ns = env.namespace("load").await;
    apply_agent_roles(env);
    let token = agent_token(env, &ns, "agent", Some("implement"), Some("handoff-writer")).await;
    let bridge = BridgeProcess::start_with_env(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        env.kubeconfig_path(),
        &ns,
        &[],
        &[("RUST_LOG", "warn")],
    )
    .unwrap_or_else(|e| panic!("bridge: {e:#}"));
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
    let bridge = BridgeProcess::start_with_env(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        env.kubeconfig_path(),
        &ns,
        &[],
        &[("RUST_LOG", "debug")],
    )
    .unwrap_or_else(|e| panic!("bridge: {e:#}"));
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
