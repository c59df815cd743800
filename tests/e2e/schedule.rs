//! Schedule: `examples/brainstorm-schedule.yaml` with a tick due within a
//! minute (`* * * * *`; the first tick is the first minute boundary after
//! the schedule's creation, so the wait is under 60 s) and its agent
//! containers running the scripted agent (`hack/e2e/agent/`), the rest of
//! its Job templates as shipped ([`as_scheduled`]). The installed
//! controller, on the real clock, creates the refine Job; the Job
//! controller and the kubelet really run it (as `agent-refine`, through the
//! bridge's Service name); once it completes, the barrier releases and the
//! brainstorm Job runs (as `agent-brainstorm`), with the project's open
//! handoffs, listed after the refine, inlined in its goal.
//!
//! Staleness: the refine's goal leaves to the agent which handoffs are
//! stale ("its issue is closed or resolved…"), and a scripted agent has no
//! judgement, so the stale handoff is one whose body says its work is done
//! and the refine script deletes it by key; the live one says its work is
//! open and is kept. Staleness by age (`handoffTTL`, the controller's own
//! grooming) needs a timestamp older than the TTL, which the apiserver and
//! the controller set and a test cannot backdate: not covered here.

use std::collections::BTreeSet;
use std::time::Duration;

use handoff_testkit::spec::{Fields, spec};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use kube::{Client, Config};
use serde_json::{Value, json};

use handoff_core::api::{BrainstormSchedule, Handoff, JobResult, SchedulePhase};
use handoff_core::names::{ROLE_LABEL, SCHEDULE_LABEL};
use handoff_kube::store::HandoffStore;

use crate::agent::{goal, log_lines, step};
use crate::harness::{SYSTEM, UNDISTURBED, e2e, kubectl, kubectl_stdin, must};
use crate::images::AGENT_IMAGE;
use crate::install::{diagnose, installed};
use handoff_testkit::wait::eventually;

/// What the e2e schedule changes in the example.
pub(crate) struct Scheduled<'a> {
    /// The schedule's name.
    pub(crate) name: &'a str,
    /// Its project.
    pub(crate) project: &'a str,
    /// The cron expression (due soon).
    pub(crate) schedule: &'a str,
    /// The refine agent's script.
    pub(crate) refine_script: String,
    /// The brainstorm agent's script.
    pub(crate) brainstorm_script: String,
}

/// Pure: the example schedule with the given name, project and cron
/// expression, and each step's agent container running the scripted agent
/// with its script; every other field (time zone, deadline, TTL, the Job
/// templates' accounts, tokens, security contexts, env) as shipped.
pub(crate) fn as_scheduled(mut schedule: Value, scheduled: &Scheduled<'_>) -> Value {
    schedule["metadata"]["name"] = json!(scheduled.name);
    let spec = &mut schedule["spec"];
    spec["project"] = json!(scheduled.project);
    spec["schedule"] = json!(scheduled.schedule);
    for (step, script) in [
        ("refine", &scheduled.refine_script),
        ("brainstorm", &scheduled.brainstorm_script),
    ] {
        let pod = &mut spec[step]["jobTemplate"]["spec"]["template"]["spec"];
        for container in pod["containers"].as_array_mut().into_iter().flatten() {
            container["image"] = json!(AGENT_IMAGE);
            container["imagePullPolicy"] = json!("Never");
            container["command"] = json!(["/agent"]);
            container["args"] = json!([]);
            let mut env: Vec<Value> = container["env"].as_array().cloned().unwrap_or_default();
            env.retain(|var| var["name"] != "E2E_SCRIPT");
            env.push(json!({"name": "E2E_SCRIPT", "value": script}));
            container["env"] = json!(env);
        }
    }
    schedule
}

/// A client acting as `user` (the admin impersonating it), so seeded
/// handoffs are written, and attributed, as an agent would write them.
async fn client_as(user: &str) -> Client {
    let mut config = Config::from_custom_kubeconfig(
        e2e().env.kubeconfig().clone(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("the e2e kubeconfig: {e}"));
    config.auth_info.impersonate = Some(user.into());
    Client::try_from(config).unwrap_or_else(|e| panic!("a client as {user}: {e}"))
}

fn writer(role: &str) -> String {
    format!("system:serviceaccount:{SYSTEM}:agent-{role}")
}

/// The Jobs of the schedule's step `role`.
async fn jobs_of(jobs: &Api<Job>, schedule: &str, role: &str) -> Vec<Job> {
    jobs.list(
        &ListParams::default().labels(&format!("{SCHEDULE_LABEL}={schedule},{ROLE_LABEL}={role}")),
    )
    .await
    .unwrap_or_else(|e| panic!("list the {role} Jobs: {e}"))
    .items
}

fn job_log(job: &str) -> Vec<Value> {
    log_lines(&crate::agent::job_log(job))
}

#[tokio::test]
async fn a_due_tick_runs_the_refine_job_then_the_brainstorm_job_with_the_open_keys() {
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    let (name, project) = ("shop-e2e", "shop-e2e");
    let stale = "shop-e2e/issue#1";
    let live = "shop-e2e/issue#2";
    let refine_key = format!("{SYSTEM}/{name}/refine");
    let brainstorm_key = format!("{SYSTEM}/{name}/brainstorm");

    // Written before the tick, by the implement agent.
    let seeded = HandoffStore::new(client_as(&writer("implement")).await, SYSTEM);
    for (key, body) in [
        (
            stale,
            "## State\nDone: issue #1 is closed, its fix merged. Nothing is left.\n",
        ),
        (
            live,
            "## Next\nIssue #2 is open: wire --format into the CLI.\n",
        ),
    ] {
        seeded
            .write(
                &spec(key)
                    .project(project)
                    .kind("issue")
                    .body(body)
                    .by(writer("implement")),
            )
            .await
            .unwrap_or_else(|e| panic!("seed {key}: {e}"));
    }

    let refine_script = json!([
        {"tool": "list_handoffs", "args": {"project": project}},
        {"tool": "delete_handoff", "args": {"handoff_key": stale}},
        {"tool": "write_handoff", "args": {"handoff_key": refine_key, "project": project,
         "body": format!("## Refine\nDeleted {stale} (done); kept {live} (open).\n")}},
    ]);
    let brainstorm_script = json!([
        {"tool": "list_handoffs", "args": {"project": project}},
        {"tool": "write_handoff", "args": {"handoff_key": brainstorm_key, "project": project,
         "body": format!("## Proposals\n1. Continue {live}.\n")}},
    ]);
    let example: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            crate::common::kubectl::root().join("examples/brainstorm-schedule.yaml"),
        )
        .unwrap_or_else(|e| panic!("the example schedule: {e}")),
    )
    .unwrap_or_else(|e| panic!("the example schedule is not YAML: {e}"));
    let manifest = as_scheduled(
        example,
        &Scheduled {
            name,
            project,
            schedule: "* * * * *",
            refine_script: refine_script.to_string(),
            brainstorm_script: brainstorm_script.to_string(),
        },
    );
    let applied = kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        &manifest.to_string(),
    );
    let warnings = String::from_utf8_lossy(&applied.stderr).into_owned();
    must(applied, "apply the schedule");
    assert!(!warnings.contains("PodSecurity"), "{warnings}");

    let client = e2e().env.client().await;
    let schedules: Api<BrainstormSchedule> = Api::namespaced(client.clone(), SYSTEM);
    let jobs: Api<Job> = Api::namespaced(client.clone(), SYSTEM);
    let done = eventually(
        "the schedule's first cycle ends",
        Duration::from_secs(240),
        || {
            let schedules = schedules.clone();
            async move {
                let s = schedules.get(name).await.map_err(|e| e.to_string())?;
                let status = s.status.clone().unwrap_or_default();
                match &status.last_cycle {
                    Some(cycle) if cycle.result.is_some() => Ok(s),
                    _ => Err(format!("{status:?}")),
                }
            }
        },
    )
    .await;
    let status = done.status.clone().unwrap_or_default();
    let cycle = status
        .last_cycle
        .clone()
        .unwrap_or_else(|| panic!("{status:?}"));
    if cycle.result != Some(JobResult::Succeeded) {
        let refine_log = kubectl(&["-n", SYSTEM, "logs", &format!("job/{}", cycle.refine.job)]);
        panic!(
            "the cycle failed: {status:?}\nthe refine agent's log:\n{}{}\n{}",
            String::from_utf8_lossy(&refine_log.stdout),
            String::from_utf8_lossy(&refine_log.stderr),
            diagnose()
        );
    }
    assert_eq!(status.phase, Some(SchedulePhase::Idle), "{status:?}");
    assert_eq!(
        cycle.refine.result,
        Some(JobResult::Succeeded),
        "{status:?}"
    );
    let brainstorm_run = cycle
        .brainstorm
        .clone()
        .unwrap_or_else(|| panic!("no brainstorm step: {status:?}"));
    assert_eq!(brainstorm_run.result, Some(JobResult::Succeeded));
    assert_eq!(
        status.last_schedule_time.as_ref().map(|t| t.0),
        Some(cycle.tick.0)
    );

    // The Jobs ran to completion, the brainstorm only after the refine.
    let refine_jobs = jobs_of(&jobs, name, "refine").await;
    let brainstorm_jobs = jobs_of(&jobs, name, "brainstorm").await;
    assert_eq!(refine_jobs.len(), 1, "one refine Job per tick");
    assert_eq!(brainstorm_jobs.len(), 1, "one brainstorm Job per tick");
    let (refine, brainstorm) = (&refine_jobs[0], &brainstorm_jobs[0]);
    assert_eq!(
        refine.metadata.name.as_deref(),
        Some(cycle.refine.job.as_str())
    );
    assert_eq!(
        brainstorm.metadata.name.as_deref(),
        Some(brainstorm_run.job.as_str())
    );
    let refine_status = refine.status.clone().unwrap_or_default();
    assert_eq!(refine_status.succeeded, Some(1), "{refine_status:?}");
    assert_eq!(
        brainstorm.status.as_ref().and_then(|s| s.succeeded),
        Some(1)
    );
    let refine_done = refine_status
        .completion_time
        .unwrap_or_else(|| panic!("the refine Job has no completionTime"))
        .0;
    let brainstorm_created = brainstorm
        .metadata
        .creation_timestamp
        .clone()
        .unwrap_or_else(|| panic!("no creationTimestamp"))
        .0;
    assert!(
        brainstorm_created >= refine_done,
        "the barrier: brainstorm created {brainstorm_created}, refine completed {refine_done}"
    );

    // What the agents saw: the refine listed both and deleted the stale one.
    let refine_log = job_log(&cycle.refine.job);
    let refine_goal = goal(&refine_log);
    assert!(
        refine_goal.contains(&format!("refine (grooming) agent for project {project}")),
        "{refine_goal}"
    );
    let listed: BTreeSet<&str> = step(&refine_log, 0)["result"]["handoffs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["handoff_key"].as_str())
        .collect();
    assert_eq!(listed, BTreeSet::from([stale, live]), "{refine_log:?}");
    assert_eq!(
        step(&refine_log, 1)["result"]["deleted"],
        true,
        "{refine_log:?}"
    );
    assert_eq!(step(&refine_log, 2)["is_error"], false, "{refine_log:?}");

    // The brainstorm's goal (the first line it logs) lists the open keys.
    let brainstorm_log = job_log(&brainstorm_run.job);
    let open = goal(&brainstorm_log);
    assert!(open.contains(&format!("key \"{live}\"")), "{open}");
    assert!(open.contains(&format!("key \"{refine_key}\"")), "{open}");
    assert!(
        !open.contains(&format!("key \"{stale}\"")),
        "the deleted key is not open: {open}"
    );
    assert!(open.contains("Open handoffs of shop-e2e (2)"), "{open}");
    assert_eq!(
        step(&brainstorm_log, 1)["is_error"],
        false,
        "{brainstorm_log:?}"
    );

    // The handoffs left, and who wrote them.
    let handoffs: Api<Handoff> = Api::namespaced(client, SYSTEM);
    let left: Vec<(String, String)> = handoffs
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list handoffs: {e}"))
        .items
        .into_iter()
        .filter(|h| h.spec.project == project)
        .map(|h| (h.spec.handoff_key, h.spec.created_by.unwrap_or_default()))
        .collect();
    let left: BTreeSet<(String, String)> = left.into_iter().collect();
    let want = BTreeSet::from([
        (live.to_owned(), writer("implement")),
        (refine_key.clone(), writer("refine")),
        (brainstorm_key.clone(), writer("brainstorm")),
    ]);
    assert_eq!(left, want);

    // And the controller's PostgreSQL mirror: the deleted row is gone too.
    let pg = handoff_testkit::connect_postgres(&e2e().postgres_url)
        .await
        .unwrap_or_else(|e| panic!("the mirror's database: {e:#}"));
    eventually(
        "the mirror holds the handoffs left",
        Duration::from_secs(60),
        || {
            let (pg, want) = (&pg, &want);
            async move {
                let rows = pg
                    .query(
                        "SELECT handoff_key, created_by FROM handoffs \
                         WHERE namespace = $1 AND project = $2",
                        &[&SYSTEM, &project],
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                let got: BTreeSet<(String, String)> =
                    rows.iter().map(|r| (r.get(0), r.get(1))).collect();
                (got == *want).then_some(()).ok_or(format!("{got:?}"))
            }
        },
    )
    .await;
}

#[test]
fn the_example_schedule_changes_only_its_timing_and_agent_containers() {
    let container = json!({"name": "agent", "image": "ghcr.io/example/agent:latest",
        "args": ["--goal-env", "HANDOFF_GOAL"],
        "env": [{"name": "HANDOFF_MCP_URL", "value": "http://b/mcp"}],
        "securityContext": {"allowPrivilegeEscalation": false}});
    let step = json!({"jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": {
        "serviceAccountName": "agent-refine", "containers": [container]}}}}});
    let example = json!({"kind": "BrainstormSchedule", "metadata": {"name": "shop-daily"},
        "spec": {"project": "shop", "schedule": "0 6 * * 1-5", "timeZone": "Europe/Berlin",
                 "handoffTTL": "14d", "refine": step, "brainstorm": step}});
    let out = as_scheduled(
        example.clone(),
        &Scheduled {
            name: "n",
            project: "p",
            schedule: "* * * * *",
            refine_script: "[1]".into(),
            brainstorm_script: "[2]".into(),
        },
    );
    assert_eq!(out["metadata"]["name"], "n");
    assert_eq!(out["spec"]["project"], "p");
    assert_eq!(out["spec"]["schedule"], "* * * * *");
    for (step, script) in [("refine", "[1]"), ("brainstorm", "[2]")] {
        let pod = &out["spec"][step]["jobTemplate"]["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(c["image"], AGENT_IMAGE);
        assert_eq!(c["imagePullPolicy"], "Never");
        assert_eq!(c["command"], json!(["/agent"]));
        assert_eq!(c["args"], json!([]));
        assert_eq!(
            c["env"],
            json!([{"name": "HANDOFF_MCP_URL", "value": "http://b/mcp"},
                   {"name": "E2E_SCRIPT", "value": script}])
        );
        assert_eq!(c["securityContext"], container["securityContext"]);
        assert_eq!(pod["serviceAccountName"], "agent-refine");
    }
    for field in ["timeZone", "handoffTTL"] {
        assert_eq!(out["spec"][field], example["spec"][field], "{field}");
    }
}
