//! The schedule loop's wiring against the real apiserver: real Jobs,
//! Events and status writes, adoption of an existing Job, the Job watch.
//! Every transition of the barrier is in the table of
//! `handoff_core::schedule::plan`'s unit tests, not repeated here. There is no
//! kubelet or Job controller in envtest, so the tests patch Job status the
//! way they would; time comes from a manual clock.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use handoff_controller::schedule::reconcile::{ScheduleLoop, reconcile_schedule};
use handoff_core::api::{BrainstormSchedule, SchedulePhase};
use handoff_core::names::{ROLE_LABEL, SCHEDULE_LABEL};
use handoff_core::schedule::tick::Timing;
use handoff_core::time::ManualClock;
use handoff_testkit as testing;
use handoff_testkit::wait::eventually;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const HOURLY: &str = "0 * * * *";

fn manifest(name: &str, schedule: &str) -> serde_json::Value {
    let template = |image: &str| {
        json!({"spec": {"template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "agent", "image": image}]}}}})
    };
    json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
        "metadata": {"name": name},
        "spec": {"project": "shop", "schedule": schedule,
                 "refine": {"jobTemplate": template("refiner:1")},
                 "brainstorm": {"jobTemplate": template("brainstormer:1"), "maxOpenProposals": 3}},
    })
}

struct Fixture {
    client: Client,
    schedules: Api<BrainstormSchedule>,
    jobs: Api<Job>,
    name: String,
    namespace: String,
    clock: Arc<ManualClock>,
    ctx: Arc<ScheduleLoop>,
    first_tick: Timestamp,
}

impl Fixture {
    async fn new(prefix: &str, schedule: &str) -> Self {
        let env = testing::shared();
        let ns = env.namespace(prefix).await;
        let client = env.client().await;
        let schedules: Api<BrainstormSchedule> = Api::namespaced(client.clone(), &ns);
        let created: BrainstormSchedule = schedules
            .create(
                &PostParams::default(),
                &serde_json::from_value(manifest("daily", schedule)).expect("manifest"),
            )
            .await
            .expect("create schedule");
        let created_at = created.metadata.creation_timestamp.expect("created").0;
        let first_tick = Timing::parse(schedule, None)
            .expect("timing")
            .next_after(created_at)
            .expect("tick");
        let clock = Arc::new(ManualClock::new(created_at));
        let ctx = Arc::new(ScheduleLoop::new(client.clone(), clock.clone(), "test"));
        Self {
            jobs: Api::namespaced(client.clone(), &ns),
            client,
            schedules,
            name: "daily".into(),
            namespace: ns,
            clock,
            ctx,
            first_tick,
        }
    }

    async fn reconcile(&self) -> BrainstormSchedule {
        let current = self.schedules.get(&self.name).await.expect("get");
        reconcile_schedule(&current, &self.ctx)
            .await
            .expect("reconcile");
        self.schedules.get(&self.name).await.expect("get")
    }

    async fn jobs(&self, role: &str) -> Vec<Job> {
        let params = ListParams::default().labels(&format!(
            "{SCHEDULE_LABEL}={},{ROLE_LABEL}={role}",
            self.name
        ));
        self.jobs.list(&params).await.expect("list jobs").items
    }

    async fn finish(&self, job: &str, succeeded: bool) {
        let now = Timestamp::now().to_string();
        let (kind, extra) = if succeeded {
            ("Complete", json!({"succeeded": 1, "completionTime": now}))
        } else {
            ("Failed", json!({"failed": 1}))
        };
        let interim = if succeeded {
            "SuccessCriteriaMet"
        } else {
            "FailureTarget"
        };
        let mut status = json!({"startTime": now, "conditions": [
            {"type": interim, "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
            {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]});
        if let (Some(s), Some(e)) = (status.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        self.jobs
            .patch_status(
                job,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .unwrap_or_else(|e| panic!("patch Job {job} status: {e}"));
    }

    async fn events(&self, reason: &str) -> Vec<Event> {
        let ns = self
            .schedules
            .get(&self.name)
            .await
            .expect("get")
            .metadata
            .namespace
            .unwrap_or_default();
        common::events_with_reason(self.client.clone(), &ns, reason).await
    }
}

fn phase(s: &BrainstormSchedule) -> Option<SchedulePhase> {
    s.status.as_ref().and_then(|st| st.phase)
}

#[tokio::test]
async fn a_due_tick_runs_refine_then_brainstorm_then_idles() {
    let f = Fixture::new("sched-cycle", HOURLY).await;
    let s = f.reconcile().await;
    assert_eq!(phase(&s), Some(SchedulePhase::Idle), "no tick yet");
    assert!(f.jobs("refine").await.is_empty());

    f.clock.set(f.first_tick + SignedDuration::from_secs(60));
    let s = f.reconcile().await;
    assert_eq!(phase(&s), Some(SchedulePhase::Refining));
    let refine = f.jobs("refine").await;
    assert_eq!(refine.len(), 1, "exactly one refine Job");
    assert!(
        f.jobs("brainstorm").await.is_empty(),
        "brainstorm waits for refine"
    );
    let job = &refine[0];
    let env = &job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod")
        .containers[0]
        .env;
    let env: Vec<(String, String)> = env
        .iter()
        .flatten()
        .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
        .collect();
    assert!(
        env.iter()
            .any(|(k, v)| k == "HANDOFF_GOAL" && v.contains("delete_handoff")),
        "{env:?}"
    );
    assert!(
        env.iter().any(|(k, _)| k == "CONVERSATION_OBJECT_KEY"),
        "{env:?}"
    );

    // The status write is lost (a crash after the Job was created): a
    // restarted controller plans the same Job again and adopts it.
    f.schedules
        .patch_status(
            &f.name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {
                "phase": "Idle", "activeJob": null,
                "currentCycle": null, "lastScheduleTime": null}})),
        )
        .await
        .expect("lose the status write");
    let restarted = Arc::new(ScheduleLoop::new(
        f.client.clone(),
        f.clock.clone(),
        "restarted",
    ));
    let current = f.schedules.get(&f.name).await.expect("get");
    reconcile_schedule(&current, &restarted)
        .await
        .expect("reconcile");
    assert_eq!(
        f.jobs("refine").await.len(),
        1,
        "the existing refine Job is adopted, not doubled"
    );
    let s = f.schedules.get(&f.name).await.expect("get");
    assert_eq!(phase(&s), Some(SchedulePhase::Refining));
    assert_eq!(
        s.status.as_ref().and_then(|st| st.active_job.clone()),
        job.metadata.name.clone(),
        "the status names the adopted Job"
    );

    f.finish(&job.metadata.name.clone().unwrap_or_default(), true)
        .await;
    let s = f.reconcile().await;
    assert_eq!(phase(&s), Some(SchedulePhase::Brainstorming));
    let brainstorm = f.jobs("brainstorm").await;
    assert_eq!(
        brainstorm.len(),
        1,
        "a Complete refine releases the brainstorm Job"
    );
    assert_eq!(
        s.status.as_ref().and_then(|st| st.active_job.clone()),
        brainstorm[0].metadata.name.clone()
    );

    f.finish(
        &brainstorm[0].metadata.name.clone().unwrap_or_default(),
        true,
    )
    .await;
    let s = f.reconcile().await;
    assert_eq!(phase(&s), Some(SchedulePhase::Idle));
    let status = s.status.expect("status");
    assert_eq!(
        (&status.current_cycle, &status.active_job),
        (&None, &None),
        "the written status no longer names the finished cycle"
    );
    let last = status.last_cycle.expect("last cycle");
    assert_eq!(last.result, Some(handoff_core::api::JobResult::Succeeded));
    assert_eq!(f.events("BrainstormStarted").await.len(), 1);
}

#[tokio::test]
async fn a_tick_during_a_cycle_is_recorded_once_and_the_next_cycle_starts() {
    let f = Fixture::new("sched-ticks", HOURLY).await;
    f.clock.set(f.first_tick + SignedDuration::from_secs(10));
    f.reconcile().await;
    assert_eq!(f.jobs("refine").await.len(), 1);

    // The next tick arrives while Refining: skipped, one Warning Event over
    // two reconciles (the skip is in the written status).
    let second = f.first_tick + SignedDuration::from_hours(1);
    f.clock.set(second + SignedDuration::from_secs(10));
    f.reconcile().await;
    f.reconcile().await;
    assert_eq!(
        f.jobs("refine").await.len(),
        1,
        "no second cycle while one runs"
    );
    let skipped = f.events("TickSkipped").await;
    assert_eq!(skipped.len(), 1, "one Event for the skipped tick");
    assert_eq!(skipped[0].type_.as_deref(), Some("Warning"));

    // Finish the cycle; the next tick starts exactly one new cycle.
    let refine = f.jobs("refine").await[0]
        .metadata
        .name
        .clone()
        .unwrap_or_default();
    f.finish(&refine, true).await;
    f.reconcile().await;
    let brainstorm = f.jobs("brainstorm").await[0]
        .metadata
        .name
        .clone()
        .unwrap_or_default();
    f.finish(&brainstorm, true).await;
    f.reconcile().await;
    assert_eq!(f.events("CycleFinished").await.len(), 1);
    f.clock
        .set(second + SignedDuration::from_hours(1) + SignedDuration::from_secs(5));
    let s = f.reconcile().await;
    assert_eq!(phase(&s), Some(SchedulePhase::Refining));
    assert_eq!(f.jobs("refine").await.len(), 2);
    let cycle = s.status.and_then(|st| st.current_cycle).expect("cycle");
    assert_eq!(
        (cycle.refine.result, cycle.brainstorm),
        (None, None),
        "the new cycle starts clean, nothing of the previous one merged in"
    );
}

#[tokio::test]
async fn an_invalid_time_zone_is_reported_in_a_condition() {
    let env = testing::shared();
    let ns = env.namespace("sched-invalid").await;
    let client = env.client().await;
    let schedules: Api<BrainstormSchedule> = Api::namespaced(client.clone(), &ns);
    let mut m = manifest("bad-tz", HOURLY);
    m["spec"]["timeZone"] = json!("Mars/Olympus_Mons");
    schedules
        .create(
            &PostParams::default(),
            &serde_json::from_value(m).expect("manifest"),
        )
        .await
        .expect("create");
    let ctx = Arc::new(ScheduleLoop::new(
        client.clone(),
        Arc::new(ManualClock::new(Timestamp::now())),
        "test",
    ));
    reconcile_schedule(&schedules.get("bad-tz").await.expect("get"), &ctx)
        .await
        .expect("reconcile");
    let status = schedules
        .get("bad-tz")
        .await
        .expect("get")
        .status
        .expect("status");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains("spec.timeZone") && ready.message.contains("Mars/Olympus_Mons"),
        "{}",
        ready.message
    );

    let mut bad_cron = manifest("bad-cron", "every hour");
    bad_cron["metadata"]["name"] = json!("bad-cron");
    let err = schedules
        .create(
            &PostParams::default(),
            &serde_json::from_value(bad_cron).expect("manifest"),
        )
        .await
        .expect_err("a schedule that is no 5-field cron is refused by the CRD");
    assert!(err.to_string().contains("5-field cron"), "{err}");
}

#[tokio::test]
async fn the_running_loop_reacts_to_job_status_through_its_watch() {
    let f = Fixture::new("sched-loop", HOURLY).await;
    f.clock.set(f.first_tick + SignedDuration::from_secs(20));
    let stop = tokio_util::sync::CancellationToken::new();
    // The running-step requeue is an hour, far beyond the wait below: only
    // the Job watch can make the loop react to the refine Job's end.
    let ctx = Arc::new(
        ScheduleLoop::new(f.client.clone(), f.clock.clone(), "loop")
            .with_running_requeue(Duration::from_secs(3600)),
    );
    let ns = f.namespace.clone();
    let token = stop.clone();
    let loop_task = tokio::spawn(async move {
        // Scoped to this test's namespace: the other tests' schedules have clocks of their own.
        handoff_controller::schedule::reconcile::run(ctx, Some(&ns), 4, token).await
    });
    let refine = eventually("a refine Job", Duration::from_secs(30), || async {
        Some(f.jobs("refine").await).filter(|jobs| !jobs.is_empty())
    })
    .await;
    // The loop's own writes (the Job, the status) trigger reconciles: let
    // them run out, so only the Job watch can see the refine Job end.
    let deadline = Instant::now() + Duration::from_secs(30);
    while phase(&f.schedules.get(&f.name).await.expect("get")) != Some(SchedulePhase::Refining)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    f.finish(&refine[0].metadata.name.clone().unwrap_or_default(), true)
        .await;
    let brainstorm = eventually("a brainstorm Job", Duration::from_secs(30), || async {
        Some(f.jobs("brainstorm").await).filter(|jobs| !jobs.is_empty())
    })
    .await;
    assert_eq!(
        brainstorm.len(),
        1,
        "the Job watch released brainstorm without a manual reconcile"
    );
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), loop_task).await;
}
