//! `handoff controller` against the real kube-apiserver and a real
//! PostgreSQL: status, labels, Events, the mirror (rows, history and its
//! retention, resync, outages), leader election and TTL grooming.
//! Controllers run in-process (one per test, scoped to the test's
//! namespace, each with its own Lease); waits are bounded polls for a
//! condition, never sleeps asserted on.

use crate::common;
use handoff_testkit::spec::{Fields, counted, spec};
use handoff_testkit::wait::eventually;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use handoff_controller::ControllerOptions;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOrigin, HandoffPhase, HandoffSpec};
use handoff_core::handoff::MIRRORED;
use handoff_core::time::{ManualClock, SystemClock};
use handoff_kube::store::HandoffStore;
use handoff_testkit::Postgres;
use handoff_testkit::controller::{InProcess, Running, Scene, TEST_LEASE, postgres};
use handoff_testkit::mirror::{self, Snapshot, mirrored_rows};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};

const LEASE: &str = "handoff-controller";

/// A manual clock at the current second (`metav1.Time` keeps whole
/// seconds), and that time.
fn manual_clock() -> (Timestamp, Arc<ManualClock>) {
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).expect("now");
    (t0, Arc::new(ManualClock::new(t0)))
}

/// A fresh scene and database, and controller "a" mirroring to it, set
/// up further by `with` (a clock, options).
struct Mirrored {
    s: Scene,
    url: String,
    db: tokio_postgres::Client,
    controller: Running,
}

impl Mirrored {
    async fn start(prefix: &str, with: impl FnOnce(InProcess) -> InProcess) -> Self {
        let s = Scene::new(prefix).await;
        let (url, db) = postgres().await;
        let controller = with(s.controller("a").mirror(&url)).start(s.client.clone());
        Self {
            s,
            url,
            db,
            controller,
        }
    }
}

/// `Mirrored` on a manual clock, with `options`: the set-up of the tests of
/// history retention. Returns the clock and the time it starts at, too.
async fn on_a_manual_clock(
    prefix: &str,
    options: impl FnOnce(&mut ControllerOptions),
) -> (Mirrored, Timestamp, Arc<ManualClock>) {
    let (t0, clock) = manual_clock();
    let mirrored = Mirrored::start(prefix, |c| c.clock(clock.clone()).options(options)).await;
    (mirrored, t0, clock)
}

/// The statuses of `h`'s Mirrored conditions (none without a status).
fn mirrored_statuses(h: &Handoff) -> Vec<&str> {
    h.status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| c.type_ == MIRRORED)
        .map(|c| c.status.as_str())
        .collect()
}

/// Writes `bodies` to `key` one after another, each counted (revisions
/// 1, 2, …) before the next.
async fn write_revisions(store: &HandoffStore, api: &Api<Handoff>, key: &str, bodies: &[&str]) {
    for (revision, body) in (1..).zip(bodies) {
        put(store, key, body).await;
        counted(api, key, revision).await;
    }
}

async fn pg(url: &str) -> tokio_postgres::Client {
    handoff_testkit::connect_postgres(url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

fn request(key: &str, project: &str, body: &str, writer: &str) -> HandoffSpec {
    spec(key)
        .project(project)
        .repo("org/repo")
        .kind("issue")
        .body(body)
        .by(writer)
}

/// Writes `body` to `key` (project `shop`) as writer `w`.
async fn put(store: &HandoffStore, key: &str, body: &str) {
    store
        .write(&request(key, "shop", body, "w"))
        .await
        .expect("write");
}

/// When the content of `key` was written (`status.updatedAt`).
async fn written_at(api: &Api<Handoff>, key: &str) -> Timestamp {
    let h = api.get(&name_for_key(key)).await.expect("get");
    handoff_core::handoff::view::updated_at(&h)
        .expect("dated")
        .0
}

/// Waits until the handoff of `key` is deleted.
async fn deleted(api: &Api<Handoff>, key: &str) {
    eventually(
        &format!("{key} deleted"),
        Duration::from_secs(20),
        || async {
            api.get_opt(&name_for_key(key))
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
}

/// `(key, revision, id)` of every row of `namespace`.
async fn rows(db: &tokio_postgres::Client, namespace: &str) -> Snapshot {
    mirrored_rows(db, namespace).await.expect("rows")
}

/// Waits until the mirror holds exactly the live CRs at their revisions.
async fn converged(
    api: &Api<Handoff>,
    db: &tokio_postgres::Client,
    namespace: &str,
    limit: Duration,
) -> usize {
    eventually("the mirror to converge", limit, || {
        mirror::converged(api, db, namespace)
    })
    .await
}

async fn events(client: &Client, namespace: &str, name: &str) -> Vec<Event> {
    let mut list: Vec<Event> = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("events")
        .items;
    list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    list
}

/// Waits until `controller` has counted `n` groomed handoffs. The counter
/// (and the `Groomed` Event) follow the delete's answer, so a test that has
/// just seen the object go may look before the controller has.
async fn groomed(controller: &Running, n: u64) {
    eventually(
        &format!("{n} groomed handoff(s) counted"),
        Duration::from_secs(20),
        || async { (controller.metrics.groomed() == n).then_some(()) },
    )
    .await;
}

/// Waits until the controller's Event with `reason` about `name` exists.
async fn event_of(client: &Client, namespace: &str, name: &str, reason: &str) -> Event {
    eventually(
        &format!("a {reason} Event about {name}"),
        Duration::from_secs(20),
        || async {
            events(client, namespace, name)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))
        },
    )
    .await
}

/// The revisions of `key` in the history of `namespace`, oldest first.
async fn history(db: &tokio_postgres::Client, namespace: &str, key: &str) -> Vec<i64> {
    db.query(
        "SELECT revision FROM handoff_revisions WHERE namespace = $1 AND handoff_key = $2 \
         ORDER BY written_at, revision",
        &[&namespace, &key],
    )
    .await
    .expect("history")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Waits until the history of `key` is `revisions`.
async fn history_is(db: &tokio_postgres::Client, namespace: &str, key: &str, revisions: &[i64]) {
    eventually(
        &format!("the history of {key} to be {revisions:?}"),
        Duration::from_secs(30),
        || async { (history(db, namespace, key).await == revisions).then_some(()) },
    )
    .await
}

/// Waits until the Handoff of `key` and its mirror row are gone.
async fn gone(api: &Api<Handoff>, db: &tokio_postgres::Client, namespace: &str, key: &str) {
    eventually(
        &format!("{key} and its row gone"),
        Duration::from_secs(30),
        || async {
            let object = api.get_opt(&name_for_key(key)).await.ok()?;
            let row = rows(db, namespace).await.contains_key(key);
            (object.is_none() && !row).then_some(())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_delete_are_reflected_in_status_events_labels_and_postgres() {
    let s = Scene::new("ctl-lifecycle").await;
    let (url, db) = postgres().await;
    let controller = s.controller("only").mirror(&url).start(s.client.clone());

    // Created like kubectl or GitOps would: no labels.
    let key = "acme/api#42";
    let name = name_for_key(key);
    let body1 = "## State\nparser done\n## Next\n- wire the CLI";
    let mut h = Handoff::new(
        &name,
        spec(key)
            .repo("org/repo")
            .kind("issue")
            .body(body1)
            .by("alice"),
    );
    h.metadata.labels = None;
    s.api
        .create(&PostParams::default(), &h)
        .await
        .expect("create");

    let first = eventually("revision 1 mirrored", Duration::from_secs(30), || async {
        let h = s.api.get(&name).await.ok()?;
        let mirrored = mirrored_statuses(&h).contains(&"True");
        let labelled = h.labels().contains_key("project");
        (mirrored && labelled).then_some(h)
    })
    .await;
    let status = first.status.clone().expect("status");
    assert_eq!(status.revision, Some(1));
    assert_eq!(status.body_bytes, Some(body1.len() as i64));
    assert_eq!(status.approx_tokens, Some(body1.len().div_ceil(4) as i64));
    assert_eq!(status.phase, Some(HandoffPhase::Current));
    assert_eq!(status.observed_generation, first.metadata.generation);
    assert_eq!(status.origin, Some(HandoffOrigin::Written));
    assert!(status.content_hash.is_some());
    let labels = first.labels();
    assert_eq!(labels.get("project").map(String::as_str), Some("shop"));
    assert_eq!(labels.get("kind").map(String::as_str), Some("issue"));
    assert!(!labels.contains_key("repo"), "org/repo is no label value");
    assert!(
        first.finalizers().is_empty(),
        "no finalizer: deletes never wait for PostgreSQL"
    );

    let row = db
        .query_one(
            "SELECT id::text, namespace, handoff_key, project, repo, kind, created_by, body, revision, \
             resource_version, created_at, updated_at FROM handoffs WHERE namespace = $1 AND handoff_key = $2",
            &[&s.ns, &key],
        )
        .await
        .expect("row");
    assert_eq!(row.get::<_, String>(0), first.uid().expect("uid"));
    assert_eq!(row.get::<_, String>(1), s.ns);
    assert_eq!(row.get::<_, String>(2), key);
    assert_eq!(row.get::<_, String>(3), "shop");
    assert_eq!(row.get::<_, Option<String>>(4).as_deref(), Some("org/repo"));
    assert_eq!(row.get::<_, Option<String>>(5).as_deref(), Some("issue"));
    assert_eq!(row.get::<_, String>(6), "alice");
    assert_eq!(row.get::<_, String>(7), body1);
    assert_eq!(row.get::<_, i64>(8), 1);
    let row_rv = row.get::<_, i64>(9);
    let object_rv: i64 = first
        .resource_version()
        .expect("rv")
        .parse()
        .expect("int rv");
    assert!(
        row_rv > 0 && row_rv <= object_rv,
        "row rv {row_rv}, object rv {object_rv}"
    );
    assert_eq!(
        row.get::<_, Timestamp>(10),
        first
            .metadata
            .creation_timestamp
            .clone()
            .expect("created")
            .0
    );
    assert_eq!(
        row.get::<_, Timestamp>(11),
        status.updated_at.clone().expect("updatedAt").0
    );

    // A content change by another writer: revision 2, history, Superseded.
    let store = HandoffStore::new(s.client.clone(), &s.ns);
    let body2 = "## State\nCLI wired";
    store
        .write(&request(key, "shop", body2, "bob"))
        .await
        .expect("update");
    eventually("revision 2 in the mirror", Duration::from_secs(30), || async {
        let r = db
            .query_opt(
                "SELECT revision, body, created_by FROM handoffs WHERE namespace = $1 AND handoff_key = $2",
                &[&s.ns, &key],
            )
            .await
            .ok()??;
        (r.get::<_, i64>(0) == 2 && r.get::<_, String>(1) == body2 && r.get::<_, String>(2) == "bob")
            .then_some(())
    })
    .await;
    // History is appended once status holds the revision, a moment after the row.
    let history: Vec<(i64, String, String)> = eventually(
        "revision 2 in the history",
        Duration::from_secs(30),
        || async {
            let rows: Vec<(i64, String, String)> = db
                .query(
                    "SELECT revision, body, created_by FROM handoff_revisions \
                     WHERE namespace = $1 AND handoff_key = $2 ORDER BY revision",
                    &[&s.ns, &key],
                )
                .await
                .ok()?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            (rows.len() >= 2).then_some(rows)
        },
    )
    .await;
    assert_eq!(
        history,
        [
            (1, body1.to_owned(), "alice".to_owned()),
            (2, body2.to_owned(), "bob".to_owned())
        ]
    );
    // No Event for the creation (status revision 1 and the history say
    // it); one for the supersession, reported by this replica.
    let seen = eventually("the Superseded Event", Duration::from_secs(10), || async {
        let e = events(&s.client, &s.ns, &name).await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    let reasons: Vec<&str> = seen.iter().filter_map(|e| e.reason.as_deref()).collect();
    assert_eq!(reasons, ["Superseded"]);
    let superseded = seen[0].message.clone().unwrap_or_default();
    assert!(
        superseded.contains("revision 1 superseded by revision 2")
            && superseded.contains("bob")
            && superseded.contains(key),
        "{superseded}"
    );
    // Observed once (no series yet), reported by this replica.
    assert!(seen.iter().all(|e| e.series.is_none()
        && e.reporting_component.as_deref() == Some("handoff-controller")
        && e.reporting_instance.as_deref() == Some("only")
        && e.involved_object.uid == first.uid()));

    // Rewriting identical content is no revision.
    store
        .write(&request(key, "shop", body2, "carol"))
        .await
        .expect("same content");
    let after = s.api.get(&name).await.expect("get");
    assert_eq!(after.status.and_then(|s| s.revision), Some(2));

    // Delete: the controller deletes the row and, with it, the history.
    s.api
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    eventually("object and row gone", Duration::from_secs(30), || async {
        let gone = s.api.get_opt(&name).await.ok()?.is_none();
        (gone && rows(&db, &s.ns).await.is_empty()).then_some(())
    })
    .await;
    let kept: i64 = db
        .query_one(
            "SELECT count(*) FROM handoff_revisions WHERE namespace = $1",
            &[&s.ns],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(kept, 0, "history is forgotten with the handoff");
    controller.stop().await;
}

/// Occurrences an Event stands for: its series' count, else one.
fn occurrences(e: &Event) -> i32 {
    e.series.as_ref().and_then(|s| s.count).unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_writes_to_one_key_make_at_most_ten_events_that_count_every_revision() {
    let s = Scene::new("ctl-event-volume").await;
    let controller = s.controller("only").start(s.client.clone());
    let key = "busy/key#1";
    let name = name_for_key(key);
    let last = request(key, "shop", "body 999", "writer");
    for i in 0..1000 {
        s.store
            .write(&request(key, "shop", &format!("body {i}"), "writer"))
            .await
            .expect("write");
    }
    // Every revision 2..=N is announced once, by a Superseded Event: the
    // series' counts add up to N - 1, and the newest names revision N.
    let (revision, seen) = eventually(
        "the last write counted and announced",
        Duration::from_secs(120),
        || async {
            let status = s.api.get(&name).await.ok()?.status?;
            (status.content_hash? == last.content_hash()).then_some(())?;
            let revision = status.revision?;
            let seen = events(&s.client, &s.ns, &name).await;
            let superseded: Vec<&Event> = seen
                .iter()
                .filter(|e| e.reason.as_deref() == Some("Superseded"))
                .collect();
            let counted: i32 = superseded.iter().map(|e| occurrences(e)).sum();
            let newest = superseded.iter().max_by_key(|e| {
                e.series
                    .as_ref()
                    .and_then(|s| s.last_observed_time.as_ref())
                    .or(e.event_time.as_ref())
                    .map(|t| t.0)
            })?;
            let names_it = newest
                .message
                .as_deref()?
                .contains(&format!("superseded by revision {revision} "));
            (i64::from(counted) == revision - 1 && names_it).then_some((revision, seen))
        },
    )
    .await;
    eprintln!(
        "1000 writes: revision {revision}, {} Event objects",
        seen.len()
    );
    assert!(revision > 1 && revision <= 1000, "revision {revision}");
    assert!(seen.len() <= 10, "{} Event objects: {seen:#?}", seen.len());
    assert!(
        seen.iter()
            .all(|e| e.reason.as_deref() == Some("Superseded")),
        "no Event for the creation: {seen:#?}"
    );
    // A series says its count twice: series.count and (core/v1) count.
    assert!(
        seen.iter()
            .filter(|e| e.series.is_some())
            .all(|e| e.count == Some(occurrences(e)) && occurrences(e) >= 2),
        "{seen:#?}"
    );
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_converges_after_the_controller_stops_in_the_middle_of_1000_writes() {
    let Mirrored {
        s,
        url,
        db,
        controller,
    } = Mirrored::start("ctl-restart", |c| c).await;
    let mut controller = Some(controller);

    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writes = {
        let (store, written) = (s.store.clone(), written.clone());
        tokio::spawn(async move {
            futures::stream::iter(0..1000)
                .map(|i| {
                    let (store, written) = (store.clone(), written.clone());
                    async move {
                        let key = format!("issue-{i:04}");
                        store
                            .write(&request(&key, "shop", &format!("body {i}"), "writer"))
                            .await
                            .expect("write");
                        if i % 10 == 0 {
                            store
                                .write(&request(&key, "shop", &format!("body {i} v2"), "writer"))
                                .await
                                .expect("update");
                        }
                        written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                })
                .buffer_unordered(16)
                .collect::<Vec<()>>()
                .await;
        })
    };
    eventually("300 writes", Duration::from_secs(120), || async {
        (written.load(std::sync::atomic::Ordering::Relaxed) >= 300).then_some(())
    })
    .await;
    if let Some(running) = controller.take() {
        running.kill().await;
    }
    writes.await.expect("writes");
    // While it is down: deletes (their rows are orphans resync deletes).
    for i in (0..1000).step_by(20) {
        s.store
            .delete(&format!("issue-{i:04}"))
            .await
            .expect("delete");
    }
    let restarted = s.controller("a").mirror(&url).start(s.client.clone());
    let n = converged(&s.api, &db, &s.ns, Duration::from_secs(300)).await;
    assert_eq!(n, 950, "1000 written, 50 deleted");
    // Keys written twice hold the second body; their revision is 1 or 2
    // (two writes between two observations are one change to count).
    for i in (10..1000).step_by(20) {
        let key = format!("issue-{i:04}");
        let row = db
            .query_one(
                "SELECT body, revision FROM handoffs WHERE namespace = $1 AND handoff_key = $2",
                &[&s.ns, &key],
            )
            .await
            .expect("row");
        assert_eq!(row.get::<_, String>(0), format!("body {i} v2"), "{key}");
        assert!((1..=2).contains(&row.get::<_, i64>(1)), "{key}");
    }
    restarted.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_during_writes_then_back_loses_nothing() {
    let s = Scene::new("ctl-pg-down").await;
    let mut own = tokio::task::spawn_blocking(Postgres::start)
        .await
        .expect("join")
        .expect("postgres starts");
    let url = own.url();
    let controller = s.controller("a").mirror(&url).start(s.client.clone());
    for i in 0..50 {
        put(&s.store, &format!("k{i:03}"), "before").await;
    }
    {
        let db = pg(&url).await;
        converged(&s.api, &db, &s.ns, Duration::from_secs(60)).await;
    }

    own = tokio::task::spawn_blocking(move || {
        own.stop_server();
        own
    })
    .await
    .expect("join");
    for i in 0..100 {
        put(&s.store, &format!("k{i:03}"), "during").await;
    }
    for i in 0..10 {
        s.store.delete(&format!("k{i:03}")).await.expect("delete");
    }
    // Status keeps being reconciled while PostgreSQL is down.
    eventually(
        "statuses counted without the mirror",
        Duration::from_secs(60),
        || async {
            let list = s.api.list(&ListParams::default()).await.ok()?;
            let live: Vec<_> = list
                .items
                .iter()
                .filter(|h| h.metadata.deletion_timestamp.is_none())
                .collect();
            let all = live.len() == 90
                && live.iter().all(|h| {
                    let s = h.status.as_ref();
                    let revision = s.and_then(|s| s.revision);
                    let fresh = h.spec.handoff_key.as_str() >= "k050";
                    revision == Some(if fresh { 1 } else { 2 })
                });
            let unmirrored = live.iter().any(|h| mirrored_statuses(h).contains(&"False"));
            (all && unmirrored).then_some(())
        },
    )
    .await;

    own = tokio::task::spawn_blocking(move || {
        own.restart_server().expect("restart");
        own
    })
    .await
    .expect("join");
    let db = pg(&url).await;
    let n = converged(&s.api, &db, &s.ns, Duration::from_secs(180)).await;
    assert_eq!(n, 90);
    let bodies: i64 = db
        .query_one(
            "SELECT count(*) FROM handoffs WHERE namespace = $1 AND body = 'during'",
            &[&s.ns],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(
        bodies, 90,
        "every write made while PostgreSQL was down is mirrored"
    );
    controller.stop().await;
    drop(own);
}

/// A Lease's `acquireTime` and `renewTime`.
fn lease_times(lease: &Lease) -> (Timestamp, Timestamp) {
    let spec = lease.spec.as_ref().expect("a Lease spec");
    let time = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>| {
        t.as_ref().expect("a Lease time").0
    };
    (time(&spec.acquire_time), time(&spec.renew_time))
}

async fn holder(client: &Client, namespace: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(LEASE)
        .await
        .ok()??
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// Stops `controller` and asserts that the Lease is left without a holder.
async fn stopped_and_released(s: &Scene, controller: Running, why: &str) {
    controller.stop().await;
    assert_eq!(holder(&s.client, &s.ns).await, None, "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_writes_and_the_other_takes_over_within_the_lease_duration() {
    let s = Scene::new("ctl-leader").await;
    let a = s.controller("a").start(s.client.clone());
    eventually("a leads", Duration::from_secs(20), || async {
        (holder(&s.client, &s.ns).await.as_deref() == Some("a")).then_some(())
    })
    .await;
    let b = s.controller("b").start(s.client.clone());

    // A creation has no Event; the update's Superseded names who counted.
    put(&s.store, "one", "first").await;
    counted(&s.api, "one", 1).await;
    put(&s.store, "one", "first, revised").await;
    eventually("counted by a", Duration::from_secs(20), || async {
        let e = events(&s.client, &s.ns, &name_for_key("one")).await;
        e.iter()
            .any(|e| e.reporting_instance.as_deref() == Some("a"))
            .then_some(())
    })
    .await;
    assert!(a.metrics.is_leader());
    assert!(
        !b.metrics.is_leader(),
        "b must not lead while a holds the lease"
    );
    assert_eq!(holder(&s.client, &s.ns).await.as_deref(), Some("a"));

    a.kill().await;
    // a's last renewal, as the Lease holds it now that a is gone.
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    let last_renewal = lease_times(&leases.get(LEASE).await.expect("the lease")).1;
    let taken = eventually("b takes over", Duration::from_secs(30), || async {
        let lease = leases.get(LEASE).await.ok()?;
        let spec = lease.spec.as_ref()?;
        (spec.holder_identity.as_deref() == Some("b")).then(|| lease.clone())
    })
    .await;
    // b takes the lease once a's record stood unchanged for one lease
    // duration (as b observed it: less the latency of b's read, which the
    // renew deadline bounds), and before a second lease duration passed.
    let (lease_duration, renew_deadline, _) = TEST_LEASE;
    let (acquired, _) = lease_times(&taken);
    let waited = last_renewal.duration_until(acquired);
    assert!(
        waited >= SignedDuration::try_from(lease_duration - renew_deadline).expect("duration"),
        "b took the lease {waited:?} after a's last renewal: before a's lease expired"
    );
    assert!(
        waited < SignedDuration::try_from(2 * lease_duration).expect("duration"),
        "b took the lease {waited:?} after a's last renewal: more than a lease duration after it expired"
    );
    assert_eq!(
        taken.spec.as_ref().and_then(|s| s.lease_transitions),
        Some(1),
        "one transition: a to b"
    );
    put(&s.store, "two", "second").await;
    counted(&s.api, "two", 1).await;
    put(&s.store, "two", "second, revised").await;
    let counted_by = eventually("counted by b", Duration::from_secs(20), || async {
        let h = s.api.get(&name_for_key("two")).await.ok()?;
        (h.status.as_ref()?.revision? == 2).then_some(())?;
        let e = events(&s.client, &s.ns, &name_for_key("two")).await;
        e.first()?.reporting_instance.clone()
    })
    .await;
    assert_eq!(counted_by, "b");
    assert!(b.metrics.is_leader());
    stopped_and_released(&s, b, "a graceful stop releases the lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_repairs_rows_deleted_inserted_or_changed_by_hand() {
    let Mirrored {
        s, db, controller, ..
    } = Mirrored::start("ctl-resync", |c| c).await;
    for i in 0..5 {
        put(&s.store, &format!("k{i}"), "one").await;
    }
    // Counted once before the update, so k1 is at revision 2 and a row one
    // revision behind it is still a valid row.
    counted(&s.api, "k1", 1).await;
    s.store
        .write(&request("k1", "shop", "two", "w"))
        .await
        .expect("update");
    counted(&s.api, "k1", 2).await;
    converged(&s.api, &db, &s.ns, Duration::from_secs(60)).await;
    let resyncs = controller.metrics.resyncs();
    // The first resync may already have written rows the handoff loop had
    // not reached yet: count the repairs from here on.
    let before = controller.metrics.encode();

    db.execute(
        "DELETE FROM handoffs WHERE namespace = $1 AND handoff_key = 'k0'",
        &[&s.ns],
    )
    .await
    .expect("delete by hand");
    // An orphan row with a history: resync deletes both.
    db.execute(
        "WITH ghost AS ( \
             INSERT INTO handoffs (id, namespace, handoff_key, project, created_by, body, revision, \
                                   resource_version, created_at, updated_at) \
             VALUES (gen_random_uuid(), $1, 'ghost', 'shop', 'nobody', 'x', 1, 1, now(), now()) \
             RETURNING id) \
         INSERT INTO handoff_revisions (namespace, handoff_key, handoff_id, revision, project, body, \
                                        created_by, written_at) \
         SELECT $1, 'ghost', id, 1, 'shop', 'x', 'nobody', now() FROM ghost",
        &[&s.ns],
    )
    .await
    .expect("insert by hand");
    db.execute(
        // One revision behind what the controller counted.
        "UPDATE handoffs SET revision = revision - 1, body = 'stale' WHERE namespace = $1 AND handoff_key = 'k1'",
        &[&s.ns],
    )
    .await
    .expect("stale by hand");

    eventually(
        "a resync after the edits",
        Duration::from_secs(30),
        || async { (controller.metrics.resyncs() >= resyncs + 2).then_some(()) },
    )
    .await;
    assert_eq!(
        converged(&s.api, &db, &s.ns, Duration::from_secs(30)).await,
        5
    );
    let body: String = db
        .query_one(
            "SELECT body FROM handoffs WHERE namespace = $1 AND handoff_key = 'k1'",
            &[&s.ns],
        )
        .await
        .expect("k1")
        .get(0);
    assert_eq!(body, "two");
    assert_eq!(
        history(&db, &s.ns, "ghost").await,
        [0_i64; 0],
        "the orphan's history goes with it"
    );
    let text = controller.metrics.encode();
    let repaired = |action: &str| repairs(&text, action) - repairs(&before, action);
    assert_eq!((repaired("written"), repaired("deleted")), (2, 1), "{text}");
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_grooming_deletes_only_the_expired_handoffs() {
    let s = Scene::new("ctl-groom").await;
    let (_, clock) = manual_clock();
    let controller = s
        .controller("a")
        .clock(clock.clone())
        .options(|o| o.default_handoff_ttl = Some(Duration::from_secs(2 * 3600)))
        .start(s.client.clone());
    for key in ["old", "rewritten"] {
        put(&s.store, key, "v1").await;
        counted(&s.api, key, 1).await;
    }
    // A content's time is its write's (the apiserver's clock, whole
    // seconds), so the rewrite comes a second after the first writes.
    let first = written_at(&s.api, "old").await;
    common::apiserver_clock_past(&s.client, &s.ns, first).await;
    s.store
        .write(&request("rewritten", "shop", "v2", "w"))
        .await
        .expect("rewrite");
    counted(&s.api, "rewritten", 2).await;
    put(&s.store, "new", "v1").await;
    counted(&s.api, "new", 1).await;
    let old = s.api.get(&name_for_key("old")).await.expect("old");
    let rewritten = written_at(&s.api, "rewritten").await;

    // Exactly the TTL after the rewrite: it has not outlived it, the
    // first writes (a second or more older) have.
    clock.set(rewritten + Duration::from_secs(2 * 3600));
    deleted(&s.api, "old").await;
    for key in ["rewritten", "new"] {
        assert!(
            s.api
                .get_opt(&name_for_key(key))
                .await
                .expect("get")
                .is_some(),
            "{key} was updated within the TTL"
        );
    }
    groomed(&controller, 1).await;
    let event = event_of(&s.client, &s.ns, &name_for_key("old"), "Groomed").await;
    assert_eq!(event.involved_object.uid, old.uid());
    assert!(
        event
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("TTL 7200s"),
        "{event:?}"
    );
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_condition_goes_when_the_mirror_is_disabled() {
    let Mirrored {
        s,
        controller: with_mirror,
        ..
    } = Mirrored::start("ctl-no-mirror", |c| c).await;
    put(&s.store, "k", "body").await;
    let name = name_for_key("k");
    let h = eventually("mirrored and labelled", Duration::from_secs(20), || async {
        let h = s.api.get(&name).await.ok()?;
        let mirrored = mirrored_statuses(&h).contains(&"True");
        (mirrored && h.labels().contains_key("project")).then_some(h)
    })
    .await;
    assert!(h.finalizers().is_empty(), "no finalizer is added");
    with_mirror.stop().await;

    let without = s.controller("a").start(s.client.clone());
    let h = eventually("condition removed", Duration::from_secs(20), || async {
        let h = s.api.get(&name_for_key("k")).await.ok()?;
        (h.status.is_some() && mirrored_statuses(&h).is_empty()).then_some(h)
    })
    .await;
    assert_eq!(h.status.and_then(|s| s.revision), Some(1));
    // Deletion never waits for a mirror.
    s.store.delete("k").await.expect("delete");
    deleted(&s.api, "k").await;
    without.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_handoff_forgets_the_history_unless_the_controller_keeps_it() {
    let (url, db) = postgres().await;
    for keep in [false, true] {
        let s = Scene::new(if keep {
            "ctl-hist-keep"
        } else {
            "ctl-hist-forget"
        })
        .await;
        // The store's delete of the key's object is what delete_handoff calls.
        let controller = s
            .controller("a")
            .mirror(&url)
            .options(|o| o.keep_history_on_delete = keep)
            .start(s.client.clone());
        for (revision, body) in [(1, "v1"), (2, "v2 with a pasted secret")] {
            put(&s.store, "leaky", body).await;
            counted(&s.api, "leaky", revision).await;
        }
        put(&s.store, "other", "v1").await;
        history_is(&db, &s.ns, "leaky", &[1, 2]).await;
        history_is(&db, &s.ns, "other", &[1]).await;

        assert!(s.store.delete("leaky").await.expect("delete"), "it existed");
        gone(&s.api, &db, &s.ns, "leaky").await;
        // The row and its history go in one statement: nothing is pending.
        let left = history(&db, &s.ns, "leaky").await;
        if keep {
            assert_eq!(left, [1, 2], "--keep-history-on-delete keeps it for audit");
        } else {
            assert_eq!(left, [0_i64; 0], "forgotten with the handoff");
        }
        assert_eq!(
            history(&db, &s.ns, "other").await,
            [1],
            "another key's history stays"
        );
        controller.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_of_a_key_keeps_only_its_newest_revisions() {
    let Mirrored {
        s, db, controller, ..
    } = Mirrored::start("ctl-hist-cap", |c| {
        c.options(|o| o.history_revisions = std::num::NonZeroU32::new(5).expect("5"))
    })
    .await;
    // 60 content revisions, each counted before the next write.
    for revision in 1..=60 {
        put(&s.store, "busy", &format!("body {revision}")).await;
        counted(&s.api, "busy", revision).await;
        if revision == 30 {
            let kept = history(&db, &s.ns, "busy").await.len();
            assert!(kept <= 5, "{kept} revisions kept halfway, the cap is 5");
        }
    }
    history_is(&db, &s.ns, "busy", &[56, 57, 58, 59, 60]).await;
    let bodies: Vec<String> = db
        .query(
            "SELECT body FROM handoff_revisions WHERE namespace = $1 AND handoff_key = 'busy' \
             ORDER BY revision",
            &[&s.ns],
        )
        .await
        .expect("bodies")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        bodies,
        (56..=60).map(|r| format!("body {r}")).collect::<Vec<_>>()
    );
    // Counted once the statement that dropped them returned.
    eventually(
        "55 rows dropped by the cap",
        Duration::from_secs(10),
        || async {
            controller
                .metrics
                .encode()
                .contains("handoff_controller_mirror_history_purged_rows_total{reason=\"cap\"} 55")
                .then_some(())
        },
    )
    .await;
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grooming_forgets_the_history_of_what_it_deletes() {
    let (mirrored, _, clock) = on_a_manual_clock("ctl-hist-groom", |o| {
        o.default_handoff_ttl = Some(Duration::from_secs(2 * 3600));
    })
    .await;
    let Mirrored {
        s, db, controller, ..
    } = mirrored;
    write_revisions(&s.store, &s.api, "stale", &["v1", "v2"]).await;
    // A content's time is its write's (the apiserver's clock, whole
    // seconds): "fresh" is written a second after "stale".
    let stale = written_at(&s.api, "stale").await;
    common::apiserver_clock_past(&s.client, &s.ns, stale).await;
    put(&s.store, "fresh", "v1").await;
    counted(&s.api, "fresh", 1).await;
    let fresh = written_at(&s.api, "fresh").await;
    history_is(&db, &s.ns, "stale", &[1, 2]).await;
    history_is(&db, &s.ns, "fresh", &[1]).await;

    // Exactly the TTL after "fresh" was written: "stale" has outlived it.
    clock.set(fresh + Duration::from_secs(2 * 3600));
    gone(&s.api, &db, &s.ns, "stale").await;
    groomed(&controller, 1).await;
    assert_eq!(
        history(&db, &s.ns, "stale").await,
        [0_i64; 0],
        "groomed, forgotten"
    );
    assert_eq!(history(&db, &s.ns, "fresh").await, [1], "not groomed, kept");
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_forgets_past_revisions_older_than_the_max_age() {
    let (mirrored, t0, clock) = on_a_manual_clock("ctl-hist-age", |o| {
        o.history_max_age = Some(Duration::from_secs(3600));
    })
    .await;
    let Mirrored {
        s, db, controller, ..
    } = mirrored;
    write_revisions(&s.store, &s.api, "edited", &["v1", "v2"]).await;
    put(&s.store, "untouched", "v1").await;
    counted(&s.api, "untouched", 1).await;
    history_is(&db, &s.ns, "edited", &[1, 2]).await;

    clock.set(t0 + Duration::from_secs(2 * 3600));
    put(&s.store, "edited", "v3").await;
    counted(&s.api, "edited", 3).await;
    let resyncs = controller.metrics.resyncs();
    eventually("two resyncs", Duration::from_secs(30), || async {
        (controller.metrics.resyncs() >= resyncs + 2).then_some(())
    })
    .await;
    assert_eq!(
        history(&db, &s.ns, "edited").await,
        [3],
        "revisions 1 and 2 are two hours old"
    );
    assert_eq!(
        history(&db, &s.ns, "untouched").await,
        [1],
        "the current revision of a live handoff stays, however old"
    );
    controller.stop().await;
}

/// `GET path` on a loopback address: `(status line, body)`.
fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let status = answer.lines().next().unwrap_or_default().to_owned();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_process_serves_health_and_metrics_and_stops_on_sigterm() {
    use std::io::BufRead;
    let env = common::env();
    let ns = env.namespace("ctl-process").await;
    let client = env.client().await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(["controller", "--namespace", &ns, "--lease-namespace", &ns])
        .args(["--identity", "proc", "--metrics-listen", "127.0.0.1:0"])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("controller starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            Some(
                l.split_once("metrics on http://")?
                    .1
                    .split('/')
                    .next()?
                    .to_owned(),
            )
        })
        .expect("the controller printed its metrics address");
    let logs = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());

    eventually("the process leads", Duration::from_secs(30), || async {
        (holder(&client, &ns).await.as_deref() == Some("proc")).then_some(())
    })
    .await;
    let store = HandoffStore::new(client.clone(), &ns);
    put(&store, "p", "body").await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    eventually(
        "counted by the process",
        Duration::from_secs(20),
        || async { api.get(&name_for_key("p")).await.ok()?.status?.revision },
    )
    .await;

    let probe = addr.clone();
    let (health, ready, metrics) = tokio::task::spawn_blocking(move || {
        (
            http_get(&probe, "/healthz"),
            http_get(&probe, "/readyz"),
            http_get(&probe, "/metrics"),
        )
    })
    .await
    .expect("probes");
    assert!(health.0.contains(" 200 "), "{health:?}");
    assert!(ready.0.contains(" 200 "), "{ready:?}");
    assert!(
        metrics.1.contains("handoff_controller_leader 1"),
        "{}",
        metrics.1
    );
    // The status write is visible before the reconcile that made it
    // counts the revision: wait for the count, then it must be exactly 1.
    let probe = addr.clone();
    let counted = eventually("the revision counted", Duration::from_secs(20), || {
        let probe = probe.clone();
        async move {
            let metrics = tokio::task::spawn_blocking(move || http_get(&probe, "/metrics"))
                .await
                .ok()?;
            metrics
                .1
                .lines()
                .find(|l| l.starts_with("handoff_controller_revisions_total "))
                .filter(|l| !l.ends_with(" 0"))
                .map(str::to_owned)
        }
    })
    .await;
    assert_eq!(counted, "handoff_controller_revisions_total 1");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert_eq!(holder(&client, &ns).await, None, "the lease was released");
    let logs = logs.join().expect("logs");
    assert!(
        logs.iter()
            .filter(|l| l.starts_with('{'))
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "JSON logs: {logs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_rbac_is_all_the_controller_needs() {
    use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
    let env = common::env();
    let s = Scene::new("ctl-rbac").await;
    let (url, db) = postgres().await;
    let manifest =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rbac/controller.yaml");
    let out = env
        .kubectl()
        .args(["apply", "--server-side", "-n", &s.ns, "-f"])
        .arg(&manifest)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token =
        common::agent_token(env, &s.ns, "controller", None, Some("handoff-controller")).await;
    let binding = RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("controller-leader-election".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "handoff-controller-leader-election".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "controller".into(),
            namespace: Some(s.ns.clone()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(s.client.clone(), &s.ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    let mut config =
        kube::Config::from_custom_kubeconfig(env.kubeconfig().clone(), &Default::default())
            .await
            .expect("config");
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    let as_controller = Client::try_from(config).expect("client");

    let (t0, clock) = manual_clock();
    let controller = s
        .controller("rbac")
        .mirror(&url)
        .clock(clock.clone())
        .options(|o| o.default_handoff_ttl = Some(Duration::from_secs(3600)))
        .start(as_controller);

    put(&s.store, "k", "body").await;
    let name = name_for_key("k");
    eventually(
        "status and row, no finalizer",
        Duration::from_secs(30),
        || async {
            let h = s.api.get(&name).await.ok()?;
            let done = h.status.as_ref()?.revision == Some(1)
                && h.finalizers().is_empty()
                && rows(&db, &s.ns).await.len() == 1;
            done.then_some(())
        },
    )
    .await;
    // Two more revisions: a Superseded Event, then its series written in
    // place by a refresh (the core/v1 patch of the note).
    for (revision, body) in [(2, "body 2"), (3, "body 3")] {
        put(&s.store, "k", body).await;
        counted(&s.api, "k", revision).await;
    }
    eventually(
        "a Superseded series of 2",
        Duration::from_secs(30),
        || async {
            let e = events(&s.client, &s.ns, &name).await;
            e.iter()
                .any(|e| {
                    e.reason.as_deref() == Some("Superseded")
                        && occurrences(e) == 2
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("superseded by revision 3 "))
                })
                .then_some(())
        },
    )
    .await;
    clock.set(t0 + Duration::from_secs(7200));
    eventually(
        "groomed, and its row deleted",
        Duration::from_secs(30),
        || async {
            let gone = s.api.get_opt(&name).await.ok()?.is_none();
            (gone && rows(&db, &s.ns).await.is_empty()).then_some(())
        },
    )
    .await;
    groomed(&controller, 1).await;
    stopped_and_released(&s, controller, "released with update rights only").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_left_by_a_replica_with_a_skewed_clock_is_taken_after_one_lease_duration() {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let s = Scene::new("ctl-skew").await;
    // A dead replica whose clock ran a year ahead: comparing its renewTime
    // with our clock would make the lease look valid for a year.
    let future = Timestamp::now() + Duration::from_secs(365 * 86_400);
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(LEASE.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("ghost".into()),
            lease_duration_seconds: Some(3),
            acquire_time: Some(MicroTime(future)),
            renew_time: Some(MicroTime(future)),
            lease_transitions: Some(4),
            ..Default::default()
        }),
    };
    Api::<Lease>::namespaced(s.client.clone(), &s.ns)
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
    let started = Instant::now();
    let controller = s.controller("a").start(s.client.clone());
    eventually(
        "a takes the abandoned lease",
        Duration::from_secs(15),
        || async { (holder(&s.client, &s.ns).await.as_deref() == Some("a")).then_some(()) },
    )
    .await;
    eprintln!(
        "took the abandoned lease after {:?} (lease duration 3s)",
        started.elapsed()
    );
    let taken = Api::<Lease>::namespaced(s.client.clone(), &s.ns)
        .get(LEASE)
        .await
        .expect("lease")
        .spec
        .expect("spec");
    assert_eq!(taken.lease_transitions, Some(5));
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedules_handoff_ttl_grooms_its_project_only() {
    use handoff_core::api::BrainstormSchedule;
    let s = Scene::new("ctl-schedule-ttl").await;
    let template = serde_json::json!({"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "agent", "image": "agent:1"}]}}}});
    let schedule: BrainstormSchedule = serde_json::from_value(serde_json::json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
        "metadata": {"name": "shop-daily"},
        "spec": {"project": "shop", "schedule": "0 6 * * *", "suspend": true, "handoffTTL": "1h",
                 "refine": {"jobTemplate": template}, "brainstorm": {"jobTemplate": template}},
    }))
    .expect("schedule");
    Api::<BrainstormSchedule>::namespaced(s.client.clone(), &s.ns)
        .create(&PostParams::default(), &schedule)
        .await
        .expect("create schedule");

    let (t0, clock) = manual_clock();
    let controller = s
        .controller("a")
        .clock(clock.clone())
        .start(s.client.clone());
    for (key, project) in [("shop-old", "shop"), ("web-old", "web")] {
        s.store
            .write(&request(key, project, "v1", "w"))
            .await
            .expect("write");
        counted(&s.api, key, 1).await;
    }
    clock.set(t0 + Duration::from_secs(2 * 3600));
    deleted(&s.api, "shop-old").await;
    assert!(
        s.api
            .get_opt(&name_for_key("web-old"))
            .await
            .expect("get")
            .is_some(),
        "a project without a TTL (no schedule, no default) is never groomed"
    );
    controller.stop().await;
}

/// The `mirror_resync_repairs_total{action}` counter in a metrics text.
fn repairs(metrics: &str, action: &str) -> u64 {
    let series = format!("handoff_controller_mirror_resync_repairs_total{{action=\"{action}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// A controller run with `--namespace-selector '!handoff.dev/controller'`
/// (the shared controller's default) manages unclaimed namespaces only: a
/// namespace claimed for another controller — as the test kit claims every
/// test namespace, so suites can run against a cluster where handoff
/// already runs — keeps its handoffs untouched until the claim goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_selector_leaves_claimed_namespaces_alone() {
    use k8s_openapi::api::core::v1::Namespace;
    let env = common::env();
    let claimed = env.namespace("ctl-claimed").await;
    let client = env.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut free = Namespace::default();
    free.metadata.generate_name = Some("ctl-unclaimed-".into());
    let free = namespaces
        .create(&Default::default(), &free)
        .await
        .expect("an unclaimed namespace")
        .name_any();
    let controller = InProcess::new(&claimed, "scoped", Arc::new(SystemClock))
        .prompt()
        .options(|o| {
            o.namespace = None;
            o.namespace_selector = handoff_core::names::UNCLAIMED_NAMESPACES.into();
        })
        .start(client.clone());
    let claimed_api: Api<Handoff> = Api::namespaced(client.clone(), &claimed);
    let free_api: Api<Handoff> = Api::namespaced(client.clone(), &free);
    let claimed_store = HandoffStore::new(client.clone(), &claimed);
    let free_store = HandoffStore::new(client.clone(), &free);
    claimed_store
        .write(&request("k", "shop", "one", "w"))
        .await
        .expect("write");
    free_store
        .write(&request("k", "shop", "one", "w"))
        .await
        .expect("write");
    counted(&free_api, "k", 1).await;
    // A later write, counted after the claimed namespace's event was seen.
    free_store
        .write(&request("k", "shop", "two", "w"))
        .await
        .expect("write");
    counted(&free_api, "k", 2).await;
    let untouched = claimed_api.get(&name_for_key("k")).await.expect("k");
    assert_eq!(untouched.status, None, "a claimed namespace is not managed");

    // The claim goes: the next change there is managed.
    let unclaim =
        serde_json::json!({"metadata": {"labels": {handoff_core::names::CONTROLLER_LABEL: null}}});
    namespaces
        .patch(
            &claimed,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&unclaim),
        )
        .await
        .expect("unclaim");
    let attempt = std::sync::atomic::AtomicUsize::new(0);
    eventually(
        "the claim gone from the watch",
        Duration::from_secs(30),
        || {
            // New content each time: an unchanged write makes no event.
            let n = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let store = claimed_store.clone();
            let api = claimed_api.clone();
            async move {
                store
                    .write(&request("k", "shop", &format!("three-{n}"), "w"))
                    .await
                    .ok()?;
                tokio::time::sleep(Duration::from_millis(500)).await;
                api.get(&name_for_key("k"))
                    .await
                    .ok()?
                    .status?
                    .revision
                    .map(|_| ())
            }
        },
    )
    .await;
    controller.stop().await;
}
