//! The benchmark's control plane (`handoff_testkit::bench::plane`): etcd
//! runs with the quota the scaling benchmark is sized for, and the
//! apiserver's count of writes (what "apiserver writes per agent write" is
//! computed from) sees each write where it belongs.

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::bench::{self, ETCD_QUOTA_BYTES, Writes, apiserver_writes};
use handoff_testkit::http::{metric, scrape};
use handoff_testkit::spec::{Fields, spec};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

#[tokio::test]
async fn the_bench_plane_has_its_etcd_quota_and_counts_writes() {
    let plane = bench::plane()
        .await
        .unwrap_or_else(|e| panic!("the benchmark's control plane could not start: {e:#}"));
    let etcd = scrape(&format!("127.0.0.1:{}", plane.ports().0))
        .await
        .expect("etcd's metrics");
    assert_eq!(
        metric(&etcd, "etcd_server_quota_backend_bytes"),
        ETCD_QUOTA_BYTES as f64
    );

    let client = plane.client().await.expect("an admin client");
    let before = apiserver_writes(&client)
        .await
        .expect("the apiserver's metrics");
    let key = "bench/plane#1";
    let name = name_for_key(key);
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), "default");
    let handoff = Handoff::new(
        &name,
        spec(key).project("bench").body("counted").by("bench"),
    );
    let params = PatchParams::apply("bench-test").force();
    handoffs
        .patch(&name, &params, &Patch::Apply(&handoff))
        .await
        .expect("apply");
    handoffs
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"revision": 1}})),
        )
        .await
        .expect("status");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some("bench-".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Handoff".into()),
            name: Some(name.clone()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        reason: Some("Counted".into()),
        ..Default::default()
    };
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("event");
    let after = apiserver_writes(&client)
        .await
        .expect("the apiserver's metrics");

    // Other resources (the apiserver's own Leases) may be written meanwhile.
    let counted = after.since(&before);
    assert_eq!(
        Writes {
            other: 0.0,
            ..counted
        },
        Writes {
            spec: 1.0,
            status: 1.0,
            events: 1.0,
            other: 0.0,
        }
    );
}
