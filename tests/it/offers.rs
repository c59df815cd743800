//! Offers against the real apiserver, through the real MCP client over the
//! HTTP bridge, and the controller's activation loop.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Bridge, agent_token, apply_agent_roles, call, env};
use handoff::api::{HandoffOffer, OfferPhase, SupersedeReason};
use handoff::offers::activation::{Context, run};
use handoff::offers::decision::DEFAULT_ACTIVE_SELECTOR;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn offer(to: &str, session: &str, artifact: &str) -> Value {
    json!({"project": "shop", "to": to, "handoff_key": "arch#1", "session": session, "artifact": artifact,
           "body": "story 1: wire the CLI"})
}

async fn offers(ns: &str) -> Vec<HandoffOffer> {
    let api: Api<HandoffOffer> = Api::namespaced(env().client().await, ns);
    api.list(&ListParams::default())
        .await
        .expect("list offers")
        .items
}

async fn events(ns: &str, reason: &str) -> Vec<Event> {
    common::events_with_reason(env().client().await, ns, reason).await
}

struct Setup {
    ns: String,
    bridge: Bridge,
    token: String,
}

async fn setup(prefix: &str) -> Setup {
    let env = env();
    let ns = env.namespace(prefix).await;
    apply_agent_roles(env);
    let bridge = Bridge::start(env, &ns);
    let token = agent_token(
        env,
        &ns,
        "architect",
        Some("implement"),
        Some("handoff-writer"),
    )
    .await;
    Setup { ns, bridge, token }
}

#[tokio::test]
async fn sixteen_concurrent_offers_leave_exactly_one_offered() {
    let s = setup("offers-concurrent").await;
    let args: Vec<Value> = (0..16)
        .map(|i| {
            offer(
                "dev-lead",
                &format!("session-{}", i % 4),
                &format!("artifact-{}", i % 3),
            )
        })
        .collect();
    let results = s.bridge.drive(
        &s.token,
        "",
        json!([{"op": "concurrent", "tool": "offer_handoff", "args_list": args}]),
    );
    let answers = results[0]["results"].as_array().expect("answers");
    assert_eq!(answers.len(), 16);
    for a in answers {
        assert_eq!(a["is_error"], json!(false), "{a}");
    }
    let all = offers(&s.ns).await;
    let offered: Vec<_> = all
        .iter()
        .filter(|o| o.phase() == OfferPhase::Offered)
        .collect();
    assert_eq!(
        offered.len(),
        1,
        "exactly one Offered: {:?}",
        all.iter()
            .map(|o| (o.metadata.name.clone(), o.phase()))
            .collect::<Vec<_>>()
    );
    let superseded = all
        .iter()
        .filter(|o| o.phase() == OfferPhase::Superseded)
        .count();
    let already = answers
        .iter()
        .filter(|a| a["structured"]["outcome"] == json!("already_offered"))
        .count();
    assert_eq!(superseded + 1, all.len(), "every other offer is Superseded");
    assert_eq!(
        all.len() + already,
        16,
        "each call created an offer or was answered already_offered"
    );
    let events = events(&s.ns, "Superseded").await;
    assert_eq!(events.len(), superseded, "one Event per superseded offer");
    for o in all.iter().filter(|o| o.phase() == OfferPhase::Superseded) {
        let status = o.status.clone().unwrap_or_default();
        assert_eq!(status.reason, Some(SupersedeReason::NewOffer));
        assert!(status.superseded_by.is_some());
    }
}

#[tokio::test]
async fn a_double_submit_in_one_session_is_one_offer_and_no_event() {
    let s = setup("offers-double").await;
    let results = s.bridge.drive(
        &s.token,
        "",
        json!([
            call("offer_handoff", offer("infra", "s1", "pr-7")),
            call("offer_handoff", offer("infra", "s1", "")),
            call("offer_handoff", offer("infra", "s1", "pr-7"))
        ]),
    );
    assert_eq!(
        results[0]["structured"]["outcome"],
        json!("created"),
        "{results:?}"
    );
    assert_eq!(
        results[1]["structured"]["outcome"],
        json!("already_offered")
    );
    assert_eq!(
        results[2]["structured"]["outcome"],
        json!("already_offered")
    );
    assert_eq!(offers(&s.ns).await.len(), 1);
    assert!(events(&s.ns, "Superseded").await.is_empty());

    let newer = s.bridge.drive(
        &s.token,
        "",
        json!([call("offer_handoff", offer("infra", "s1", "pr-8"))]),
    );
    assert_eq!(
        newer[0]["structured"]["outcome"],
        json!("superseded_previous")
    );
    let evs = events(&s.ns, "Superseded").await;
    assert_eq!(evs.len(), 1);
    let new_name = newer[0]["structured"]["offer"]["name"]
        .as_str()
        .expect("name");
    assert!(
        evs[0].note.clone().unwrap_or_default().contains(new_name),
        "the Event names the substitute"
    );
}

async fn start_agent_job(ns: &str, name: &str, agent: &str, offer: Option<&str>) -> Api<Job> {
    let jobs: Api<Job> = Api::namespaced(env().client().await, ns);
    let mut annotations = serde_json::Map::new();
    if let Some(o) = offer {
        annotations.insert("handoff.dev/offer".into(), json!(o));
    }
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"handoff.dev/agent": agent, "project": "shop"}, "annotations": annotations},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "agent:1"}]}}},
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    jobs
}

#[tokio::test]
async fn an_active_agent_is_refused_by_name_and_if_absent_answers_without_error() {
    let s = setup("offers-active").await;
    start_agent_job(&s.ns, "ops-running", "ops", None).await;
    let mut absent = offer("ops", "s1", "");
    absent["if_absent"] = json!(true);
    let results = s.bridge.drive(
        &s.token,
        "",
        json!([
            call("offer_handoff", offer("ops", "s1", "")),
            call("offer_handoff", absent)
        ]),
    );
    assert_eq!(results[0]["is_error"], json!(true));
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("agent_already_active"),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["is_error"], json!(false));
    assert_eq!(
        results[1]["structured"]["outcome"],
        json!("agent_already_active")
    );
    assert!(offers(&s.ns).await.is_empty(), "nothing written");

    // if_absent with a pending offer: answered already_offered, no supersession.
    let pending = s.bridge.drive(
        &s.token,
        "",
        json!([call("offer_handoff", offer("qa", "s1", "a"))]),
    );
    let mut other = offer("qa", "s2", "b");
    other["if_absent"] = json!(true);
    let again = s
        .bridge
        .drive(&s.token, "", json!([call("offer_handoff", other)]));
    assert_eq!(again[0]["structured"]["outcome"], json!("already_offered"));
    assert_eq!(
        again[0]["structured"]["offer"]["name"],
        pending[0]["structured"]["offer"]["name"]
    );
}

#[tokio::test]
async fn agent_activation_supersedes_pending_offers_and_accepts_the_named_one() {
    let s = setup("offers-activation").await;
    let first = s.bridge.drive(
        &s.token,
        "",
        json!([call("offer_handoff", offer("dev-lead", "s1", "a"))]),
    );
    let accepted_name = first[0]["structured"]["offer"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    let other = s.bridge.drive(
        &s.token,
        "",
        json!([call("offer_handoff", offer("tester", "s1", "a"))]),
    );
    let untouched = other[0]["structured"]["offer"]["name"]
        .as_str()
        .expect("name")
        .to_owned();

    let reporter = kube::runtime::events::Reporter {
        controller: handoff::names::CONTROLLER_FIELD_MANAGER.into(),
        instance: Some("offers-test".into()),
    };
    let ctx = Arc::new(Context::new(
        env().client().await,
        DEFAULT_ACTIVE_SELECTOR,
        reporter,
        Arc::default(),
    ));
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    let ns = s.ns.clone();
    let loop_task = tokio::spawn(async move { run(ctx, Some(&ns), 4, token).await });

    // A newer offer to dev-lead supersedes the first; then a Job of dev-lead starts naming the newest.
    let newer = s.bridge.drive(
        &s.token,
        "",
        json!([call("offer_handoff", offer("dev-lead", "s2", "b"))]),
    );
    let newest = newer[0]["structured"]["offer"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    let jobs = start_agent_job(&s.ns, "dev-lead-run", "dev-lead", Some(&newest)).await;
    let api: Api<HandoffOffer> = Api::namespaced(env().client().await, &s.ns);
    let phase_of = |name: String| {
        let api = api.clone();
        async move { api.get(&name).await.expect("offer").phase() }
    };
    assert!(
        wait_until(|| phase_of(newest.clone()), OfferPhase::Accepted).await,
        "the named offer is Accepted"
    );
    assert_eq!(
        phase_of(accepted_name.clone()).await,
        OfferPhase::Superseded
    );
    assert_eq!(
        phase_of(untouched.clone()).await,
        OfferPhase::Offered,
        "offers to other agents are untouched"
    );

    // The Job succeeds, as the Job controller would record it.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
        {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]}});
    jobs.patch_status(
        "dev-lead-run",
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .expect("complete");
    assert!(
        wait_until(|| phase_of(newest.clone()), OfferPhase::Completed).await,
        "Completed when the Job succeeds"
    );

    // Activation supersedes what is pending to the agent (reason AgentActivated).
    let pending = s.bridge.drive(
        &s.token,
        "",
        json!([call("offer_handoff", offer("tester", "s9", "z"))]),
    );
    let pending_name = pending[0]["structured"]["offer"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    start_agent_job(&s.ns, "tester-run", "tester", None).await;
    assert!(wait_until(|| phase_of(pending_name.clone()), OfferPhase::Superseded).await);
    let status = api
        .get(&pending_name)
        .await
        .expect("offer")
        .status
        .unwrap_or_default();
    assert_eq!(status.reason, Some(SupersedeReason::AgentActivated));
    assert_eq!(status.superseded_by.as_deref(), Some("job/tester-run"));
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), loop_task).await;
}

#[tokio::test]
async fn offers_to_two_destinations_in_parallel_both_land() {
    let s = setup("offers-parallel").await;
    let args: Vec<Value> = (0..8)
        .map(|i| {
            offer(
                if i % 2 == 0 { "alpha" } else { "beta" },
                &format!("s{i}"),
                "x",
            )
        })
        .collect();
    let results = s.bridge.drive(
        &s.token,
        "",
        json!([{"op": "concurrent", "tool": "offer_handoff", "args_list": args}]),
    );
    for a in results[0]["results"].as_array().expect("answers") {
        assert_eq!(a["is_error"], json!(false), "{a}");
    }
    let all = offers(&s.ns).await;
    for to in ["alpha", "beta"] {
        let offered = all
            .iter()
            .filter(|o| o.spec.to == to && o.phase() == OfferPhase::Offered)
            .count();
        assert_eq!(offered, 1, "one Offered to {to}");
    }
}

/// Polls until `phase` is reached (bounded; not a speed assertion).
async fn wait_until<F, Fut>(mut get: F, phase: OfferPhase) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = OfferPhase>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if get().await == phase {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
