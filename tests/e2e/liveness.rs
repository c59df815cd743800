//! Liveness: the controller's `/healthz` is progress (a loop with pending
//! work and none done for `--wedged-after`, 8 s in the e2e installation,
//! answers 503), and the kubelet acts on it. PostgreSQL is stalled — the
//! postmaster and each backend SIGSTOPped (see [`Stalled`]), and SIGCONTed
//! by a guard on drop even when the test panics — and a write
//! gives the mirror pending work: the leading Pod's `/healthz` answers
//! 503, the kubelet restarts its container (the restart count rises, the
//! Events say the liveness probe failed). Once PostgreSQL resumes, the
//! controller recovers: every replica ready again, `/healthz` 200, the
//! pending write mirrored.
//!
//! The stall is of the suite's one PostgreSQL: this scenario holds
//! [`UNDISTURBED`] exclusively, and every scenario that needs the
//! installation as installed holds it shared, so none runs while
//! PostgreSQL is stopped.

use std::time::Duration;

use handoff_core::api::Handoff;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::harness::{SYSTEM, UNDISTURBED, e2e, namespace};
use crate::install::{installed, pods_of};
use crate::leader::leadership;
use handoff_testkit::proc_stat;
use handoff_testkit::wait::eventually;

use crate::writes::{create_handoff, first_container, lease_holder, pod};

/// The controller's metrics and health port (config/manager).
const HEALTH_PORT: u16 = 8080;

/// PostgreSQL stopped until dropped: the postmaster (so it forks no
/// more) and then every process it forked. Not its process group: each
/// backend calls `setsid()`, so a `killpg` stops the postmaster alone and
/// the connections already open (the controller's pool) keep answering.
struct Stalled {
    stopped: Vec<Pid>,
}

impl Stalled {
    fn postgres() -> Self {
        let postmaster = i32::try_from(e2e().postgres_pid).unwrap_or_else(|e| panic!("pid: {e}"));
        let mut stalled = Self {
            stopped: Vec::new(),
        };
        stalled.stop(postmaster);
        for child in children_of(postmaster) {
            stalled.stop(child);
        }
        assert!(
            stalled.stopped.len() > 1,
            "PostgreSQL's backends were found and stopped: {:?}",
            stalled.stopped
        );
        stalled
    }

    /// SIGSTOPs `pid` and waits until it is stopped (signals are delivered
    /// asynchronously); it is SIGCONTed on drop either way.
    fn stop(&mut self, pid: i32) {
        let process = Pid::from_raw(pid);
        kill(process, Signal::SIGSTOP).unwrap_or_else(|e| panic!("SIGSTOP {pid}: {e}"));
        self.stopped.push(process);
        let stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        for _ in 0..100 {
            if proc_stat(&stat()).is_some_and(|(state, _)| state == 'T') {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("PostgreSQL's process {pid} did not stop: {}", stat())
    }
}

impl Drop for Stalled {
    fn drop(&mut self) {
        for process in self.stopped.iter().rev() {
            if let Err(e) = kill(*process, Signal::SIGCONT) {
                eprintln!("SIGCONT PostgreSQL's process {process}: {e}");
            }
        }
    }
}

/// The processes whose parent is `parent` (from /proc).
fn children_of(parent: i32) -> Vec<i32> {
    let entries = std::fs::read_dir("/proc").unwrap_or_else(|e| panic!("/proc: {e}"));
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| proc_stat(&stat))
                .is_some_and(|(_, ppid)| ppid == parent)
        })
        .collect()
}

/// `/healthz` of Pod `name`, from the host (Pod IPs are routed).
async fn healthz(name: &str) -> Result<u16, String> {
    get(name, "/healthz").await.map(|(code, _)| code)
}

/// `GET path` of Pod `name`'s health port: the status code and response.
async fn get(name: &str, path: &'static str) -> Result<(u16, String), String> {
    let pod = pod(name).await?;
    let ip = pod
        .status
        .and_then(|s| s.pod_ip)
        .ok_or(format!("{name} has no IP"))?;
    let addr = format!("{ip}:{HEALTH_PORT}");
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        handoff_testkit::http::get(&addr, path),
    )
    .await
    .map_err(|_| format!("GET {path} of {addr}: no answer within 5 s"))?
    .map_err(|e| format!("GET {path} of {addr}: {e:#}"))?;
    Ok((answer.status, answer.body))
}

/// The loop gauges of Pod `name`'s `/metrics`, for a failure's message.
async fn loops(name: &str) -> String {
    let gauges = match get(name, "/metrics").await {
        Ok((_, metrics)) => metrics
            .lines()
            .filter(|l| !l.starts_with('#') && (l.contains("loop_") || l.contains("mirror")))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => e,
    };
    gauges
        + &String::from_utf8_lossy(
            &crate::harness::kubectl(&["-n", SYSTEM, "logs", "--tail=30", name]).stdout,
        )
}

/// Pure: whether `events` say the kubelet restarts a container for its
/// failed liveness probe (`Unhealthy`: "Liveness probe failed…", and
/// `Killing`: "…failed liveness probe, will be restarted").
fn restarted_for_liveness(events: &[Event]) -> bool {
    let said = |reason: &str, needle: &str| {
        events.iter().any(|e| {
            e.reason.as_deref() == Some(reason)
                && e.message.as_deref().is_some_and(|m| m.contains(needle))
        })
    };
    said("Unhealthy", "Liveness probe failed") && said("Killing", "failed liveness probe")
}

async fn pod_events(name: &str) -> Result<Vec<Event>, String> {
    let events: Api<Event> = Api::namespaced(e2e().env.client().await, SYSTEM);
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map(|l| l.items)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_postgres_wedges_the_leader_the_kubelet_restarts_it_and_it_recovers() {
    let _exclusive = UNDISTURBED.write().await;
    installed();
    let leading = leadership().await;
    let leader = leading.leader;
    let healthy = eventually("the leader's /healthz", Duration::from_secs(60), || {
        healthz(&leader)
    })
    .await;
    assert_eq!(healthy, 200, "healthy before the stall");
    let restarts = pod(&leader)
        .await
        .ok()
        .as_ref()
        .and_then(first_container)
        .map_or(0, |(_, restarts, _)| restarts);
    let ns = namespace("e2e-liveness").await;

    let stalled = Stalled::postgres();
    let created = create_handoff(&ns, "liveness#1", "mirrored once PostgreSQL resumes").await;
    eventually(
        "the leader's /healthz answers 503",
        Duration::from_secs(90),
        || async {
            match healthz(&leader).await {
                Ok(503) => Ok(()),
                other => Err(format!("{other:?}; {}", loops(&leader).await)),
            }
        },
    )
    .await;
    eventually(
        "the kubelet restarts the leader's container for its liveness probe",
        Duration::from_secs(90),
        || async {
            let now = pod(&leader)
                .await
                .ok()
                .as_ref()
                .and_then(first_container)
                .map_or(0, |(_, restarts, _)| restarts);
            let events = pod_events(&leader).await?;
            (now > restarts && restarted_for_liveness(&events))
                .then_some(())
                .ok_or(format!(
                    "restartCount {now} (was {restarts}); events {:?}",
                    events
                        .iter()
                        .map(|e| (e.reason.clone(), e.message.clone()))
                        .collect::<Vec<_>>()
                ))
        },
    )
    .await;
    drop(stalled);

    let api: Api<Handoff> = Api::namespaced(e2e().env.client().await, &ns);
    let db = crate::writes::mirror_db().await;
    eventually(
        "the controller recovered: ready, healthy, the pending write mirrored",
        Duration::from_secs(240),
        || async {
            let pods = pods_of("handoff-controller").await;
            let unready: Vec<String> = pods
                .iter()
                .filter(|p| !first_container(p).is_some_and(|(_, _, ready)| ready))
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            if !unready.is_empty() {
                return Err(format!("not ready: {unready:?}"));
            }
            let (holder, _) = lease_holder().await?;
            match healthz(&holder).await {
                Ok(200) => {}
                other => return Err(format!("the leader {holder}'s /healthz: {other:?}")),
            }
            let rows = handoff_testkit::mirror::mirrored_rows(&db, &ns)
                .await
                .map_err(|e| e.to_string())?;
            let row = rows.get("liveness#1").cloned();
            let uid = created.metadata.uid.clone().unwrap_or_default();
            (row == Some((1, uid)))
                .then_some(())
                .ok_or(format!("the row: {row:?}"))
        },
    )
    .await;
    let counted = api
        .get(&handoff_core::api::naming::name_for_key("liveness#1"))
        .await
        .unwrap_or_else(|e| panic!("the handoff: {e}"));
    assert_eq!(handoff_core::handoff::view::revision(&counted), Some(1));
}

#[test]
fn a_liveness_restart_is_both_the_probe_failing_and_the_kill() {
    let event = |reason: &str, message: &str| Event {
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..Event::default()
    };
    let unhealthy = event(
        "Unhealthy",
        "Liveness probe failed: HTTP probe failed with statuscode: 503",
    );
    let killing = event(
        "Killing",
        "Container controller failed liveness probe, will be restarted",
    );
    let readiness = event(
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
    );
    let deleted = event("Killing", "Stopping container controller");
    for (events, want) in [
        (vec![unhealthy.clone(), killing.clone()], true),
        (vec![unhealthy.clone()], false),
        (vec![killing.clone()], false),
        (vec![readiness, deleted], false),
        (vec![], false),
    ] {
        assert_eq!(restarted_for_liveness(&events), want, "{events:?}");
    }
}
