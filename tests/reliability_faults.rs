//! Faults under the running system: kube-apiserver restarted (etcd kept),
//! etcd restarted, PostgreSQL restarted while agents write through the
//! bridge, the controller killed with SIGKILL in the middle of a batch, and
//! PostgreSQL stalled under pending mirror writes (the controller's
//! `/healthz` names the wedged loop until it makes progress again).
//!
//! Calls during an outage get a retriable error (never a hang past the
//! bridge's bounded timeout); afterwards the same bridge and controller
//! processes serve again without a restart; nothing acknowledged is lost;
//! and after every fault the mirror converges: the live Handoffs and the
//! PostgreSQL rows are the same set, at the same revisions.
//!
//! Each test starts a control plane and a PostgreSQL of its own (it
//! restarts or kills parts of them); the bridge and the controller run as
//! separate processes, as in a cluster.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{HandoffSpec, HandoffStatus};
use handoff_kube::store::HandoffStore;
use handoff_testkit::mirror::{converged, mirrored_rows};
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::wait::eventually;
use handoff_testkit::{BridgeProcess, ControlPlane, ControllerProcess, Postgres};
use kube::api::Api;
use serde_json::{Value, json};

const TOKEN: &str = "fault-agent-token-0123456789";
const NAMESPACE: &str = "default";
/// Short lease timings, so a replacement leads soon after a crash.
const LEASE_FLAGS: [&str; 6] = [
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "250ms",
];

/// The resync interval of most controllers here.
const RESYNC_10S: &[&str] = &["--mirror-resync-interval", "10s"];

/// How a controller process starts: `ControllerProcess::start` or
/// `::start_cluster_wide` (binary, kubeconfig, namespace, identity, args).
type Start = fn(&Path, &Path, &str, &str, &[&str]) -> anyhow::Result<ControllerProcess>;

/// A control plane (with an agent token), its CRDs and a PostgreSQL.
struct System {
    plane: ControlPlane,
    postgres: Postgres,
    db: tokio_postgres::Client,
}

impl System {
    async fn start() -> Self {
        let plane = handoff_testkit::plane_with_admin_token(TOKEN, "agent")
            .await
            .unwrap_or_else(|e| panic!("control plane: {e:#}"));
        let postgres = tokio::task::spawn_blocking(Postgres::start)
            .await
            .expect("join")
            .unwrap_or_else(|e| panic!("postgres: {e:#}"));
        let db = connect(&postgres.url()).await;
        Self {
            plane,
            postgres,
            db,
        }
    }

    fn controller(&self, identity: &str) -> ControllerProcess {
        self.controller_with(ControllerProcess::start, identity, RESYNC_10S)
    }

    /// A controller process `identity` started by `start` (in NAMESPACE
    /// or cluster-wide), mirroring to the PostgreSQL, with the lease
    /// flags and `flags`.
    fn controller_with(&self, start: Start, identity: &str, flags: &[&str]) -> ControllerProcess {
        let url = self.postgres.url();
        let mut extra = vec!["--postgres-url", &url];
        extra.extend(flags);
        extra.extend(LEASE_FLAGS);
        start(
            Path::new(env!("CARGO_BIN_EXE_handoff")),
            self.plane.kubeconfig_path(),
            NAMESPACE,
            identity,
            &extra,
        )
        .unwrap_or_else(|e| panic!("controller: {e:#}"))
    }

    async fn api(&self) -> Api<Handoff> {
        Api::namespaced(self.plane.client().await.expect("client"), NAMESPACE)
    }

    /// Waits until CRs and mirror rows are the same set at the same
    /// revisions; returns how many there are.
    async fn converged(&mut self, after: &str) -> usize {
        let api = self.api().await;
        let started = Instant::now();
        loop {
            if let Some(n) = converged(&api, &self.db, NAMESPACE).await {
                return n;
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "the mirror did not converge within 180 s after {after}"
            );
            if self.db.is_closed() {
                self.db = connect(&self.postgres.url()).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Asserts that every write of `acknowledged` is stored and that the
    /// mirror converges on `rows` rows after `what`.
    async fn holds(&mut self, acknowledged: &[String], what: &str, rows: usize) {
        assert_all_stored(&self.api().await, acknowledged).await;
        assert_eq!(self.converged(what).await, rows);
    }
}

/// Asserts that the restart of `what` succeeded, with the whole error chain.
fn restarted<E: std::fmt::Display>(what: &str, result: Result<(), E>) {
    if let Err(e) = result {
        panic!("{what} restart: {e:#}");
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    handoff_testkit::connect_postgres(url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

fn writes(keys: &[String]) -> Value {
    Value::Array(
        keys.iter()
            .map(|k| {
                json!({"op": "call", "tool": "write_handoff",
                   "args": {"handoff_key": k, "project": "faults", "body": format!("body of {k}")}})
            })
            .collect(),
    )
}

fn batch(name: &str) -> Vec<String> {
    (0..10).map(|i| format!("{name}-{i}")).collect()
}

/// A retriable answer: a tool error saying so, or an HTTP 503 from the bridge.
fn is_retriable(result: &Value) -> bool {
    let text = result["text"].as_str().unwrap_or_default();
    let exception = result["exception"].as_str().unwrap_or_default();
    (result["is_error"] == json!(true) && text.contains("retriable")) || exception.contains("503")
}

async fn assert_all_stored(api: &Api<Handoff>, keys: &[String]) {
    for key in keys {
        let stored = api
            .get(&name_for_key(key))
            .await
            .unwrap_or_else(|e| panic!("{key} lost: {e}"));
        assert_eq!(stored.spec.body, format!("body of {key}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_of_apiserver_etcd_and_postgres_lose_nothing_and_the_mirror_converges() {
    let mut system = System::start().await;
    let mut controller = system.controller("survivor");
    let bridge = BridgeProcess::start(
        Path::new(env!("CARGO_BIN_EXE_handoff")),
        system.plane.kubeconfig_path(),
        NAMESPACE,
        &[],
    )
    .unwrap_or_else(|e| panic!("bridge: {e:#}"));
    let drive = |plan: Value| common::drive(&["http", bridge.url(), TOKEN, "implement"], plan, &[]);
    let write_batch = |name: &str| {
        let keys = batch(name);
        for r in drive(writes(&keys)) {
            assert_eq!(r["structured"]["outcome"], json!("created"), "{r}");
        }
        keys
    };
    let mut acknowledged = write_batch("before");
    assert_eq!(system.converged("the first writes").await, 10);

    system.plane.stop_apiserver();
    let during = drive(json!([
        {"op": "call", "tool": "write_handoff", "args": {"handoff_key": "during-outage", "project": "faults", "body": "x"}},
        {"op": "call", "tool": "get_handoff", "args": {"handoff_key": "before-0"}},
    ]));
    for r in &during {
        assert!(
            is_retriable(r),
            "an outage must give a retriable error: {r}"
        );
        assert!(
            !r["text"]
                .as_str()
                .unwrap_or_default()
                .contains("did not answer within"),
            "refused connections fail fast: {r}"
        );
    }
    restarted("apiserver", system.plane.start_apiserver().await);
    acknowledged.extend(write_batch("after-apiserver"));
    system
        .holds(&acknowledged, "the apiserver restart", 20)
        .await;

    system.plane.stop_etcd();
    let during = drive(writes(&["during-etcd-outage".to_owned()]));
    assert!(
        is_retriable(&during[0]),
        "etcd down must give a retriable error: {}",
        during[0]
    );
    restarted("etcd", system.plane.start_etcd().await);
    acknowledged.extend(write_batch("after-etcd"));
    system.holds(&acknowledged, "the etcd restart", 30).await;

    // PostgreSQL down: agents keep writing (the bridge reads the apiserver),
    // the controller keeps counting and catches the mirror up afterwards.
    let errors_before = mirror_errors(&controller).await;
    system.postgres.stop_server();
    acknowledged.extend(write_batch("during-postgres-outage"));
    // The controller saw the outage: its mirror writes failed (metric) and
    // the handoffs written meanwhile say so (`Mirrored` False).
    eventually(
        "the PostgreSQL outage observed",
        Duration::from_secs(60),
        || async {
            let errors = mirror_errors(&controller).await;
            let unmirrored = unmirrored_handoffs(&system.api().await).await;
            if errors > errors_before && unmirrored > 0 {
                return Ok(());
            }
            Err(format!(
                "mirror errors {errors_before} → {errors}, {unmirrored} handoffs with Mirrored=False\n{}",
                controller.log()
            ))
        },
    )
    .await;
    restarted(
        "postgres",
        tokio::task::block_in_place(|| system.postgres.restart_server()),
    );
    acknowledged.extend(write_batch("after-postgres"));
    system
        .holds(&acknowledged, "the PostgreSQL restart", 50)
        .await;
    eventually(
        "no Mirrored=False left after PostgreSQL came back",
        Duration::from_secs(60),
        || async { unmirrored_handoffs(&system.api().await).await == 0 },
    )
    .await;

    assert!(
        controller.running(),
        "the controller recovers from every outage without a restart:\n{}",
        controller.log()
    );
}

/// `handoff_controller_mirror_errors_total` of a running controller.
async fn mirror_errors(controller: &ControllerProcess) -> f64 {
    metric(
        &metrics_text(controller).await,
        "handoff_controller_mirror_errors_total",
    )
    .unwrap_or(0.0)
}

/// Handoffs whose `Mirrored` condition is False (PostgreSQL unavailable).
async fn unmirrored_handoffs(api: &Api<Handoff>) -> usize {
    with_status(api, |_, s| {
        s.conditions.iter().any(|c| {
            c.type_ == "Mirrored" && c.status == "False" && c.reason == "MirrorUnavailable"
        })
    })
    .await
}

/// How many handoffs of `api` have a status of which `holds` is true
/// (none when the list fails).
async fn with_status(
    api: &Api<Handoff>,
    holds: impl Fn(&Handoff, &HandoffStatus) -> bool,
) -> usize {
    let Ok(list) = api.list(&Default::default()).await else {
        return 0;
    };
    list.items
        .iter()
        .filter(|h| h.status.as_ref().is_some_and(|s| holds(h, s)))
        .count()
}

fn request(key: &str, body: String) -> HandoffSpec {
    spec(key).project("faults").body(body).by("writer")
}

/// Writes `body` under `key` (a failure fails the test).
async fn write(store: &HandoffStore, key: &str, body: &str) {
    store
        .write(&request(key, body.to_owned()))
        .await
        .unwrap_or_else(|e| panic!("write {key} ({body}): {e}"));
}

/// Writes `<prefix>-000` … `<prefix>-<keys - 1>` with the body
/// `<key> <round>`, 8 at a time.
async fn write_round(store: &HandoffStore, prefix: &str, keys: usize, round: &str) {
    concurrently(store, keys, 8, |store, i| async move {
        let key = format!("{prefix}-{i:03}");
        write(&store, &key, &format!("{key} {round}")).await;
    })
    .await;
}

/// Runs `writes(store, i)` for `i` in `0..n`, `width` at a time.
async fn concurrently<F, Fut>(store: &HandoffStore, n: usize, width: usize, writes: F)
where
    F: Fn(HandoffStore, usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    futures::stream::iter(0..n)
        .map(|i| writes(store.clone(), i))
        .buffer_unordered(width)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_with_sigkill_mid_batch_is_replaced_and_the_mirror_converges() {
    const TOTAL: usize = 600;
    let mut system = System::start().await;
    let store = HandoffStore::new(system.plane.client().await.expect("client"), NAMESPACE);
    let crashing = system.controller("crashing");

    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            concurrently(&store, TOTAL, 16, |store, i| async move {
                let key = format!("issue-{i:04}");
                write(&store, &key, &format!("body {i}")).await;
                if i % 10 == 0 {
                    write(&store, &key, &format!("body {i} v2")).await;
                }
            })
            .await;
        })
    };
    // Kill once the controller has mirrored part of the batch.
    let started = Instant::now();
    let mirrored_at_kill = loop {
        // No table yet until the controller has run its migrations.
        let n = mirrored_rows(&system.db, NAMESPACE)
            .await
            .map_or(0, |rows| rows.len());
        if n >= 100 {
            break n;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the controller mirrored {n} handoffs in 120 s:\n{}",
            crashing.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    crashing.kill();
    assert!(
        mirrored_at_kill < TOTAL,
        "killed mid-batch: {mirrored_at_kill} of {TOTAL} mirrored"
    );
    writer.await.expect("writes");
    // While no controller runs: deletes (no finalizer holds them; the
    // replacement's resync deletes their rows).
    for i in (0..TOTAL).step_by(20) {
        store
            .delete(&format!("issue-{i:04}"))
            .await
            .expect("delete");
    }

    let _replacement = system.controller("replacement");
    assert_eq!(
        system.converged("the SIGKILL and the replacement").await,
        TOTAL - TOTAL / 20,
        "{TOTAL} written, {} deleted",
        TOTAL / 20
    );
    for i in (10..TOTAL).step_by(20) {
        let key = format!("issue-{i:04}");
        let row = system
            .db
            .query_one(
                "SELECT body FROM handoffs WHERE namespace = $1 AND handoff_key = $2",
                &[&NAMESPACE, &key],
            )
            .await
            .expect("row");
        assert_eq!(row.get::<_, String>(0), format!("body {i} v2"), "{key}");
    }
}

/// The schemas of the three CRDs made permissive, so objects that the
/// controller's types cannot read can be stored (as an older version or a
/// hand edit would leave them); `restore` puts the real schemas back.
async fn loosen_schemas(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in [
        "handoffs.handoff.dev",
        "brainstormschedules.handoff.dev",
        "handoffoffers.handoff.dev",
    ] {
        let mut crd = crds.get(name).await.expect("crd");
        for version in &mut crd.spec.versions {
            version.selectable_fields = None;
            version.schema = Some(
                serde_json::from_value(json!({"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                }}))
                .expect("schema"),
            );
        }
        crds.replace(name, &Default::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("loosen {name}: {e}"));
    }
}

/// Creates `object` (raw JSON) in the test namespace, retrying while the
/// apiserver still validates against the old schema.
async fn create_raw(client: &kube::Client, plural: &str, object: Value) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
    let kind = object["kind"].as_str().expect("kind").to_owned();
    let gvk = GroupVersionKind::gvk("handoff.dev", "v1alpha1", &kind);
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    );
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => return,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => panic!("create a poisoned {kind}: {err}"),
        }
    }
}

/// One value of a metric in an OpenMetrics text (`series` includes labels).
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

async fn metrics_text(controller: &ControllerProcess) -> String {
    let addr = controller.metrics_addr().to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&addr).expect("metrics");
        write!(stream, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("response");
        text
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_objects_are_reported_and_skipped_and_every_loop_goes_on() {
    use handoff_core::offers::{offer_name, slot};
    use k8s_openapi::api::core::v1::Event;
    use kube::api::ListParams;

    let system = System::start().await;
    let client = system.plane.client().await.expect("client");

    // Objects the controller's types cannot read, stored before it starts
    // (its first list contains them).
    loosen_schemas(&client).await;
    for (plural, kind, spec) in [
        (
            "handoffs",
            "Handoff",
            json!({"handoffKey": "poisoned", "project": "faults", "body": 42}),
        ),
        (
            "brainstormschedules",
            "BrainstormSchedule",
            json!({"project": ["not", "a", "string"]}),
        ),
        ("handoffoffers", "HandoffOffer", json!({"to": 7})),
    ] {
        let object = json!({
            "apiVersion": "handoff.dev/v1alpha1", "kind": kind,
            "metadata": {"name": "poisoned", "namespace": NAMESPACE},
            "spec": spec,
        });
        create_raw(&client, plural, object).await;
    }
    handoff_testkit::install_crds(&client)
        .await
        .unwrap_or_else(|e| panic!("restore the CRDs: {e:#}"));

    // Good objects of every loop next to them.
    let store = HandoffStore::new(client.clone(), NAMESPACE);
    let good_spec = spec("good").project("faults").body("a readable handoff");
    store.write(&good_spec).await.expect("write a good handoff");
    let schedules: Api<handoff_core::api::BrainstormSchedule> =
        Api::namespaced(client.clone(), NAMESPACE);
    let schedule: handoff_core::api::BrainstormSchedule = serde_json::from_value(json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
        "metadata": {"name": "good", "namespace": NAMESPACE},
        "spec": {"project": "faults", "schedule": "0 6 * * *",
                 "refine": {"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "agent", "image": "agent"}]}}}}},
                 "brainstorm": {"jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "agent", "image": "agent"}]}}}}}},
    }))
    .expect("schedule");
    schedules
        .create(&Default::default(), &schedule)
        .await
        .expect("create a good schedule");
    // Two pending offers in one slot (as a crashed offerer leaves them): the
    // offer loop supersedes the older.
    let offers: Api<handoff_core::api::HandoffOffer> = Api::namespaced(client.clone(), NAMESPACE);
    let slot = slot("faults", "dev-lead");
    for seq in [1, 2] {
        let offer: handoff_core::api::HandoffOffer = serde_json::from_value(json!({
            "apiVersion": "handoff.dev/v1alpha1", "kind": "HandoffOffer",
            "metadata": {"name": offer_name(&slot, seq), "namespace": NAMESPACE,
                         "labels": {handoff_core::names::SLOT_LABEL: slot, handoff_core::names::TO_LABEL: "dev-lead", "project": "faults"}},
            "spec": {"project": "faults", "to": "dev-lead", "fromKey": format!("key-{seq}"), "session": format!("s-{seq}")},
        }))
        .expect("offer");
        offers
            .create(&Default::default(), &offer)
            .await
            .expect("create a good offer");
    }

    let controller = system.controller("poison-test");
    let handoffs = system.api().await;
    eventually("every loop past the poisoned objects", Duration::from_secs(60), || async {
        let counted = handoffs
            .get(&name_for_key("good"))
            .await
            .ok()
            .and_then(|h| h.status)
            .and_then(|s| s.revision);
        let scheduled = schedules
            .get("good")
            .await
            .ok()
            .and_then(|s| s.status)
            .and_then(|s| s.next_schedule_time);
        let superseded = offers
            .get(&offer_name(&slot, 1))
            .await
            .ok()
            .map(|o| o.phase());
        if counted == Some(1)
            && scheduled.is_some()
            && superseded == Some(handoff_core::api::OfferPhase::Superseded)
        {
            return Ok(());
        }
        Err(format!(
            "a loop stalled behind a poisoned object: handoff revision {counted:?}, schedule next tick {scheduled:?}, older offer {superseded:?}\n{}",
            controller.log()
        ))
    })
    .await;
    let rows = mirrored_rows(&system.db, NAMESPACE).await.expect("rows");
    assert_eq!(
        rows.keys().cloned().collect::<Vec<_>>(),
        ["good".to_owned()],
        "the good handoff is mirrored, the poisoned one is not"
    );

    // Each poisoned object is reported: an Event on it, a metric, a log line.
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    let text = eventually(
        "every poisoned object counted",
        Duration::from_secs(30),
        || async {
            let text = metrics_text(&controller).await;
            let reported = ["Handoff", "BrainstormSchedule", "HandoffOffer"]
                .iter()
                .all(|kind| {
                    metric(
                        &text,
                        &format!("handoff_controller_invalid_objects_total{{kind=\"{kind}\"}}"),
                    ) == Some(1.0)
                });
            if reported {
                Ok(text)
            } else {
                Err(format!("not every poisoned object was counted:\n{text}"))
            }
        },
    )
    .await;
    for kind in ["Handoff", "BrainstormSchedule", "HandoffOffer"] {
        let found = events
            .list(&ListParams::default().fields(&format!(
                "involvedObject.name=poisoned,involvedObject.kind={kind},reason=InvalidObject"
            )))
            .await
            .expect("events");
        assert_eq!(
            found.items.len(),
            1,
            "one InvalidObject Event on the poisoned {kind}"
        );
        let note = found.items[0].message.clone().unwrap_or_default();
        assert!(
            note.contains(&format!("this {kind} does not match")),
            "{note}"
        );
        assert_eq!(found.items[0].type_.as_deref(), Some("Warning"));
    }
    assert!(
        !text.contains(
            "handoff_controller_reconcile_errors_total{kind=\"Handoff\",category=\"invalid\","
        ),
        "a poisoned object is skipped, not retried as an error:\n{text}"
    );
    assert!(
        controller
            .log()
            .contains("skipping an object that does not deserialize"),
        "the log names the skipped object:\n{}",
        controller.log()
    );
}

/// Process groups stopped with SIGSTOP (a stall, not a crash: connections
/// stay open and nothing answers); continued on drop, so a failing test
/// never leaves them frozen.
struct Frozen(Vec<i32>);

impl Frozen {
    fn group_of(pid: u32) -> Self {
        let mut frozen = Self(Vec::new());
        frozen.stop(pid);
        frozen
    }

    /// A PostgreSQL server: the postmaster's group, then the group of each
    /// of its children (backends, checkpointer, …), which PostgreSQL makes
    /// leaders of their own groups (`setsid`), so stopping only the
    /// postmaster's group would leave open connections served.
    fn postgres(postmaster: u32) -> Self {
        let mut frozen = Self::group_of(postmaster);
        let children = children_of(postmaster);
        assert!(
            !children.is_empty(),
            "postmaster {postmaster} has no children"
        );
        for child in children {
            frozen.stop(child);
        }
        frozen
    }

    fn stop(&mut self, pid: u32) {
        let group = -i32::try_from(pid).expect("pid");
        // SAFETY: kill(2) with a negative pid signals that process group.
        let rc = unsafe { libc::kill(group, libc::SIGSTOP) };
        assert_eq!(rc, 0, "SIGSTOP {pid}: {}", std::io::Error::last_os_error());
        self.0.push(group);
    }
}

/// The processes whose parent is `parent` (from /proc).
fn children_of(parent: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            children.push(pid);
        }
    }
    children
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for group in self.0.iter().rev() {
            // SAFETY: as above.
            unsafe {
                libc::kill(*group, libc::SIGCONT);
            }
        }
    }
}

/// `handoff_controller_leader` of each replica.
async fn leaders(replicas: &[&ControllerProcess]) -> Vec<bool> {
    let mut out = Vec::new();
    for replica in replicas {
        let text = metrics_text(replica).await;
        out.push(metric(&text, "handoff_controller_leader") == Some(1.0));
    }
    out
}

/// Waits until exactly one replica leads; returns its index.
async fn one_leader(replicas: &[&ControllerProcess], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let now = leaders(replicas).await;
        if now.iter().filter(|l| **l).count() == 1 {
            return now.iter().position(|l| *l).expect("one");
        }
        assert!(Instant::now() < deadline, "no single leader: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_by_a_stalled_apiserver_steps_down_and_one_leader_writes_after() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Event;
    use kube::api::ListParams;

    const IDENTITIES: [&str; 2] = ["replica-a", "replica-b"];
    let system = System::start().await;
    let a = system.controller(IDENTITIES[0]);
    let b = system.controller(IDENTITIES[1]);
    let replicas = [&a, &b];
    one_leader(&replicas, Duration::from_secs(30)).await;

    // Stall the apiserver under the leader: every request hangs.
    let apiserver = system.plane.pids()[1];
    let frozen = Frozen::group_of(apiserver);
    let since = Instant::now();
    // The leader's renewal cannot answer within its renew deadline (2 s):
    // it steps down; the other cannot acquire meanwhile.
    loop {
        let now = leaders(&replicas).await;
        if now == [false, false] {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(15),
            "a replica still leads {:?} after the apiserver stalled: {now:?}\n{}",
            since.elapsed(),
            a.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Past the lease duration (3 s) nobody leads while it stays stalled.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        leaders(&replicas).await,
        [false, false],
        "a replica led while the apiserver was stalled"
    );
    drop(frozen);

    // Afterwards exactly one leads, the Lease names it, and only it writes.
    let leader = one_leader(&replicas, Duration::from_secs(30)).await;
    for _ in 0..20 {
        let now = leaders(&replicas).await;
        assert!(
            now.iter().filter(|l| **l).count() <= 1,
            "two leaders: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = system.plane.client().await.expect("client");
    let lease: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = lease
        .get("handoff-controller")
        .await
        .expect("lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some(IDENTITIES[leader]));
    // A creation has no Event: write, wait until it is counted, write new
    // content; the update's Superseded Event names who counted it.
    let store = HandoffStore::new(client.clone(), NAMESPACE);
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), NAMESPACE);
    let name = name_for_key("after-the-stall");
    let revision = || async {
        handoffs
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .and_then(|h| h.status?.revision)
    };
    write(&store, "after-the-stall", "written once").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while revision().await != Some(1) {
        assert!(
            Instant::now() < deadline,
            "the new handoff was never counted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    write(&store, "after-the-stall", "and superseded once").await;
    let events: Api<Event> = Api::namespaced(client, NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(30);
    let superseded = loop {
        let found = events
            .list(
                &ListParams::default()
                    .fields(&format!("involvedObject.name={name},reason=Superseded")),
            )
            .await
            .expect("events")
            .items;
        if !found.is_empty() {
            break found;
        }
        assert!(Instant::now() < deadline, "the update was never counted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(superseded.len(), 1, "counted once");
    assert_eq!(
        revision().await,
        Some(2),
        "two revisions, each counted once"
    );
    assert_eq!(
        superseded[0].reporting_instance.as_deref(),
        Some(IDENTITIES[leader]),
        "counted by the leader"
    );
}

/// How long PostgreSQL stays stalled in the tests below.
const STALL: Duration = Duration::from_secs(30);

/// Handoffs of `api` whose status counts their last write (a revision,
/// observed at the current generation, with its content hash).
async fn counted_last_write(api: &Api<Handoff>) -> usize {
    with_status(api, |h, s| {
        s.revision.is_some()
            && s.observed_generation == h.metadata.generation
            && s.content_hash.as_deref() == Some(h.spec.content_hash().as_str())
    })
    .await
}

/// Asserts that `controller` runs on as the process `pid` it started as.
fn survived_the_stall(controller: &mut ControllerProcess, pid: u32) {
    assert!(
        controller.running(),
        "the controller survived the stall:\n{}",
        controller.log()
    );
    assert_eq!(controller.pid(), pid, "the same controller process");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stalled_for_30_s_under_200_writes_holds_up_no_status_and_the_mirror_converges() {
    const KEYS: usize = 100;
    let mut system = System::start().await;
    let mut controller = system.controller("stalled-postgres");
    let pid = controller.pid();
    let store = HandoffStore::new(system.plane.client().await.expect("client"), NAMESPACE);
    let api = system.api().await;
    write(&store, "before-the-stall", "mirrored").await;
    assert_eq!(system.converged("the first write").await, 1);
    let errors_before = mirror_errors(&controller).await;

    // Stopped, not dead: its sockets stay open and nothing answers.
    let frozen = Frozen::postgres(system.postgres.pid());
    let stalled_at = Instant::now();
    // 200 writes: each key created, then updated.
    for round in ["v1", "v2"] {
        write_round(&store, "stall", KEYS, round).await;
    }
    // Every write is counted while PostgreSQL is still stalled.
    let remaining = STALL.saturating_sub(stalled_at.elapsed());
    eventually(
        "every write counted during the stall",
        remaining,
        || async { (counted_last_write(&api).await == KEYS + 1).then_some(()) },
    )
    .await;
    let counted_after = stalled_at.elapsed();
    assert!(
        mirror_errors(&controller).await > errors_before,
        "the controller never saw the stall\n{}",
        controller.log()
    );
    tokio::time::sleep(STALL.saturating_sub(stalled_at.elapsed())).await;
    drop(frozen);
    eprintln!(
        "200 writes counted {:.1} s into a {} s PostgreSQL stall",
        counted_after.as_secs_f64(),
        STALL.as_secs()
    );

    assert_eq!(system.converged("the stall").await, KEYS + 1);
    // Converged compares revisions: a key whose v1 row landed as the stall
    // began and whose v2 was then counted as revision 1 (its v1 status
    // write lost to v2) matches at revision 1 until the controller's retry
    // (with backoff, up to a minute) writes the v2 row at the newer
    // resourceVersion.
    let db = &system.db;
    eventually(
        "every row holds the last write",
        Duration::from_secs(180),
        || async {
            let v2: i64 = db
                .query_one(
                    "SELECT count(*) FROM handoffs WHERE namespace = $1 AND body LIKE '% v2'",
                    &[&NAMESPACE],
                )
                .await
                .ok()?
                .get(0);
            (v2 == KEYS as i64).then_some(())
        },
    )
    .await;
    survived_the_stall(&mut controller, pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_deleted_while_postgres_is_stalled_is_gone_within_60_s_and_its_rows_go_after() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{DeleteParams, ListParams, PostParams};

    const KEYS: usize = 100;
    const DOOMED: &str = "doomed";
    let system = System::start().await;
    let client = system.plane.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(DOOMED.into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let mut controller = system.controller_with(
        ControllerProcess::start_cluster_wide,
        "namespace-deleter",
        RESYNC_10S,
    );
    let pid = controller.pid();
    let store = HandoffStore::new(client.clone(), DOOMED);
    for round in ["v1", "v2"] {
        write_round(&store, "doomed", KEYS, round).await;
    }
    let handoffs: Api<Handoff> = Api::namespaced(client.clone(), DOOMED);
    let db = &system.db;
    let history = |namespace: &'static str| async move {
        db.query_one(
            "SELECT count(*) FROM handoff_revisions WHERE namespace = $1",
            &[&namespace],
        )
        .await
        .map(|r| r.get::<_, i64>(0))
    };
    eventually(
        "every handoff mirrored",
        Duration::from_secs(120),
        || async {
            let n = converged(&handoffs, &system.db, DOOMED).await?;
            let revisions = history(DOOMED).await.ok()?;
            (n == KEYS && revisions >= KEYS as i64).then_some(())
        },
    )
    .await;

    let errors_before = mirror_errors(&controller).await;
    let frozen = Frozen::postgres(system.postgres.pid());
    let deleted_at = Instant::now();
    namespaces
        .delete(DOOMED, &DeleteParams::default())
        .await
        .expect("delete namespace");
    // What the namespace controller does (envtest runs none): delete the
    // namespace's objects, wait until they are gone, then finalize it.
    handoffs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the handoffs");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), DOOMED);
    leases
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the leases");
    let limit = Duration::from_secs(60);
    eventually("the namespace's handoffs gone", limit, || async {
        let left = handoffs.list(&ListParams::default()).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await;
    let mut terminating = namespaces.get(DOOMED).await.expect("terminating namespace");
    if let Some(spec) = terminating.spec.as_mut() {
        spec.finalizers = Some(Vec::new());
    }
    namespaces
        .replace_subresource("finalize", DOOMED, &PostParams::default(), &terminating)
        .await
        .expect("finalize the namespace");
    eventually(
        "the namespace gone",
        limit.saturating_sub(deleted_at.elapsed()),
        || async {
            namespaces
                .get_opt(DOOMED)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    let gone_after = deleted_at.elapsed();
    // The controller's deletes of the rows failed meanwhile; PostgreSQL
    // stays stalled for the rest of the stall.
    eventually("the row deletes failing", STALL, || async {
        (mirror_errors(&controller).await > errors_before).then_some(())
    })
    .await;
    tokio::time::sleep(STALL.saturating_sub(deleted_at.elapsed())).await;
    drop(frozen);
    eprintln!(
        "a namespace of {KEYS} handoffs was gone {:.1} s after its deletion, PostgreSQL stalled",
        gone_after.as_secs_f64()
    );

    // PostgreSQL back: resync deletes the orphan rows and their history.
    eventually(
        "the namespace's rows and history deleted",
        Duration::from_secs(120),
        || async {
            let rows = mirrored_rows(&system.db, DOOMED).await.ok()?;
            let revisions = history(DOOMED).await.ok()?;
            (rows.is_empty() && revisions == 0).then_some(())
        },
    )
    .await;
    survived_the_stall(&mut controller, pid);
}

/// The status line and body of `GET path` on the controller's metrics address.
async fn probe(controller: &ControllerProcess, path: &str) -> (String, String) {
    let addr = controller.metrics_addr().to_owned();
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&addr).expect("probe");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("request");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("response");
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (
            head.lines().next().unwrap_or_default().to_owned(),
            body.to_owned(),
        )
    })
    .await
    .expect("join")
}

/// Polls `path` until its status line contains `status`; returns the body.
async fn probe_until(
    controller: &ControllerProcess,
    path: &str,
    status: &str,
    within: Duration,
) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (line, body) = probe(controller, path).await;
        if line.contains(status) {
            return body;
        }
        if Instant::now() >= deadline {
            panic!(
                "{path} did not answer {status} within {within:?}: {line} {body}\n{}\n{}",
                metrics_text(controller).await,
                controller.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the metrics hold `series` with the value `value`.
async fn metric_is(controller: &ControllerProcess, series: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = metrics_text(controller).await;
        if metric(&text, series) == Some(value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{series} is not {value} within 60 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_wedged_by_a_stalled_postgres_fails_healthz_until_it_progresses_again() {
    let mut system = System::start().await;
    // One resync at the start of leadership only: the Handoff loop is the
    // one the stall catches.
    let controller = system.controller_with(
        ControllerProcess::start,
        "wedged",
        &["--mirror-resync-interval", "1h", "--wedged-after", "10s"],
    );
    let client = system.plane.client().await.expect("client");
    let store = HandoffStore::new(client, NAMESPACE);
    write(&store, "before-the-stall", "mirrored").await;
    assert_eq!(system.converged("the first write").await, 1);
    // Nothing pending in either loop that reaches PostgreSQL.
    metric_is(
        &controller,
        "handoff_controller_loop_pending{loop=\"resync\"}",
        0.0,
    )
    .await;
    metric_is(
        &controller,
        "handoff_controller_loop_pending{loop=\"handoff\"}",
        0.0,
    )
    .await;
    assert_eq!(
        probe(&controller, "/healthz").await,
        ("HTTP/1.1 200 OK".to_owned(), "ok".to_owned())
    );

    // PostgreSQL stalls (every backend too) while a write waits for the mirror.
    let frozen = Frozen::postgres(system.postgres.pid());
    write(&store, "during-the-stall", "waits for the mirror").await;
    // Whether the mirror call hangs or fails on a timeout, the Handoff loop
    // makes no progress with its pending work.
    let reason = probe_until(&controller, "/healthz", " 503 ", Duration::from_secs(120)).await;
    assert!(
        reason.starts_with("wedged: loop handoff ") && reason.ends_with("(limit 10s)"),
        "{reason}"
    );
    assert_eq!(reason.lines().count(), 1, "{reason}");
    let text = metrics_text(&controller).await;
    assert_eq!(
        metric(&text, "handoff_controller_loop_pending{loop=\"handoff\"}"),
        Some(1.0),
        "{text}"
    );
    assert!(
        metric(
            &text,
            "handoff_controller_loop_last_progress_seconds{loop=\"handoff\"}"
        )
        .is_some_and(|s| s > 10.0),
        "{text}"
    );
    assert_eq!(
        probe(&controller, "/readyz").await.0,
        "HTTP/1.1 200 OK",
        "readiness is another question"
    );

    // Continued: the pending write is mirrored and the loop is live again.
    drop(frozen);
    let body = probe_until(&controller, "/healthz", " 200 ", Duration::from_secs(180)).await;
    assert_eq!(body, "ok");
    assert_eq!(system.converged("the stall").await, 2);
}

/// A row of the batcher test: `key` of object `uid` at `revision`.
fn batch_row(key: &str, uid: &str, revision: i64) -> handoff_mirror::Row {
    handoff_mirror::Row {
        id: uid.into(),
        name: handoff_core::api::naming::name_for_key(key),
        namespace: "batch-stall".into(),
        handoff_key: key.into(),
        project: "p".into(),
        repo: None,
        kind: None,
        created_by: "writer".into(),
        body: format!("{key} revision {revision}"),
        revision,
        resource_version: revision * 10,
        created_at: jiff::Timestamp::UNIX_EPOCH,
        updated_at: jiff::Timestamp::UNIX_EPOCH,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_postgres_fails_a_batchs_callers_with_its_timeout_and_later_batches_write() {
    use handoff_mirror::batch::{BatchSettings, Batcher};
    use handoff_mirror::pool::PoolSettings;
    use handoff_mirror::{Mirror, MirrorError};
    const ROWS: usize = 4;
    let postgres = tokio::task::spawn_blocking(Postgres::start)
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("postgres: {e:#}"));
    let timeout = Duration::from_secs(2);
    let mirror = Mirror::new(&postgres.url(), true)
        .and_then(|m| m.with_pool(PoolSettings { timeout, size: 2 }))
        .expect("mirror");
    let batcher = Batcher::start(
        std::sync::Arc::new(mirror),
        BatchSettings {
            rows: std::num::NonZeroUsize::new(ROWS).expect("rows"),
            linger: Duration::from_secs(3600),
        },
        |_| {},
    );
    let uid = |i: usize| format!("00000000-0000-4000-8000-{i:012}");
    let rows = |revision: i64| -> Vec<handoff_mirror::Row> {
        (0..ROWS)
            .map(|i| batch_row(&format!("k{i}"), &uid(i), revision))
            .collect()
    };
    let write = |rows: Vec<handoff_mirror::Row>| {
        let batcher = &batcher;
        async move { futures::future::join_all(rows.iter().map(|row| batcher.upsert(row))).await }
    };
    for written in write(rows(1)).await {
        assert!(written.expect("before the stall"));
    }

    let frozen = Frozen::postgres(postgres.pid());
    for outcome in write(rows(2)).await {
        let err = outcome.expect_err("PostgreSQL is stalled");
        assert!(
            matches!(&err, MirrorError::Batch(inner) if matches!(inner.as_ref(), MirrorError::Timeout(t) if *t == timeout)),
            "the batch's own timeout fails each caller: {err:?}"
        );
    }
    // Still down: failed fast by the gate, or by a probe's own timeout.
    for outcome in write(rows(2)).await {
        let err = outcome.expect_err("still stalled");
        assert!(
            matches!(&err, MirrorError::Batch(inner) if inner.is_unavailability()),
            "{err:?}"
        );
    }
    drop(frozen);

    // Once it answers again, the next batches write (a probe first).
    let mut attempts = 0;
    loop {
        attempts += 1;
        let outcomes = write(rows(3)).await;
        if outcomes.iter().all(Result::is_ok) {
            break;
        }
        assert!(
            attempts < 60,
            "no batch written after the stall: {outcomes:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let db = connect(&postgres.url()).await;
    let stored: Vec<(String, i64, String)> = db
        .query(
            "SELECT handoff_key, revision, body FROM handoffs WHERE namespace = 'batch-stall' ORDER BY handoff_key",
            &[],
        )
        .await
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        stored,
        (0..ROWS)
            .map(|i| (format!("k{i}"), 3, format!("k{i} revision 3")))
            .collect::<Vec<_>>()
    );
}
