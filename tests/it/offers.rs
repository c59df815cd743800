//! Offers against the real apiserver, through the real MCP client over the
//! HTTP bridge, and the controller's activation loop.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::agents::{Served, client_with_token, groomer_token, served, writer_token};
use common::{agent_token, call, env};
use handoff_controller::offer_loops::{OfferLoops, run};
use handoff_core::api::{HandoffOffer, OfferPhase, SupersedeReason};
use handoff_core::offers::DEFAULT_ACTIVE_SELECTOR;
use handoff_testkit::wait::eventually;
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

async fn setup(prefix: &str) -> Served {
    served(env(), prefix, "architect").await
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
    let answers = s.bridge.concurrent(&s.token, "offer_handoff", args);
    assert_eq!(answers.len(), 16);
    for a in &answers {
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
    let names: Vec<&str> = all
        .iter()
        .filter_map(|o| o.metadata.name.as_deref())
        .collect();
    for o in all.iter().filter(|o| o.phase() == OfferPhase::Superseded) {
        let status = o.status.clone().unwrap_or_default();
        assert_eq!(status.reason, Some(SupersedeReason::NewOffer));
        let by = status
            .superseded_by
            .expect("a Superseded offer names its substitute");
        assert!(
            names.contains(&by.as_str()) && Some(by.as_str()) != o.metadata.name.as_deref(),
            "{:?} is superseded by {by}, which is not another of {names:?}",
            o.metadata.name
        );
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

    let newer = offer_now(&s, offer("infra", "s1", "pr-8"));
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
    let pending = offer_now(&s, offer("qa", "s1", "a"));
    let mut other = offer("qa", "s2", "b");
    other["if_absent"] = json!(true);
    let again = offer_now(&s, other);
    assert_eq!(again[0]["structured"]["outcome"], json!("already_offered"));
    assert_eq!(
        again[0]["structured"]["offer"]["name"],
        pending[0]["structured"]["offer"]["name"]
    );
}

#[tokio::test]
async fn agent_activation_supersedes_pending_offers_and_accepts_the_named_one() {
    let s = setup("offers-activation").await;
    let first = offer_now(&s, offer("dev-lead", "s1", "a"));
    let accepted_name = offer_name_of(&first[0]);
    let other = offer_now(&s, offer("tester", "s1", "a"));
    let untouched = offer_name_of(&other[0]);

    let reporter = kube::runtime::events::Reporter {
        controller: handoff_core::names::CONTROLLER_FIELD_MANAGER.into(),
        instance: Some("offers-test".into()),
    };
    let ctx = Arc::new(OfferLoops::new(
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
    let newer = offer_now(&s, offer("dev-lead", "s2", "b"));
    let newest = offer_name_of(&newer[0]);
    let jobs = start_agent_job(&s.ns, "dev-lead-run", "dev-lead", Some(&newest)).await;
    let api: Api<HandoffOffer> = Api::namespaced(env().client().await, &s.ns);
    let phase_of = |name: String| {
        let api = api.clone();
        async move { api.get(&name).await.expect("offer").phase() }
    };
    let reaches = |name: &str, phase: OfferPhase| {
        let (api, name) = (api.clone(), name.to_owned());
        async move {
            eventually(
                &format!("{name} {phase:?}"),
                Duration::from_secs(30),
                || async { api.get(&name).await.expect("offer").phase() == phase },
            )
            .await
        }
    };
    reaches(&newest, OfferPhase::Accepted).await;
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
    reaches(&newest, OfferPhase::Completed).await;

    // Activation supersedes what is pending to the agent (reason AgentActivated).
    let pending = offer_now(&s, offer("tester", "s9", "z"));
    let pending_name = offer_name_of(&pending[0]);
    start_agent_job(&s.ns, "tester-run", "tester", None).await;
    reaches(&pending_name, OfferPhase::Superseded).await;
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
    for a in &s.bridge.concurrent(&s.token, "offer_handoff", args) {
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

/// Adds `labels` to ServiceAccount `name` (before its token is first used:
/// the bridge reads the labels once per token).
async fn label_account(ns: &str, name: &str, labels: Value) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    Api::<ServiceAccount>::namespaced(env().client().await, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": labels}})),
        )
        .await
        .expect("label the ServiceAccount");
}

/// The token of the writer `name`, its ServiceAccount labelled as the
/// agent `agent` (`handoff.dev/agent`).
async fn labelled_writer(ns: &str, name: &str, agent: &str) -> String {
    let token = writer_token(env(), ns, name).await;
    label_account(ns, name, json!({"handoff.dev/agent": agent})).await;
    token
}

/// `kubectl` as `user` (impersonated by the admin): stdout or stderr.
fn kubectl_as(user: &str, args: &[&str]) -> Result<String, String> {
    let out = env()
        .kubectl()
        .args(args)
        .args(["--as", user])
        .output()
        .expect("kubectl runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Asserts that kubectl's `stderr` is RBAC's refusal of `verb` on
/// `resource` (of handoff.dev) to `user`.
fn forbidden(stderr: &str, user: &str, verb: &str, resource: &str) {
    let refusal = format!(
        "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"handoff.dev\""
    );
    assert!(
        stderr.contains("(Forbidden)") && stderr.contains(&refusal),
        "{stderr}"
    );
}

fn offer_name_of(result: &Value) -> String {
    common::ok(result)["offer"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("an offer: {result}"))
        .to_owned()
}

/// One `offer_handoff` of `args` by the test's agent: its answers.
fn offer_now(s: &Served, args: Value) -> Vec<Value> {
    s.bridge
        .drive(&s.token, "", json!([call("offer_handoff", args)]))
}

/// The name of a new offer of key `a` to `dev-lead` (session `s1`).
fn offered_to_dev_lead(s: &Served) -> String {
    offer_name_of(&offer_now(s, offer("dev-lead", "s1", "a"))[0])
}

/// The apiserver's refusal of a merge patch of `body` to offer `name`
/// (to its status subresource when `status`).
async fn refused_merge(
    api: &Api<HandoffOffer>,
    name: &str,
    status: bool,
    body: Value,
) -> kube::core::Status {
    let (params, patch) = (PatchParams::default(), Patch::Merge(&body));
    let answer = match status {
        true => api.patch_status(name, &params, &patch).await,
        false => api.patch(name, &params, &patch).await,
    };
    match answer.expect_err("refused") {
        kube::Error::Api(status) => *status,
        err => panic!("an apiserver refusal: {err}"),
    }
}

#[tokio::test]
async fn an_offer_spec_cannot_change_after_creation_not_even_by_an_admin() {
    let s = setup("offers-immutable").await;
    let name = offered_to_dev_lead(&s);
    let api: Api<HandoffOffer> = Api::namespaced(env().client().await, &s.ns);
    let status = refused_merge(&api, &name, false, json!({"spec": {"to": "someone-else"}})).await;
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(
            "spec is immutable after creation: an offer is a record of what was offered; offer again (offer_handoff) to change it"
        ),
        "{}",
        status.message
    );
    assert_eq!(api.get(&name).await.expect("offer").spec.to, "dev-lead");
}

#[tokio::test]
async fn a_writer_may_not_patch_an_offer_or_its_status_with_kubectl() {
    let s = setup("offers-kubectl").await;
    let name = offered_to_dev_lead(&s);
    let writer = format!("system:serviceaccount:{}:architect", s.ns);
    let patch = |extra: &[&str], patch: &str| {
        let mut args = vec!["-n", &s.ns, "patch", "handoffoffer", &name];
        args.extend(extra);
        args.extend(["--type=merge", "-p", patch]);
        kubectl_as(&writer, &args)
    };
    let status = patch(
        &["--subresource=status"],
        r#"{"status":{"phase":"Rejected"}}"#,
    )
    .expect_err("the status patch is refused");
    // kubectl reads the status subresource first: writers have no right on it at all.
    forbidden(&status, &writer, "get", "handoffoffers/status");
    // The patch itself, with the writer's own token.
    let as_writer: Api<HandoffOffer> =
        Api::namespaced(client_with_token(env(), &s.token).await, &s.ns);
    let refusal = refused_merge(
        &as_writer,
        &name,
        true,
        json!({"status": {"phase": "Rejected"}}),
    )
    .await;
    assert_eq!((refusal.code, refusal.reason.as_str()), (403, "Forbidden"));
    assert!(
        refusal.message.contains(&format!(
            "User \"{writer}\" cannot patch resource \"handoffoffers/status\" in API group \"handoff.dev\""
        )),
        "{}",
        refusal.message
    );
    let spec = patch(
        &[],
        r#"{"metadata":{"labels":{"handoff.dev/slot":"forged"}}}"#,
    )
    .expect_err("the object patch is refused");
    forbidden(&spec, &writer, "patch", "handoffoffers");
    let stored = Api::<HandoffOffer>::namespaced(env().client().await, &s.ns)
        .get(&name)
        .await
        .expect("offer");
    assert_eq!(stored.phase(), OfferPhase::Offered, "nothing changed");
}

#[tokio::test]
async fn only_the_destination_agent_or_a_groomer_may_reject_an_offer() {
    let s = setup("offers-reject").await;
    let lead = labelled_writer(&s.ns, "dev-lead", "dev-lead").await;
    let other = labelled_writer(&s.ns, "impl", "implement").await;
    let groomer = groomer_token(env(), &s.ns, "groomer").await;
    let stranger = agent_token(env(), &s.ns, "stranger", Some("implement"), None).await;
    let created = s.bridge.drive(
        &s.token,
        "",
        json!([
            call("offer_handoff", offer("dev-lead", "s1", "a")),
            call("offer_handoff", offer("tester", "s1", "a")),
            call("offer_handoff", offer("qa", "s1", "a")),
            call("offer_handoff", offer("qa", "s2", "b"))
        ]),
    );
    let to_lead = offer_name_of(&created[0]);
    let to_tester = offer_name_of(&created[1]);
    let superseded = offer_name_of(&created[2]);
    let reject = |name: &str| json!([call("reject_offer", json!({"offer": name}))]);

    // The offerer (not labelled) and another agent are refused by name.
    let by_offerer = s.bridge.drive(&s.token, "", reject(&to_lead));
    assert_eq!(
        common::err_text(&by_offerer[0]),
        format!(
            "reject_offer: only the destination agent \"dev-lead\" may reject offer {to_lead}; the caller \
             system:serviceaccount:{ns}:architect is not labelled handoff.dev/agent=dev-lead (nor may it \
             patch handoffoffers/status itself, as a groomer may)",
            ns = s.ns
        )
    );
    let by_other = s.bridge.drive(&other, "", reject(&to_lead));
    assert_eq!(
        common::err_text(&by_other[0]),
        format!(
            "reject_offer: only the destination agent \"dev-lead\" may reject offer {to_lead}; the caller \
             system:serviceaccount:{ns}:impl is labelled handoff.dev/agent=implement (nor may it \
             patch handoffoffers/status itself, as a groomer may)",
            ns = s.ns
        )
    );
    // A caller that may not read offers is refused by RBAC, before anything else.
    let by_stranger = s.bridge.drive(&stranger, "", reject(&to_lead));
    let text = common::err_text(&by_stranger[0]);
    assert!(
        text.contains(&format!(
            "identity system:serviceaccount:{}:stranger may not reject offers of handoffs",
            s.ns
        )) && text.contains("cannot get resource \"handoffoffers\""),
        "{text}"
    );
    let api: Api<HandoffOffer> = Api::namespaced(env().client().await, &s.ns);
    assert_eq!(
        api.get(&to_lead).await.expect("offer").phase(),
        OfferPhase::Offered,
        "the refusals changed nothing"
    );

    // The destination rejects its offer; a groomer rejects any.
    let by_lead = s.bridge.drive(&lead, "", reject(&to_lead));
    assert_eq!(common::ok(&by_lead[0])["offer"]["phase"], json!("Rejected"));
    let by_groomer = s.bridge.drive(&groomer, "", reject(&to_tester));
    assert_eq!(
        common::ok(&by_groomer[0])["offer"]["phase"],
        json!("Rejected")
    );
    // A finished offer stays what it became.
    let finished = s.bridge.drive(&groomer, "", reject(&superseded));
    assert_eq!(
        common::err_text(&finished[0]),
        format!(
            "reject_offer: offer {superseded} is already Superseded; only an Offered or Accepted offer can be rejected"
        )
    );
    assert_eq!(
        api.get(&superseded).await.expect("offer").phase(),
        OfferPhase::Superseded
    );
    for name in [&to_lead, &to_tester] {
        let stored = api.get(name).await.expect("offer");
        assert_eq!(stored.phase(), OfferPhase::Rejected);
        let created = stored
            .metadata
            .creation_timestamp
            .clone()
            .expect("creationTimestamp");
        let finished = stored
            .status
            .and_then(|s| s.finished_at)
            .expect("a terminal phase carries finishedAt");
        assert!(
            finished.0 >= created.0,
            "finishedAt {finished:?} is before the offer was created ({created:?})"
        );
    }
}

#[tokio::test]
async fn a_caller_without_offer_rights_learns_nothing_of_the_agents_jobs() {
    let s = setup("offers-order").await;
    start_agent_job(&s.ns, "ops-running", "ops", None).await;
    let stranger = agent_token(env(), &s.ns, "stranger", Some("implement"), None).await;
    let results = s.bridge.drive(
        &stranger,
        "",
        json!([call("offer_handoff", offer("ops", "s1", ""))]),
    );
    let text = common::err_text(&results[0]);
    assert!(
        text.contains(&format!(
            "identity system:serviceaccount:{}:stranger may not offer (create HandoffOffers for) handoffs",
            s.ns
        )) && text.contains("cannot list resource \"handoffoffers\""),
        "refused by RBAC, not told the agent is active: {text}"
    );
    assert!(!text.contains("agent_already_active"), "{text}");
    let writer = offer_now(&s, offer("ops", "s1", ""));
    assert!(
        common::err_text(&writer[0]).starts_with("agent_already_active"),
        "a writer is told: {}",
        writer[0]
    );
}

#[tokio::test]
async fn list_offers_pages_with_limit_and_cursor() {
    let s = setup("offers-pages").await;
    let created = s.bridge.drive(
        &s.token,
        "",
        json!(
            (0..5)
                .map(|i| call("offer_handoff", offer(&format!("agent-{i}"), "s1", "a")))
                .collect::<Vec<_>>()
        ),
    );
    let mut expected: Vec<String> = created.iter().map(offer_name_of).collect();
    expected.sort();

    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"project": "shop", "limit": 2});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = s
            .bridge
            .drive(&s.token, "", json!([call("list_offers", args)]));
        let page = common::ok(&page[0]).clone();
        let names: Vec<String> = page["offers"]
            .as_array()
            .expect("offers")
            .iter()
            .map(|o| o["name"].as_str().expect("name").to_owned())
            .collect();
        pages.push(names.len());
        seen.extend(names);
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
        assert!(pages.len() < 5, "the pages end: {pages:?}");
    }
    assert_eq!(pages, vec![2, 2, 1], "three pages");
    assert_eq!(seen, expected, "each offer exactly once, by name");

    // Limits are bounded, and a cursor continues only its own listing.
    let first = s.bridge.drive(
        &s.token,
        "",
        json!([call("list_offers", json!({"project": "shop", "limit": 2}))]),
    );
    let cursor = common::ok(&first[0])["next_cursor"].clone();
    let refused = s.bridge.drive(
        &s.token,
        "",
        json!([
            call("list_offers", json!({"project": "shop", "limit": 0})),
            call("list_offers", json!({"project": "shop", "limit": 201})),
            call(
                "list_offers",
                json!({"project": "shop", "to": "agent-1", "cursor": cursor})
            )
        ]),
    );
    assert_eq!(
        common::err_text(&refused[0]),
        "invalid `limit`: a page size from 1 to 200; got 0"
    );
    assert_eq!(
        common::err_text(&refused[1]),
        "invalid `limit`: a page size from 1 to 200; got 201"
    );
    assert_eq!(
        common::err_text(&refused[2]),
        "invalid `cursor`: the next_cursor of a previous list_offers answer, unchanged, with the same project, \
         to and phase; it continues the listing of project \"shop\", to None, phase None"
    );
    let all = s.bridge.drive(
        &s.token,
        "",
        json!([call("list_offers", json!({"project": "shop"}))]),
    );
    let all = common::ok(&all[0]);
    assert_eq!(all["offers"].as_array().expect("offers").len(), 5);
    assert_eq!(all.get("next_cursor"), None, "one page by default (50)");
}

#[tokio::test]
async fn finished_offers_are_deleted_after_the_retention_and_others_stay() {
    use handoff_core::time::ManualClock;
    use jiff::{SignedDuration, Timestamp};

    let ns = env().namespace("offers-retention").await;
    let api: Api<HandoffOffer> = Api::namespaced(env().client().await, &ns);
    let day = SignedDuration::from_hours(24);
    let real_now = Timestamp::now();
    let t0 = real_now + SignedDuration::from_hours(1);
    // (name, phase, finishedAt)
    let cases: [(&str, Option<&str>, Option<Timestamp>); 6] = [
        ("old-rejected", Some("Rejected"), Some(t0 - day * 8)),
        ("old-superseded", Some("Superseded"), Some(t0 - day * 10)),
        ("young-completed", Some("Completed"), Some(t0 - day)),
        ("unstamped-rejected", Some("Rejected"), None),
        ("pending", Some("Offered"), None),
        ("accepted", Some("Accepted"), None),
    ];
    for (name, phase, finished) in &cases {
        let offer: HandoffOffer = serde_json::from_value(json!({
            "apiVersion": "handoff.dev/v1alpha1", "kind": "HandoffOffer",
            "metadata": {"name": name},
            "spec": {"project": "shop", "to": "dev-lead", "fromKey": "arch#1"},
        }))
        .expect("offer");
        api.create(&PostParams::default(), &offer)
            .await
            .expect("create");
        let mut status = json!({"phase": phase});
        if let Some(at) = finished {
            status["finishedAt"] = json!(at.to_string());
        }
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .expect("status");
    }

    let clock = Arc::new(ManualClock::new(t0));
    let reporter = kube::runtime::events::Reporter {
        controller: handoff_core::names::CONTROLLER_FIELD_MANAGER.into(),
        instance: Some("retention-test".into()),
    };
    let ctx = Arc::new(
        OfferLoops::new(
            env().client().await,
            DEFAULT_ACTIVE_SELECTOR,
            reporter,
            Arc::default(),
        )
        .with_retention(Duration::from_secs(7 * 86_400), clock.clone()),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    let loop_ns = ns.clone();
    let loop_task = tokio::spawn(async move { run(ctx, Some(&loop_ns), 2, token).await });

    let names = || {
        let api = api.clone();
        async move {
            let mut names: Vec<String> = api
                .list(&ListParams::default())
                .await
                .expect("list")
                .items
                .iter()
                .map(|o| o.metadata.name.clone().unwrap_or_default())
                .collect();
            names.sort();
            names
        }
    };
    let young = vec![
        "accepted".to_owned(),
        "pending".to_owned(),
        "unstamped-rejected".to_owned(),
        "young-completed".to_owned(),
    ];
    let left = handoff_testkit::wait::eventually(
        "the offers finished more than 7 days ago deleted",
        Duration::from_secs(60),
        || {
            let names = names();
            let young = young.clone();
            async move { Some(names.await).filter(|n| *n == young) }
        },
    )
    .await;
    assert_eq!(left, young, "younger, unstamped and pending offers stay");

    // Eight days later, the completed one and the unstamped one (judged by
    // its creation) are past the retention too; pending and accepted stay.
    clock.set(real_now + day * 8);
    for name in &young {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {"test/touch": "1"}}})),
        )
        .await
        .expect("touch");
    }
    let left = handoff_testkit::wait::eventually(
        "the rest of the finished offers deleted",
        Duration::from_secs(60),
        || {
            let names = names();
            async move { Some(names.await).filter(|n| n.len() == 2) }
        },
    )
    .await;
    assert_eq!(left, vec!["accepted".to_owned(), "pending".to_owned()]);
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), loop_task).await;
}
