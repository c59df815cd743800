//! What a `write_handoff` costs the apiserver, counted on the real
//! kube-apiserver with the real controller (issue 19): a new key or new
//! content is the bridge's apply plus the controller's status write — two
//! object writes, no Event for a creation — and updates share one
//! `Superseded` Event series (one create, then one update per refresh
//! interval, or at a graceful stop). And what the one-round-trip write
//! reports: created / updated / unchanged, with an identical write leaving
//! the resourceVersion where it was, before and after the controller
//! counted the content.
//!
//! Counting is by watching: the namespace's Handoffs and Events are watched
//! from before the first write; once the controller is stopped (nothing
//! can write any more) a marker object is written, and its watch event
//! proves every earlier one was delivered (a watch delivers in
//! resourceVersion order). No count depends on timing.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{apiserver_clock_past, call, drive_stdio, env, ok};
use futures::{StreamExt, TryStreamExt};
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::handoff::outcome::WriteOutcome;
use handoff_core::time::SystemClock;
use handoff_kube::store::HandoffStore;
use handoff_testkit::controller::{InProcess, Running};
use handoff_testkit::spec::{Fields, counted, spec};
use handoff_testkit::wait::eventually;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

/// An in-process controller for `namespace` writing counted Event
/// occurrences every `event_refresh` (and at its graceful stop).
fn start_controller(client: &Client, namespace: &str, event_refresh: Duration) -> Running {
    InProcess::new(namespace, "writes", Arc::new(SystemClock))
        .options(|o| o.event_refresh = event_refresh)
        .start(client.clone())
}

/// One watch event: `(type, name, resourceVersion)`, and the object.
type Observed<K> = (String, String, String, K);

/// Watches `api` from now on: every event, in order, on the receiver.
async fn watch_from_now<K>(api: Api<K>) -> tokio::sync::mpsc::UnboundedReceiver<Observed<K>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let from = api
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list has a resourceVersion");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = api
        .watch(&WatchParams::default().timeout(290), &from)
        .await
        .expect("watch");
    tokio::spawn(async move {
        let mut stream = stream.boxed();
        while let Ok(Some(event)) = stream.try_next().await {
            let (kind, object) = match event {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            };
            let seen = (
                kind.to_owned(),
                object.name_any(),
                object.resource_version().unwrap_or_default(),
                object,
            );
            if tx.send(seen).is_err() {
                return;
            }
        }
    });
    rx
}

/// Every event received until the one about `marker`, in order (events
/// about earlier markers left out: the controller counts them too).
async fn until_marker<K: std::fmt::Debug>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Observed<K>>,
    marker: &str,
) -> Vec<Observed<K>> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no watch event for {marker} within 60s: {seen:?}"))
            .unwrap_or_else(|| panic!("the watch ended before {marker}"));
        if event.1 == marker {
            return seen;
        }
        if !event.1.starts_with("marker-") {
            seen.push(event);
        }
    }
}

fn write(key: &str, body: &str) -> Value {
    call(
        "write_handoff",
        json!({"handoff_key": key, "project": "shop", "repo": "org/repo", "kind": "issue", "body": body}),
    )
}

/// `write_handoff` calls through the real bridge (one stdio process for
/// the whole plan); their outcomes.
async fn bridge_writes(ns: &str, plan: Vec<Value>) -> Vec<String> {
    let ns = ns.to_owned();
    let answers = tokio::task::spawn_blocking(move || {
        drive_stdio(env(), &ns, "implement", Value::Array(plan))
    })
    .await
    .expect("bridge");
    answers
        .iter()
        .map(|a| ok(a)["outcome"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A Handoff written after everything else, to find the end of a watch.
async fn marker(api: &Api<Handoff>, name: &str) {
    let h = Handoff::new(name, spec(name).project("marker").body("end of the count"));
    api.create(&PostParams::default(), &h)
        .await
        .expect("marker");
}

/// An Event written after everything else, to find the end of a watch.
async fn marker_event(api: &Api<Event>, namespace: &str, name: &str) {
    let e = Event {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        regarding: Some(k8s_openapi::api::core::v1::ObjectReference {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..Default::default()
        }),
        action: Some("Marker".into()),
        reason: Some("Marker".into()),
        note: Some("end of the count".into()),
        type_: Some("Normal".into()),
        event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        )),
        reporting_controller: Some("handoff.dev/test".into()),
        reporting_instance: Some("test".into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &e)
        .await
        .expect("marker Event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_write_is_two_object_writes_and_updates_share_one_event_series() {
    let env = env();
    let ns = env.namespace("writes-count").await;
    let client = env.client().await;
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let key = "acme/api#19";
    let name = name_for_key(key);
    let mut object_watch = watch_from_now(handoffs.clone()).await;
    let mut event_watch = watch_from_now(events.clone()).await;
    // Far beyond the test: counted occurrences are written at the stop.
    let refresh = Duration::from_secs(3600);

    // A new key: the bridge's apply (with its labels) and one status write.
    let controller = start_controller(&client, &ns, refresh);
    assert_eq!(
        bridge_writes(&ns, vec![write(key, "v1")]).await,
        ["created"]
    );
    counted(&handoffs, key, 1).await;
    controller.stop().await;
    marker(&handoffs, "marker-1").await;
    marker_event(&events, &ns, "marker-1").await;
    let writes = until_marker(&mut object_watch, "marker-1").await;
    let kinds: Vec<&str> = writes.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED"], "{writes:#?}");
    assert!(writes.iter().all(|w| w.1 == name));
    let created = &writes[1].3;
    let status = created.status.clone().expect("status");
    assert_eq!(
        (status.revision, status.observed_generation),
        (Some(1), Some(1))
    );
    assert_eq!(
        created.labels().get("project").map(String::as_str),
        Some("shop"),
        "the bridge's apply carried the labels"
    );
    let announced = until_marker(&mut event_watch, "marker-1").await;
    assert!(
        announced.is_empty(),
        "no Event for a creation: {announced:#?}"
    );

    // Three updates, each counted before the next: two object writes each;
    // one Superseded Event created at the first, its series (3) written
    // once, at the stop.
    let controller = start_controller(&client, &ns, refresh);
    for (revision, body) in [(2, "v2"), (3, "v3"), (4, "v4")] {
        assert_eq!(
            bridge_writes(&ns, vec![write(key, body)]).await,
            ["updated"]
        );
        counted(&handoffs, key, revision).await;
    }
    controller.stop().await;
    marker(&handoffs, "marker-2").await;
    marker_event(&events, &ns, "marker-2").await;
    let writes = until_marker(&mut object_watch, "marker-2").await;
    let kinds: Vec<&str> = writes.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(kinds, ["MODIFIED"; 6], "{writes:#?}");
    let announced = until_marker(&mut event_watch, "marker-2").await;
    let kinds: Vec<&str> = announced.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED"], "{announced:#?}");
    assert!(announced.iter().all(|e| e.1 == announced[0].1), "one Event");
    let first = &announced[0].3;
    assert_eq!(first.reason.as_deref(), Some("Superseded"));
    assert_eq!(
        first.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some(name.as_str())
    );
    assert!(first.series.is_none(), "created at the first occurrence");
    let last = &announced[1].3;
    assert_eq!(last.series.as_ref().map(|s| s.count), Some(3));
    let note = last.note.clone().unwrap_or_default();
    assert!(
        note.contains("revision 3 superseded by revision 4"),
        "the latest occurrence's note: {note}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_writes_a_series_without_a_stop() {
    let env = env();
    let ns = env.namespace("writes-refresh").await;
    let client = env.client().await;
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let store = HandoffStore::new(client.clone(), &ns);
    let spec = |body: &str| spec("k").body(body);
    let controller = start_controller(&client, &ns, Duration::from_millis(200));
    for (revision, body) in [(1, "v1"), (2, "v2"), (3, "v3"), (4, "v4")] {
        store.write(&spec(body)).await.expect("write");
        counted(&handoffs, "k", revision).await;
    }
    let series = eventually(
        "the series of 3 written by a refresh",
        Duration::from_secs(60),
        || async {
            let list = Api::<Event>::namespaced(client.clone(), &ns)
                .list(&ListParams::default())
                .await
                .ok()?;
            let e = list
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("Superseded"))?;
            (e.series.as_ref()?.count == 3).then_some(e)
        },
    )
    .await;
    assert!(
        series
            .note
            .unwrap_or_default()
            .contains("superseded by revision 4"),
        "the latest note"
    );
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_trip_reports_created_updated_and_unchanged_truthfully() {
    let env = env();
    let ns = env.namespace("writes-outcome").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let key = "acme/api#7";
    let name = name_for_key(key);
    let rv = |h: &Handoff| h.resource_version().expect("resourceVersion");

    // No controller yet: nothing is counted. A second identical write right
    // after the first writes nothing and says so.
    let outcomes = bridge_writes(&ns, vec![write(key, "v1"), write(key, "v1")]).await;
    assert_eq!(outcomes, ["created", "unchanged"]);
    let store = HandoffStore::new(client.clone(), &ns);
    let spec = |body: &str, writer: &str| {
        spec(key)
            .repo("org/repo")
            .kind("issue")
            .body(body)
            .by(writer)
    };
    let (outcome, first) = store.write(&spec("v2", "admin")).await.expect("write");
    assert_eq!(outcome, WriteOutcome::Updated);
    let (outcome, again) = store.write(&spec("v2", "admin")).await.expect("write");
    assert_eq!(outcome, WriteOutcome::Unchanged, "identical, just after");
    assert_eq!(rv(&again), rv(&first), "an identical write writes nothing");
    let stored = api.get(&name).await.expect("get");
    assert_eq!(rv(&stored), rv(&first));
    assert_eq!(stored.status, None, "not counted: no controller ran");
    // Another process, same content, still not counted: nothing tells it
    // the content was there but the age of the bridge's last change. Once
    // that is older than a round trip can explain, the answer alone says
    // unchanged; no attempt wrote anything.
    eventually(
        "another process's identical write reported unchanged",
        Duration::from_secs(60),
        || async {
            (bridge_writes(&ns, vec![write(key, "v2")]).await == ["unchanged"]).then_some(())
        },
    )
    .await;
    assert_eq!(rv(&api.get(&name).await.expect("get")), rv(&first));

    // Counted by the controller: an identical write is unchanged from the
    // answer alone (a fresh store, and a version this process never saw:
    // the status write made it).
    let controller = start_controller(&client, &ns, Duration::from_secs(3600));
    let counted_now = counted(&api, key, 1).await;
    let (outcome, after) = HandoffStore::new(client.clone(), &ns)
        .write(&spec("v2", "admin"))
        .await
        .expect("write");
    assert_eq!(outcome, WriteOutcome::Unchanged);
    assert_eq!(rv(&after), rv(&counted_now), "nothing written");
    // Another writer, same content: its name is recorded (a write), no new
    // revision is counted.
    let (outcome, other) = store.write(&spec("v2", "bob")).await.expect("write");
    assert_eq!(outcome, WriteOutcome::Updated);
    assert_ne!(rv(&other), rv(&counted_now));
    let recounted = eventually("bob's write observed", Duration::from_secs(60), || {
        let api = api.clone();
        async move {
            let h = api.get(&name_for_key(key)).await.ok()?;
            (h.status.as_ref()?.observed_generation == h.metadata.generation).then_some(h)
        }
    })
    .await;
    assert_eq!(recounted.status.and_then(|s| s.revision), Some(1));
    assert_eq!(recounted.spec.created_by.as_deref(), Some("bob"));
    // New content through the bridge: updated, and counted as revision 2.
    assert_eq!(
        bridge_writes(&ns, vec![write(key, "v3")]).await,
        ["updated"]
    );
    counted(&api, key, 2).await;
    controller.stop().await;
}

/// When the bridge's field manager applied the spec of `h` (the
/// production reading of managedFields), as `updated_at` shows it.
fn applied_at(h: &Handoff) -> String {
    let second = handoff_core::handoff::outcome::applied_at(h)
        .expect("the bridge's apply is in managedFields");
    k8s_openapi::jiff::Timestamp::from_second(second)
        .expect("a time")
        .to_string()
}

/// Finding 11: an `updated` write answers with what it wrote, not with the
/// previous content's count. Revision 1 is counted, the controller stops
/// (the uncounted window, held open for as long as the test needs), and a
/// new write answers with no revision and its own time — the managedFields
/// time of its apply, never revision 1's — and so do `get_handoff` and
/// `list_handoffs` in that window. Once a controller counts it: revision 2, the same time.
/// The apiserver's clock is moved past each time before the next step, so
/// the times compared are distinct seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_updated_write_answers_with_its_own_time_and_no_stale_revision() {
    let env = env();
    let ns = env.namespace("writes-honest").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let key = "acme/api#11";
    let name = name_for_key(key);
    let get = || call("get_handoff", json!({"handoff_key": key}));
    let drive = |plan: Value| {
        let ns = ns.clone();
        tokio::task::spawn_blocking(move || drive_stdio(env, &ns, "implement", plan))
    };

    let controller = start_controller(&client, &ns, Duration::from_secs(3600));
    assert_eq!(
        bridge_writes(&ns, vec![write(key, "## State\nA")]).await,
        ["created"]
    );
    let a = counted(&api, key, 1).await;
    controller.stop().await;
    let a_at = handoff_core::handoff::view::updated_at(&a)
        .expect("dated")
        .0;
    assert_eq!(
        a_at.to_string(),
        applied_at(&a),
        "revision 1 is dated by its write"
    );
    apiserver_clock_past(&client, &ns, a_at).await;

    let list = call("list_handoffs", json!({"project": "shop"}));
    let answers = drive(json!([write(key, "## State\nB"), get(), list]))
        .await
        .expect("bridge");
    let b = api.get(&name).await.expect("get");
    let b_at = applied_at(&b);
    assert_ne!(b_at, a_at.to_string(), "distinct seconds");
    let written = ok(&answers[0]);
    assert_eq!(written["outcome"], json!("updated"));
    assert!(
        answers[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("counted shortly"),
        "{}",
        answers[0]["text"]
    );
    let got = ok(&answers[1]);
    for (what, view) in [
        ("the write's answer", &written["handoff"]),
        ("get_handoff", &got["handoff"]),
    ] {
        assert_eq!(view["body"], json!("## State\nB"), "{what}");
        assert_eq!(
            view.get("revision"),
            None,
            "{what}: revision 1 is not this content's"
        );
        assert_eq!(
            view["updated_at"],
            json!(b_at),
            "{what}: when B was written"
        );
    }

    let listed = &ok(&answers[2])["handoffs"][0];
    assert_eq!(listed["updated_at"], json!(b_at), "list_handoffs: {listed}");

    // Counted later than written: the count keeps the write's time.
    let b_second: k8s_openapi::jiff::Timestamp = b_at.parse().expect("rfc 3339");
    apiserver_clock_past(&client, &ns, b_second).await;
    let controller = start_controller(&client, &ns, Duration::from_secs(3600));
    counted(&api, key, 2).await;
    controller.stop().await;
    let answers = drive(json!([get()])).await.expect("bridge");
    let view = &ok(&answers[0])["handoff"];
    assert_eq!(view["revision"], json!(2));
    assert_eq!(
        view["updated_at"],
        json!(b_at),
        "the same time once counted"
    );
}
