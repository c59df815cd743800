//! Quotas per team: two teams onboarded with `config/tenant`, team A's
//! ResourceQuota patched down to a handful of objects. The quota
//! controller of the node's controller-manager counts them; once team A is
//! full, the next create is refused by the apiserver's ResourceQuota
//! admission whoever writes: through the bridge the agent reads which
//! quota, which resource, the numbers and what to do (never the
//! apiserver's `exceeded quota` text), with kubectl the apiserver's own
//! refusal. Nothing is half-written, an update of an existing key is not
//! counted, and team B keeps writing.

use std::time::Duration;

use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer};
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use crate::harness::{UNDISTURBED, e2e, kubectl, kubectl_stdin, must, with_cluster};
use crate::install::{installed, pods_of};
use crate::writes::handoff;
use handoff_testkit::http::{exchange, mcp_post, tool_call};
use handoff_testkit::wait::eventually;

/// The bridge's Host, as its `--allowed-host` admits (config/bridge).
const BRIDGE_HOST: &str = "handoff-bridge.handoff-system.svc:8080";

/// The quota config/tenant ships.
const QUOTA: &str = "handoff-quota";

/// Team A's sizes: handoffs, offers.
const A_HANDOFFS: u32 = 3;
const A_OFFERS: u32 = 1;

/// The patch of a team overlay that sizes its quota down to `handoffs`
/// and `offers` (as config/tenant/kustomization.yaml shows).
fn resize(handoffs: u32, offers: u32) -> String {
    format!(
        "patches:
  - target: {{kind: ResourceQuota, name: {QUOTA}}}
    patch: |-
      - op: replace
        path: /spec/hard/count~1handoffs.handoff.dev
        value: \"{handoffs}\"
      - op: replace
        path: /spec/hard/count~1handoffoffers.handoff.dev
        value: \"{offers}\"
"
    )
}

/// Onboards team `namespace` with an overlay of `config/tenant` carrying
/// `patch` (a `patches:` entry, or none), as an operator would, and
/// waits until its quota is counted ([`counted`]).
async fn onboard(namespace: &str, patch: &str, handoffs: u32) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::os::unix::fs::symlink(root.join("config"), dir.path().join("config"))
        .unwrap_or_else(|e| panic!("symlink config/: {e}"));
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             namespace: {namespace}\nresources:\n  - config/tenant\n{patch}"
        ),
    )
    .unwrap_or_else(|e| panic!("the overlay: {e}"));
    let shown = dir.path().display().to_string();
    let objects = must(
        kubectl(&[
            "kustomize",
            "--load-restrictor",
            "LoadRestrictionsNone",
            &shown,
        ]),
        &format!("kustomize the overlay of {namespace}"),
    );
    let apply = || {
        must(
            kubectl_stdin(&["apply", "--server-side", "-f", "-"], &objects),
            &format!("onboarding {namespace}"),
        );
    };
    apply();
    counted(namespace, handoffs, apply).await;
}

/// Waits until the quota controller has counted `namespace`'s handoffs
/// against `hard`: before that the admission refuses creates as "status
/// unknown". A quota created within moments of the CRDs (this cluster's
/// installation) is first synced before the controller evaluates the new
/// resources, and synced again only at its full resync (5 minutes) or
/// when the quota changes: each round that finds it uncounted re-creates
/// it (`reapply`), as docs/operate.md advises.
async fn counted(namespace: &str, hard: u32, reapply: impl Fn()) {
    let quotas: Api<ResourceQuota> = Api::namespaced(e2e().env.client().await, namespace);
    let resource = "count/handoffs.handoff.dev";
    let mut seen = String::new();
    for _round in 0..6 {
        let state = eventually(
            &format!("the quota controller to sync {namespace}'s {QUOTA}"),
            Duration::from_secs(60),
            || async {
                let quota = quotas.get(QUOTA).await.map_err(|e| e.to_string())?;
                let status = quota.status.unwrap_or_default();
                let limit = status.hard.as_ref().and_then(|h| h.get(resource)).cloned();
                let used = status.used.as_ref().and_then(|u| u.get(resource)).cloned();
                limit
                    .map(|limit| (limit, used))
                    .ok_or("no status.hard yet".to_owned())
            },
        )
        .await;
        if state.0.0 == hard.to_string() && state.1.is_some() {
            return;
        }
        seen = format!("hard {:?}, used {:?}", state.0, state.1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        quotas
            .delete(QUOTA, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("re-create {namespace}'s {QUOTA}: {e}"));
        reapply();
    }
    let log = with_cluster(|c| c.dir().join("kube-controller-manager.log"));
    let quota_lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("quota"))
        .map(str::to_owned)
        .collect();
    panic!(
        "the quota controller never counted {namespace}'s {resource}: {seen}; its log:\n{}",
        quota_lines[quota_lines.len().saturating_sub(20)..].join("\n")
    );
}

/// The used count of `resource` in `namespace`'s quota.
async fn used(namespace: &str, resource: &str) -> Option<String> {
    let quotas: Api<ResourceQuota> = Api::namespaced(e2e().env.client().await, namespace);
    let quota = quotas
        .get(QUOTA)
        .await
        .unwrap_or_else(|e| panic!("the quota of {namespace}: {e}"));
    quota.status?.used?.get(resource).map(|q| q.0.clone())
}

/// A token of `namespace`'s agent-implement (`kubectl create token`).
fn token(namespace: &str) -> String {
    must(
        kubectl(&["create", "token", "agent-implement", "-n", namespace]),
        &format!("a token for {namespace}/agent-implement"),
    )
    .trim()
    .to_owned()
}

/// One bridge Pod's address (Pod IPs are routed from the host).
async fn bridge_addr() -> String {
    let pods = pods_of("handoff-bridge").await;
    let ip = pods
        .iter()
        .find_map(|p| p.status.as_ref()?.pod_ip.clone())
        .unwrap_or_else(|| panic!("no bridge Pod has an IP"));
    format!("{ip}:8080")
}

/// What a tool call answered: whether it is an error, its text, and its
/// structured content.
struct Called {
    error: bool,
    text: String,
    structured: Value,
}

/// Calls `tool` on the bridge at `addr` as `token`.
async fn call(addr: &str, token: &str, tool: &str, args: Value) -> Called {
    let request = mcp_post(BRIDGE_HOST, Some(token), &tool_call(tool, args));
    let answer = exchange(addr, &request)
        .await
        .unwrap_or_else(|e| panic!("{tool} on the bridge at {addr}: {e:#}"));
    assert_eq!(answer.status, 200, "{tool}: {}", answer.body);
    let body: Value = serde_json::from_str(&answer.body)
        .unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {}", answer.body));
    let result = &body["result"];
    Called {
        error: result["isError"] == json!(true),
        text: result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{tool}: no text in {body}"))
            .to_owned(),
        structured: result["structuredContent"].clone(),
    }
}

/// `write_handoff` of `key` in project `shop`.
async fn write(addr: &str, token: &str, key: &str, body: &str) -> Called {
    let args = json!({"handoff_key": key, "project": "shop", "body": body});
    call(addr, token, "write_handoff", args).await
}

/// Asserts the refusal through the bridge names the quota, the resource,
/// the numbers and a remedy, and not the apiserver's wording.
fn assert_clear_refusal(called: &Called, what: &str, parts: &[&str]) {
    assert!(called.error, "{what} was not refused: {}", called.text);
    for part in parts {
        assert!(
            called.text.contains(part),
            "{what}: want {part:?} in {:?}",
            called.text
        );
    }
    assert!(
        !called.text.contains("exceeded quota:") && !called.text.contains("limited:"),
        "{what}: the apiserver's text leaked: {}",
        called.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_at_its_quota_is_refused_clearly_and_another_team_keeps_writing() {
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    let (a, b) = ("quota-team-a", "quota-team-b");
    onboard(a, &resize(A_HANDOFFS, A_OFFERS), A_HANDOFFS).await;
    onboard(b, "", 500).await;
    let addr = bridge_addr().await;
    let (token_a, token_b) = (token(a), token(b));

    for n in 1..=A_HANDOFFS {
        let written = write(&addr, &token_a, &format!("quota#{n}"), "first").await;
        assert!(!written.error, "team A's handoff {n}: {}", written.text);
    }

    // Full: a new key through the bridge is refused, clearly, and nothing
    // is written.
    let refused = write(&addr, &token_a, "quota#next", "one too many").await;
    assert_clear_refusal(
        &refused,
        "a new key past team A's quota",
        &[
            &format!("ResourceQuota {QUOTA}"),
            "count/handoffs.handoff.dev",
            &format!("allows {A_HANDOFFS} handoffs"),
            "nothing was written",
            "ask your cluster admin for a larger quota",
        ],
    );
    let handoffs: Api<Handoff> = Api::namespaced(e2e().env.client().await, a);
    let stored = handoffs
        .get_opt(&name_for_key("quota#next"))
        .await
        .unwrap_or_else(|e| panic!("get the refused handoff: {e}"));
    assert!(stored.is_none(), "the refused handoff was written");

    // With kubectl, the apiserver's own refusal.
    let manifest = serde_json::to_string(&handoff("quota#kubectl", "by hand"))
        .unwrap_or_else(|e| panic!("the manifest: {e}"));
    let out = kubectl_stdin(&["apply", "-n", a, "-f", "-"], &manifest);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(&format!("exceeded quota: {QUOTA}")),
        "kubectl apply past team A's quota: {stderr}{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // An update of an existing key is not counted.
    let updated = write(&addr, &token_a, "quota#1", "revised").await;
    assert!(!updated.error, "update at the quota: {}", updated.text);
    assert_eq!(updated.structured["outcome"], json!("updated"));
    assert_eq!(
        used(a, "count/handoffs.handoff.dev").await.as_deref(),
        Some(A_HANDOFFS.to_string().as_str())
    );

    // Offers: the first fits, the second is refused the same way and
    // leaves no offer behind.
    let offer = |to: &str| json!({"project": "shop", "to": to, "handoff_key": "quota#1"});
    let first = call(&addr, &token_a, "offer_handoff", offer("tester")).await;
    assert!(!first.error, "team A's first offer: {}", first.text);
    let second = call(&addr, &token_a, "offer_handoff", offer("reviewer")).await;
    assert_clear_refusal(
        &second,
        "an offer past team A's quota",
        &[
            &format!("ResourceQuota {QUOTA}"),
            "count/handoffoffers.handoff.dev",
            &format!("allows {A_OFFERS} offers"),
        ],
    );
    let offers: Api<HandoffOffer> = Api::namespaced(e2e().env.client().await, a);
    let names: Vec<String> = offers
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list team A's offers: {e}"))
        .items
        .iter()
        .map(|o| o.spec.to.clone())
        .collect();
    assert_eq!(names, ["tester"], "team A's offers after the refusal");

    // Team B keeps writing, past team A's count.
    for n in 1..=A_HANDOFFS + 2 {
        let written = write(&addr, &token_b, &format!("quota#{n}"), "team b").await;
        assert!(
            !written.error,
            "team B's handoff {n} beside a full team A: {}",
            written.text
        );
    }
}
