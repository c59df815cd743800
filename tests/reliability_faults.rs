//! Faults under the bridge: kube-apiserver restarted (etcd kept) and etcd
//! restarted while agents write. Calls during an outage get a retriable
//! error (never a hang past the bridge's bounded timeout); afterwards the
//! same bridge process serves again without a restart; nothing acknowledged
//! is lost. This suite starts a control plane of its own (it restarts it).

mod common;

use std::path::Path;

use handoff::api::Handoff;
use handoff::api::naming::name_for_key;
use handoff::testing::{
    Assets, BridgeProcess, ControlPlane, PlaneOptions, StaticToken, install_crds,
};
use kube::api::Api;
use serde_json::{Value, json};

const TOKEN: &str = "fault-agent-token-0123456789";

fn writes(keys: impl Iterator<Item = String>) -> Value {
    Value::Array(
        keys.map(|k| {
            json!({"op": "call", "tool": "write_handoff",
                   "args": {"handoff_key": k, "project": "faults", "body": format!("body of {k}")}})
        })
        .collect(),
    )
}

/// A retriable answer: a tool error saying so, or an HTTP 503 from the bridge.
fn is_retriable(result: &Value) -> bool {
    let text = result["text"].as_str().unwrap_or_default();
    let exception = result["exception"].as_str().unwrap_or_default();
    (result["is_error"] == json!(true) && text.contains("retriable")) || exception.contains("503")
}

async fn assert_all_stored(plane: &ControlPlane, keys: &[String]) {
    let api: Api<Handoff> = Api::namespaced(plane.client().await.expect("client"), "default");
    for key in keys {
        let stored = api
            .get(&name_for_key(key))
            .await
            .unwrap_or_else(|e| panic!("{key} lost: {e}"));
        assert_eq!(stored.spec.body, format!("body of {key}"));
    }
}

#[tokio::test]
async fn apiserver_and_etcd_restarts_lose_nothing_acknowledged() {
    let tokens = vec![StaticToken {
        token: TOKEN.into(),
        user: "agent".into(),
        groups: vec!["system:masters".into()],
    }];
    let options = PlaneOptions {
        static_tokens: tokens,
        ..Default::default()
    };
    let mut plane = ControlPlane::start_with(Assets::locate().expect("assets"), options)
        .await
        .unwrap_or_else(|e| panic!("control plane: {e:#}"));
    install_crds(&plane.client().await.expect("client"))
        .await
        .expect("crds");
    let bridge = BridgeProcess::start(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        plane.kubeconfig_path(),
        "default",
        &[],
    )
    .unwrap_or_else(|e| panic!("bridge: {e:#}"));
    let drive = |plan: Value| common::drive(&["http", bridge.url(), TOKEN, "implement"], plan, &[]);
    let mut acknowledged = Vec::new();

    let batch = |from: usize| {
        (from..from + 10)
            .map(|i| format!("fault-{i}"))
            .collect::<Vec<_>>()
    };
    for r in drive(writes(batch(0).into_iter())) {
        assert_eq!(r["structured"]["outcome"], json!("created"), "{r}");
    }
    acknowledged.extend(batch(0));

    plane.stop_apiserver();
    let during = drive(json!([
        {"op": "call", "tool": "write_handoff", "args": {"handoff_key": "during-outage", "project": "faults", "body": "x"}},
        {"op": "call", "tool": "get_handoff", "args": {"handoff_key": "fault-0"}},
    ]));
    for r in &during {
        assert!(
            is_retriable(r),
            "an outage must give a retriable error: {r}"
        );
        assert!(
            !r["text"]
                .as_str()
                .unwrap_or_default()
                .contains("did not answer within"),
            "refused connections fail fast: {r}"
        );
    }
    plane
        .start_apiserver()
        .await
        .unwrap_or_else(|e| panic!("apiserver restart: {e:#}"));
    for r in drive(writes(batch(10).into_iter())) {
        assert_eq!(
            r["structured"]["outcome"],
            json!("created"),
            "the same bridge serves again: {r}"
        );
    }
    acknowledged.extend(batch(10));
    assert_all_stored(&plane, &acknowledged).await;

    plane.stop_etcd();
    let during = drive(writes(std::iter::once("during-etcd-outage".to_owned())));
    assert!(
        is_retriable(&during[0]),
        "etcd down must give a retriable error: {}",
        during[0]
    );
    plane
        .start_etcd()
        .await
        .unwrap_or_else(|e| panic!("etcd restart: {e:#}"));
    for r in drive(writes(batch(20).into_iter())) {
        assert_eq!(r["structured"]["outcome"], json!("created"), "{r}");
    }
    acknowledged.extend(batch(20));
    assert_all_stored(&plane, &acknowledged).await;
}
