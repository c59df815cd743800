//! Garbage collection and namespaces: what the controller-manager does,
//! which the envtest-style plane alone never did. Deleting a namespace
//! that holds handoffs (counted and mirrored), an offer and a schedule
//! finalizes — the namespace controller deletes its content, nothing
//! holds it back, the namespace is gone — and the controller, seeing the
//! handoffs go, deletes the namespace's mirror rows and their history.
//! And the only objects the controller creates with an ownerReference, a
//! schedule's Jobs (`handoff_core::schedule::jobs`), really run, and are
//! garbage-collected with their Pods when their schedule is deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use handoff_core::api::{BrainstormSchedule, Handoff, HandoffOffer};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::harness::{UNDISTURBED, e2e, namespace};
use crate::images::HANDOFF;
use crate::install::installed;
use crate::writes::{MIRROR_TABLES, create_handoff, mirror_db, rows_in};
use handoff_testkit::wait::eventually;

/// A Job template whose Pod runs the project's image to completion.
fn job_template() -> Value {
    json!({"spec": {"backoffLimit": 0, "template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "agent", "image": HANDOFF, "imagePullPolicy": "Never",
                        "args": ["--version"]}]}}}})
}

/// Pure: a schedule of project `shop` on `cron`, running [`job_template`].
fn schedule(name: &str, cron: &str) -> BrainstormSchedule {
    serde_json::from_value(json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
        "metadata": {"name": name},
        "spec": {"project": "shop", "schedule": cron,
                 "refine": {"jobTemplate": job_template()},
                 "brainstorm": {"jobTemplate": job_template()}}
    }))
    .unwrap_or_else(|e| panic!("the schedule: {e}"))
}

/// Pure: the names of `jobs` whose controller owner has `uid`.
fn owned_by(jobs: &[Job], uid: &str) -> BTreeSet<String> {
    jobs.iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .map(ResourceExt::name_any)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_with_handoffs_an_offer_and_a_schedule_finalizes_and_forgets_its_rows()
{
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    let client = e2e().env.client().await;
    let ns = namespace("e2e-ns").await;
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    for key in ["ns#1", "ns#2", "ns#3"] {
        create_handoff(&ns, key, "first").await;
    }
    // Revised once counted: revision 2, so the history holds 4 revisions.
    eventually("ns#1 counted", Duration::from_secs(60), || async {
        let h = handoffs
            .get(&handoff_core::api::naming::name_for_key("ns#1"))
            .await
            .map_err(|e| e.to_string())?;
        let revision = handoff_core::handoff::view::revision(&h);
        (revision == Some(1))
            .then_some(())
            .ok_or(format!("revision {revision:?}"))
    })
    .await;
    let revised = handoffs
        .patch(
            &handoff_core::api::naming::name_for_key("ns#1"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"body": "revised"}})),
        )
        .await
        .unwrap_or_else(|e| panic!("revise ns#1: {e}"));
    assert!(revised.spec.body == "revised");
    let offers: Api<HandoffOffer> = Api::namespaced(client.clone(), &ns);
    let offer: HandoffOffer = serde_json::from_value(json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "HandoffOffer",
        "metadata": {"name": "to-tester"},
        "spec": {"project": "shop", "to": "tester", "fromKey": "ns#2", "body": "story 2"}
    }))
    .unwrap_or_else(|e| panic!("the offer: {e}"));
    offers
        .create(&PostParams::default(), &offer)
        .await
        .unwrap_or_else(|e| panic!("create the offer: {e}"));
    let schedules: Api<BrainstormSchedule> = Api::namespaced(client.clone(), &ns);
    schedules
        .create(&PostParams::default(), &schedule("daily", "0 6 * * *"))
        .await
        .unwrap_or_else(|e| panic!("create the schedule: {e}"));

    let db = mirror_db().await;
    eventually(
        "the handoffs counted and mirrored (4 revisions), the schedule's status written",
        Duration::from_secs(90),
        || async {
            let mirrored = handoff_testkit::mirror::converged(&handoffs, &db, &ns).await;
            let history = rows_in(&db, "handoff_revisions", &ns).await?;
            let status = schedules
                .get("daily")
                .await
                .map_err(|e| e.to_string())?
                .status
                .is_some();
            (mirrored == Some(3) && history == 4 && status)
                .then_some(())
                .ok_or(format!(
                    "mirror {mirrored:?}, history {history}, schedule status {status}"
                ))
        },
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete the namespace: {e}"));
    eventually(
        "the namespace gone and its mirror rows with it",
        Duration::from_secs(120),
        || async {
            let left = namespaces.get_opt(&ns).await.map_err(|e| e.to_string())?;
            let mut rows = Vec::new();
            for table in MIRROR_TABLES {
                rows.push((table, rows_in(&db, table, &ns).await?));
            }
            let phase = left
                .as_ref()
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.phase.clone());
            (left.is_none() && rows.iter().all(|(_, n)| *n == 0))
                .then_some(())
                .ok_or(format!("namespace phase {phase:?}, rows {rows:?}"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedules_jobs_run_and_are_garbage_collected_with_it() {
    let _undisturbed = UNDISTURBED.read().await;
    installed();
    let client = e2e().env.client().await;
    let ns = namespace("e2e-gc").await;
    let schedules: Api<BrainstormSchedule> = Api::namespaced(client.clone(), &ns);
    let created = schedules
        .create(&PostParams::default(), &schedule("minutely", "* * * * *"))
        .await
        .unwrap_or_else(|e| panic!("create the schedule: {e}"));
    let uid = created.meta().uid.clone().unwrap_or_default();

    // The next minute's tick starts refine; its Job runs the image to
    // completion, and the brainstorm Job follows.
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let owned = eventually(
        "the schedule's refine and brainstorm Jobs, the refine one complete",
        Duration::from_secs(150),
        || async {
            let list = jobs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items;
            let owned = owned_by(&list, &uid);
            let complete = list.iter().any(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.succeeded)
                    .is_some_and(|n| n >= 1)
            });
            (owned.len() >= 2 && complete)
                .then_some(owned.clone())
                .ok_or(format!("owned {owned:?}, one complete: {complete}"))
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let job_pods: BTreeSet<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list the pods: {e}"))
        .items
        .iter()
        .filter(|p| p.owner_references().iter().any(|o| o.kind == "Job"))
        .map(ResourceExt::name_any)
        .collect();
    assert!(!job_pods.is_empty(), "the Jobs' Pods ran");

    schedules
        .delete("minutely", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete the schedule: {e}"));
    eventually(
        "the schedule's Jobs and their Pods garbage-collected",
        Duration::from_secs(120),
        || async {
            let mut left = Vec::new();
            for job in &owned {
                if jobs
                    .get_opt(job)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_some()
                {
                    left.push(format!("job/{job}"));
                }
            }
            for pod in &job_pods {
                if pods
                    .get_opt(pod)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_some()
                {
                    left.push(format!("pod/{pod}"));
                }
            }
            left.is_empty()
                .then_some(())
                .ok_or(format!("left: {left:?}"))
        },
    )
    .await;
}

#[test]
fn only_jobs_controlled_by_the_owner_count_as_owned() {
    let job = |name: &str, owner: Value| -> Job {
        serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": owner}}))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let reference = |uid: &str, controller: bool| {
        json!([{"apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
                "name": "s", "uid": uid, "controller": controller}])
    };
    let jobs = [
        job("refine", reference("u1", true)),
        job("brainstorm", reference("u1", true)),
        job("other-schedule", reference("u2", true)),
        job("merely-owned", reference("u1", false)),
        job("unowned", json!([])),
    ];
    assert_eq!(
        owned_by(&jobs, "u1"),
        BTreeSet::from(["brainstorm".to_owned(), "refine".to_owned()])
    );
    assert!(owned_by(&jobs, "u3").is_empty());
}
