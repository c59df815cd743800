//! Leader: the two controller replicas of config/manager share the Lease
//! `handoff-controller`; only its holder reconciles. The leading Pod is
//! killed hard in the middle of a stream of writes — its container's
//! process SIGKILLed through the node's containerd (no graceful release
//! of the Lease), and the Pod deleted at once, so the kubelet does not
//! restart it under the same name (a replica renews a Lease that names it
//! at once) — and the other Pod must take the Lease (one transition more)
//! and reconcile every write: none in flight is lost, each handoff ends
//! counted (its status speaks for its content, `handoff_core::handoff::view::counted`)
//! and the namespace's mirror holds exactly those handoffs.
//!
//! The node is cordoned while the leader dies ([`Cordoned`]): the kubelet
//! may still restart the killed container before the deletion reaches it,
//! and that container, stopped gracefully then, releases the Lease at
//! once; a replacement Pod already running could then take it before the
//! standby. With no replacement scheduled, the standby is the only other
//! candidate, as with a node lost.

use std::time::Duration;

use handoff_core::api::Handoff;
use kube::api::Api;

use crate::harness::{SYSTEM, UNDISTURBED, e2e, kubectl, must, namespace, with_cluster};
use crate::install::{installed, pods_of};
use crate::writes::{create_handoff, first_container, lease_holder, mirror_db};
use handoff_testkit::wait::eventually;

/// How many handoffs the stream writes, and after how many the leader dies.
const WRITES: usize = 30;
const KILL_AFTER: usize = 10;

/// The leading controller Pod and the other one, both ready, and the
/// Lease's transitions so far.
pub(crate) struct Leadership {
    pub(crate) leader: String,
    pub(crate) standby: String,
    pub(crate) transitions: i32,
}

/// Waits until both controller replicas are ready and one holds the Lease.
pub(crate) async fn leadership() -> Leadership {
    eventually(
        "two ready controller Pods, one holding the Lease",
        Duration::from_secs(180),
        || async {
            let (leader, transitions) = lease_holder().await?;
            let ready: Vec<String> = pods_of("handoff-controller")
                .await
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| first_container(p).is_some_and(|(_, _, ready)| ready))
                .filter_map(|p| p.metadata.name)
                .collect();
            let standby = ready.iter().find(|name| **name != leader).cloned();
            match (ready.contains(&leader), standby) {
                (true, Some(standby)) => Ok(Leadership {
                    leader,
                    standby,
                    transitions,
                }),
                _ => Err(format!("holder {leader}, ready {ready:?}")),
            }
        },
    )
    .await
}

/// The node cordoned (no new Pod scheduled) until dropped, even when the
/// test panics.
struct Cordoned {
    node: String,
}

impl Cordoned {
    fn node(node: &str) -> Self {
        must(kubectl(&["cordon", node]), "cordon the node");
        Self {
            node: node.to_owned(),
        }
    }
}

impl Drop for Cordoned {
    fn drop(&mut self) {
        let _ = kubectl(&["uncordon", &self.node]);
    }
}

/// SIGKILLs the first container of Pod `name` through the node's
/// containerd (`ctr tasks kill`).
pub(crate) async fn sigkill_container(name: &str) {
    let pod = crate::writes::pod(name)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (id, _, _) = first_container(&pod).unwrap_or_else(|| panic!("{name} has no container"));
    with_cluster(|c| c.ctr(&["tasks", "kill", "-s", "SIGKILL", &id]))
        .unwrap_or_else(|e| panic!("SIGKILL {name}'s container {id}: {e:#}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_the_lease_from_a_killed_leader_and_no_write_in_flight_is_lost() {
    let _exclusive = UNDISTURBED.write().await;
    installed();
    let before = leadership().await;
    let ns = namespace("e2e-leader").await;

    let (progress, mut written) = tokio::sync::mpsc::unbounded_channel();
    let stream = tokio::spawn({
        let ns = ns.clone();
        async move {
            for i in 0..WRITES {
                create_handoff(&ns, &format!("leader#{i}"), &format!("write {i}")).await;
                let _ = progress.send(i + 1);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    while written.recv().await.is_some_and(|n| n < KILL_AFTER) {}

    let cordoned = Cordoned::node(&with_cluster(|c| c.node_name().to_owned()));
    sigkill_container(&before.leader).await;
    must(
        kubectl(&[
            "-n",
            SYSTEM,
            "delete",
            "pod",
            &before.leader,
            "--grace-period=0",
            "--force",
            "--wait=false",
        ]),
        "delete the killed leader's Pod",
    );
    let mut last = KILL_AFTER;
    while let Some(n) = written.recv().await {
        last = n;
    }
    stream
        .await
        .unwrap_or_else(|e| panic!("the stream of writes failed: {e}"));
    assert_eq!(last, WRITES, "every write of the stream was accepted");

    let (holder, transitions) = eventually(
        "the standby holds the Lease",
        Duration::from_secs(90),
        || async {
            let (holder, transitions) = lease_holder().await?;
            (holder != before.leader)
                .then_some((holder.clone(), transitions))
                .ok_or(format!("still held by {holder}"))
        },
    )
    .await;
    assert_eq!(
        holder, before.standby,
        "the other replica, not a new Pod, takes over"
    );
    assert_eq!(
        transitions,
        before.transitions + 1,
        "one transition: the killed leader to the standby"
    );
    // The Deployment may replace the killed Pod again.
    drop(cordoned);

    let api: Api<Handoff> = Api::namespaced(e2e().env.client().await, &ns);
    let db = mirror_db().await;
    let uncounted = eventually(
        "every handoff of the stream counted and mirrored",
        Duration::from_secs(90),
        || async {
            let list = api
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let uncounted: Vec<String> = list
                .items
                .iter()
                .filter(|h| handoff_core::handoff::view::revision(h) != Some(1))
                .map(|h| h.spec.handoff_key.clone())
                .collect();
            let mirrored = handoff_testkit::mirror::converged(&api, &db, &ns).await;
            match (list.items.len(), uncounted.is_empty(), mirrored) {
                (WRITES, true, Some(WRITES)) => Ok(uncounted),
                (n, _, mirrored) => Err(format!(
                    "{n} handoffs, uncounted {uncounted:?}, mirror {mirrored:?}"
                )),
            }
        },
    )
    .await;
    assert!(uncounted.is_empty());
    let rows = crate::writes::rows_in(&db, "handoffs", &ns)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rows,
        i64::try_from(WRITES).unwrap_or(i64::MAX),
        "exactly one row per handoff"
    );
}
