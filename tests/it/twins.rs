//! Twins and squats, on the shared plane (which has no admission webhook, so
//! the objects the webhook refuses on an installation can be made here, as
//! they could be before it): a *twin* is a Handoff under a name of its own
//! holding another object's key, a *squat* one at the name derived from one
//! key holding another key. With the controller mirroring into PostgreSQL
//! and the real bridge answering, neither reaches any answer — lists (mirror
//! and apiserver), search, revisions, a past revision, a diff — nor any
//! mirror row or history; the controller reports each (the `KeyBound`
//! condition, one Warning Event, the `noncanonical_handoffs` gauge); and
//! deleting them leaves the key's handoff and its history as they were.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::agents::writer_token;
use common::{Bridge, apply_agent_roles, call, env, events_with_reason, ok};
use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::time::SystemClock;
use handoff_testkit as testing;
use handoff_testkit::controller::{InProcess, postgres};
use handoff_testkit::spec::{Fields, counted_named, spec};
use handoff_testkit::wait::eventually;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const VICTIM: &str = "acme/api#7";
/// The key whose derived name the squat sits at.
const SQUATTED: &str = "acme/api#8";
/// The key the squat holds.
const SQUAT_KEY: &str = "acme/api#9";

/// The objects (uids) the mirror's history of `namespace` holds revisions of.
async fn history_objects(db: &tokio_postgres::Client, namespace: &str) -> Vec<String> {
    db.query(
        "SELECT DISTINCT handoff_id::text FROM handoff_revisions WHERE namespace = $1",
        &[&namespace],
    )
    .await
    .expect("history")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// `(key, body)` of each entry of a list or search answer.
fn entries(answer: &Value, field: &str, body: &str) -> Vec<(String, String)> {
    ok(answer)[field]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["handoff_key"].as_str().unwrap_or_default().to_owned(),
                e[body].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Records `what` when `got != want` (every check of the test is seen at
/// once, not only the first that fails).
fn check<T: PartialEq + std::fmt::Debug>(problems: &mut Vec<String>, what: &str, got: T, want: T) {
    if got != want {
        problems.push(format!("{what}: got {got:?}, want {want:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twins_and_squats_reach_no_answer_and_no_mirror_row_and_are_reported() {
    let env = env();
    let ns = env.namespace("twins").await;
    let client = env.client().await;
    let (url, db) = postgres().await;
    apply_agent_roles(env);
    let token = writer_token(env, &ns, "writer").await;
    let controller = InProcess::new(&ns, "a", Arc::new(SystemClock))
        .mirror(&url)
        .options(|o| o.mirror_resync_interval = Duration::from_secs(1))
        .start(client.clone());
    let via_pg = Bridge::start_with(env, &ns, &["--postgres-url", &url]);
    let via_api = Bridge::start(env, &ns);
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);

    // The victim, through the bridge: two revisions.
    for body in ["payments victim revision 1", "payments victim revision 2"] {
        ok(&via_pg.drive(
            &token,
            "",
            json!([call(
                "write_handoff",
                json!({"handoff_key": VICTIM, "project": "shop", "body": body})
            )]),
        )[0]);
    }
    let victim = counted_named(&api, &name_for_key(VICTIM), 2).await;
    let victim_uid = victim.uid().expect("uid");
    eventually("the victim mirrored", Duration::from_secs(60), || async {
        (testing::mirror::converged(&api, &db, &ns).await == Some(1)).then_some(())
    })
    .await;

    // The twin (a name of its own, the victim's key, no writer) and the
    // squat (at the derived name of SQUATTED, holding SQUAT_KEY), as
    // kubectl would make them; the twin then gets a second revision.
    let twin_name = "my-handoff";
    let squat_name = name_for_key(SQUATTED);
    for (name, key, body) in [
        (twin_name, VICTIM, "payments twin revision 1"),
        (squat_name.as_str(), SQUAT_KEY, "payments squat revision 1"),
    ] {
        api.create(
            &PostParams::default(),
            &Handoff::new(name, spec(key).body(body)),
        )
        .await
        .expect("create");
    }
    counted_named(&api, twin_name, 1).await;
    api.patch(
        twin_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"body": "payments twin revision 2"}})),
    )
    .await
    .expect("the twin's second revision");
    let twin = counted_named(&api, twin_name, 2).await;
    let squat = counted_named(&api, &squat_name, 1).await;
    // Two resync passes begun after both were counted: one has run whole.
    let passes = controller.metrics.resyncs();
    eventually("two resync passes", Duration::from_secs(60), || async {
        (controller.metrics.resyncs() >= passes + 2).then_some(())
    })
    .await;

    let mut problems = Vec::new();
    let victim_only = vec![(VICTIM.to_owned(), "payments victim revision 2".to_owned())];
    let list = json!([call(
        "list_handoffs",
        json!({"project": "shop", "include_body": true})
    )]);
    for (path, bridge) in [("mirror", &via_pg), ("apiserver", &via_api)] {
        let listed = bridge.drive(&token, "", list.clone());
        check(
            &mut problems,
            &format!("list_handoffs via the {path}"),
            entries(&listed[0], "handoffs", "body"),
            victim_only.clone(),
        );
        let found = bridge.drive(
            &token,
            "",
            json!([call(
                "search_handoffs",
                json!({"project": "shop", "query": "payments"})
            )]),
        );
        check(
            &mut problems,
            &format!("search_handoffs via the {path}: keys"),
            entries(&found[0], "matches", "handoff_key")
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>(),
            vec![VICTIM.to_owned()],
        );
        let preview = ok(&found[0])["matches"][0]["preview"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        check(
            &mut problems,
            &format!("search_handoffs via the {path}: the victim's body"),
            preview.contains("victim revision 2"),
            true,
        );
    }

    let history = via_pg.drive(
        &token,
        "",
        json!([
            call("list_revisions", json!({"handoff_key": VICTIM})),
            call("get_handoff", json!({"handoff_key": VICTIM, "revision": 1})),
            call("get_handoff", json!({"handoff_key": VICTIM, "revision": 2})),
            call(
                "diff_handoff",
                json!({"handoff_key": VICTIM, "from": 1, "to": 2})
            ),
            call("get_handoff", json!({"handoff_key": SQUAT_KEY})),
            call("get_handoff", json!({"handoff_key": SQUATTED})),
            call("list_revisions", json!({"handoff_key": SQUAT_KEY})),
        ]),
    );
    let revisions: Vec<(Option<i64>, String)> = ok(&history[0])["revisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64(),
                r["created_by"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let writer = victim.spec.created_by.clone().unwrap_or_default();
    check(
        &mut problems,
        "list_revisions: the victim's, and only its",
        revisions,
        vec![(Some(2), writer.clone()), (Some(1), writer)],
    );
    check(
        &mut problems,
        "get_handoff{revision: 1}",
        ok(&history[1])["handoff"]["body"].clone(),
        json!("payments victim revision 1"),
    );
    check(
        &mut problems,
        "get_handoff{revision: 2}",
        ok(&history[2])["handoff"]["body"].clone(),
        json!("payments victim revision 2"),
    );
    let diff = ok(&history[3])["diff"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    check(
        &mut problems,
        "diff_handoff 1..2: the victim's revisions, and only theirs",
        (
            diff.contains("-payments victim revision 1"),
            diff.contains("+payments victim revision 2"),
            diff.contains("twin"),
        ),
        (true, true, false),
    );
    check(
        &mut problems,
        "get_handoff of the squat's key",
        ok(&history[4])["found"].clone(),
        json!(false),
    );
    check(
        &mut problems,
        "get_handoff of the squatted key",
        ok(&history[5])["found"].clone(),
        json!(false),
    );
    check(
        &mut problems,
        "list_revisions of the squat's key",
        ok(&history[6])["revisions"].clone(),
        json!([]),
    );

    // The mirror holds the canonical object only: its row, its history.
    let rows: Vec<String> = db
        .query("SELECT id::text FROM handoffs WHERE namespace = $1", &[&ns])
        .await
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    check(&mut problems, "mirror rows", rows, vec![victim_uid.clone()]);
    let objects = history_objects(&db, &ns).await;
    check(
        &mut problems,
        "objects in the history",
        objects,
        vec![victim_uid.clone()],
    );

    // Reported: the condition (with the expected name), no Mirrored
    // condition, one Warning Event each, the gauge.
    for (h, expected) in [
        (&twin, name_for_key(VICTIM)),
        (&squat, name_for_key(SQUAT_KEY)),
    ] {
        let conditions = h.status.clone().unwrap_or_default().conditions;
        let key_bound = conditions.iter().find(|c| c.type_ == "KeyBound");
        check(
            &mut problems,
            &format!("{}: KeyBound", h.name_any()),
            key_bound.map(|c| (c.status.clone(), c.reason.clone())),
            Some(("False".to_owned(), "NameNotDerivedFromKey".to_owned())),
        );
        check(
            &mut problems,
            &format!("{}: the message names {expected}", h.name_any()),
            key_bound.is_some_and(|c| {
                c.message.contains(&format!("is not \"{expected}\""))
                    && c.message
                        .contains(&format!("kubectl delete handoff {} -n {ns}", h.name_any()))
            }),
            true,
        );
        check(
            &mut problems,
            &format!("{}: no Mirrored condition", h.name_any()),
            conditions.iter().any(|c| c.type_ == "Mirrored"),
            false,
        );
    }
    let warned = |uid: Option<String>| {
        let (client, ns) = (client.clone(), ns.clone());
        async move {
            let events = events_with_reason(client, &ns, "NameNotDerivedFromKey").await;
            let about: Vec<_> = events
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.clone()) == uid)
                .map(|e| e.type_.unwrap_or_default())
                .collect();
            (!about.is_empty()).then_some(about)
        }
    };
    for h in [&twin, &squat] {
        let mut found = None;
        for _ in 0..100 {
            found = warned(h.uid()).await;
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        check(
            &mut problems,
            &format!("{}: Warning Events", h.name_any()),
            found,
            Some(vec!["Warning".to_owned()]),
        );
    }
    // What docs/operate.md tells an admin to run finds exactly them.
    let columns = "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,\
                   KEY:.spec.handoffKey,KEYBOUND:.status.conditions[?(@.type==\"KeyBound\")].reason";
    let listed = env
        .kubectl()
        .args([
            "get",
            "handoffs",
            "-n",
            &ns,
            "-o",
            columns,
            "--sort-by=.metadata.name",
        ])
        .output()
        .expect("kubectl");
    let reported: Vec<Vec<String>> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|l| l.contains("NameNotDerivedFromKey"))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    let row = |name: &str, key: &str| {
        [ns.as_str(), name, key, "NameNotDerivedFromKey"]
            .map(str::to_owned)
            .to_vec()
    };
    let mut want = vec![row(twin_name, VICTIM), row(&squat_name, SQUAT_KEY)];
    want.sort();
    check(&mut problems, "the documented kubectl get", reported, want);
    let events = env
        .kubectl()
        .args([
            "get",
            "events",
            "-n",
            &ns,
            "--field-selector",
            "reason=NameNotDerivedFromKey",
            "-o",
            "custom-columns=TYPE:.type,OBJECT:.involvedObject.name",
            "--no-headers",
        ])
        .output()
        .expect("kubectl");
    let mut warned_objects: Vec<String> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    warned_objects.sort();
    let mut want = vec![
        format!("Warning {twin_name}"),
        format!("Warning {squat_name}"),
    ];
    want.sort();
    check(
        &mut problems,
        "the documented kubectl get events",
        warned_objects,
        want,
    );
    check(
        &mut problems,
        "the gauge",
        controller
            .metrics
            .encode()
            .contains("handoff_controller_noncanonical_handoffs 2\n"),
        true,
    );
    assert!(
        problems.is_empty(),
        "twins and squats reached answers:\n{}",
        problems.join("\n")
    );

    // Removed: the key's handoff and its history stay; the gauge goes to 0.
    for name in [twin_name, squat_name.as_str()] {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    eventually("the gauge back to 0", Duration::from_secs(60), || async {
        controller
            .metrics
            .encode()
            .contains("handoff_controller_noncanonical_handoffs 0\n")
            .then_some(())
    })
    .await;
    let passes = controller.metrics.resyncs();
    eventually("two resync passes", Duration::from_secs(60), || async {
        (controller.metrics.resyncs() >= passes + 2).then_some(())
    })
    .await;
    let after = via_pg.drive(
        &token,
        "",
        json!([
            call("list_revisions", json!({"handoff_key": VICTIM})),
            call("get_handoff", json!({"handoff_key": VICTIM})),
        ]),
    );
    let numbers: Vec<Option<i64>> = ok(&after[0])["revisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| r["revision"].as_i64())
        .collect();
    assert_eq!(numbers, [Some(2), Some(1)], "the victim's history stays");
    assert_eq!(
        ok(&after[1])["handoff"]["body"],
        json!("payments victim revision 2")
    );
    assert_eq!(
        testing::mirror::converged(&api, &db, &ns).await,
        Some(1),
        "the victim's row stays"
    );

    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_history_a_twin_left_before_the_upgrade_go_at_the_next_resync() {
    let env = env();
    let ns = env.namespace("twins-legacy").await;
    let client = env.client().await;
    let (url, db) = postgres().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let controller = InProcess::new(&ns, "a", Arc::new(SystemClock))
        .mirror(&url)
        .options(|o| o.mirror_resync_interval = Duration::from_secs(1))
        .start(client.clone());
    handoff_kube::store::HandoffStore::new(client.clone(), &ns)
        .write(&spec(VICTIM).body("payments victim revision 1").by("writer"))
        .await
        .expect("write");
    let victim = counted_named(&api, &name_for_key(VICTIM), 1).await;
    eventually("the victim mirrored", Duration::from_secs(60), || async {
        (testing::mirror::converged(&api, &db, &ns).await == Some(1)).then_some(())
    })
    .await;
    let twin = api
        .create(
            &PostParams::default(),
            &Handoff::new("my-handoff", spec(VICTIM).body("payments twin")),
        )
        .await
        .expect("create the twin");
    let squat = api
        .create(
            &PostParams::default(),
            &Handoff::new(
                &name_for_key(SQUATTED),
                spec(SQUAT_KEY).body("payments squat"),
            ),
        )
        .await
        .expect("create the squat");
    counted_named(&api, "my-handoff", 1).await;
    counted_named(&api, &name_for_key(SQUATTED), 1).await;

    // What the previous release wrote for them: the twin's row in place of
    // the victim's (no name: written before migration 0004), the squat's
    // row, and history of both.
    let (twin_uid, squat_uid) = (twin.uid().expect("uid"), squat.uid().expect("uid"));
    db.execute(
        "UPDATE handoffs SET id = $2::text::uuid, body = 'payments twin', name = NULL \
         WHERE namespace = $1 AND handoff_key = $3",
        &[&ns, &twin_uid, &VICTIM],
    )
    .await
    .expect("the twin's row");
    for (uid, key, body) in [
        (&twin_uid, VICTIM, "payments twin"),
        (&squat_uid, SQUAT_KEY, "payments squat"),
    ] {
        db.execute(
            "INSERT INTO handoff_revisions (namespace, handoff_key, handoff_id, revision, project, \
                                            body, created_by, written_at) \
             VALUES ($1, $2, $3::text::uuid, 1, 'shop', $4, '', now())",
            &[&ns, &key, uid, &body],
        )
        .await
        .expect("history");
    }
    db.execute(
        "INSERT INTO handoffs (id, namespace, handoff_key, project, created_by, body, revision, \
                               resource_version, created_at, updated_at) \
         VALUES ($2::text::uuid, $1, $3, 'shop', '', 'payments squat', 1, 1, now(), now())",
        &[&ns, &squat_uid, &SQUAT_KEY],
    )
    .await
    .expect("the squat's row");

    // The next resync passes: the victim's row is its own again, and only
    // its history is left.
    let passes = controller.metrics.resyncs();
    eventually("two resync passes", Duration::from_secs(60), || async {
        (controller.metrics.resyncs() >= passes + 2).then_some(())
    })
    .await;
    let rows: Vec<(String, String, String)> = db
        .query(
            "SELECT handoff_key, id::text, body FROM handoffs WHERE namespace = $1",
            &[&ns],
        )
        .await
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let victim_uid = victim.uid().expect("uid");
    assert_eq!(
        rows,
        [(
            VICTIM.to_owned(),
            victim_uid.clone(),
            "payments victim revision 1".to_owned()
        )]
    );
    let objects = history_objects(&db, &ns).await;
    assert_eq!(objects, [victim_uid]);

    controller.stop().await;
}
