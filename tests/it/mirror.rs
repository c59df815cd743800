//! The mirror's own rules, checked against a real PostgreSQL: a row never
//! moves backwards and is written only by its own object or a newer
//! incarnation of its name (the `WHERE` of the upsert's `ON CONFLICT`
//! clause); history reads never cross objects; migration 0004 keeps what
//! the previous schema held; the
//! history keeps the newest revisions of a key and forgets an incarnation
//! with its row (single statements, so only PostgreSQL can prove them);
//! `handoff mirror purge`, run as the binary, removes what it names and
//! nothing else.

use std::num::NonZeroU32;
use std::process::{Command, Output};
use std::time::Duration;

use handoff_mirror::batch::{BatchSettings, Batcher};
use handoff_mirror::{Deleted, Mirror, MirrorError, Retention, Row};
use handoff_testkit::controller::postgres;
use jiff::Timestamp;

fn row(id: &str, key: &str, revision: i64, resource_version: i64) -> Row {
    Row {
        id: id.into(),
        name: handoff_core::api::naming::name_for_key(key),
        namespace: "mirror-rules".into(),
        handoff_key: key.into(),
        project: "p".into(),
        repo: None,
        kind: None,
        created_by: "writer".into(),
        body: format!("revision {revision} at {resource_version}"),
        revision,
        resource_version,
        created_at: Timestamp::UNIX_EPOCH,
        updated_at: Timestamp::UNIX_EPOCH,
    }
}

async fn stored(db: &tokio_postgres::Client, key: &str) -> (String, i64, i64, String) {
    let r = db
        .query_one(
            "SELECT id::text, revision, resource_version, body FROM handoffs \
             WHERE namespace = 'mirror-rules' AND handoff_key = $1",
            &[&key],
        )
        .await
        .expect("the row");
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

#[tokio::test]
async fn an_upsert_never_moves_a_row_backwards() {
    let url = handoff_testkit::shared_postgres_url();
    let mirror = Mirror::new(&url, true).expect("mirror");
    let db = handoff_testkit::connect_postgres(&url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let uid = "00000000-0000-4000-8000-000000000001";
    let other = "00000000-0000-4000-8000-000000000002";
    let twin = "00000000-0000-4000-8000-000000000003";
    let key = format!("k-{}", std::process::id());
    let newest = row(uid, &key, 3, 300);
    assert!(mirror.upsert(&newest).await.expect("upsert"), "first write");

    // (upsert, written?, the row afterwards) — each against what is stored.
    let at = |id: &str, revision, resource_version| row(id, &key, revision, resource_version);
    let twin_row = Row {
        name: "my-handoff".into(),
        ..at(twin, 9, 900)
    };
    #[rustfmt::skip]
    let cases = [
        (at(uid, 2, 400), false, newest.clone(), "an older revision"),
        (at(uid, 3, 200), false, newest.clone(), "the same revision at an older resourceVersion"),
        (at(uid, 3, 300), false, newest.clone(), "the same revision and resourceVersion"),
        (at(uid, 3, 350), true, at(uid, 3, 350), "the same revision at a newer resourceVersion"),
        (at(uid, 4, 360), true, at(uid, 4, 360), "a newer revision"),
        (at(other, 1, 10), true, at(other, 1, 10), "another incarnation of the key, even older"),
        (twin_row, false, at(other, 1, 10), "an object of another name holding the key, even newer"),
    ];
    for (upsert, written, expected, why) in cases {
        assert_eq!(
            mirror.upsert(&upsert).await.expect("upsert"),
            written,
            "{why}: written?"
        );
        assert_eq!(
            stored(&db, &key).await,
            (
                expected.id.clone(),
                expected.revision,
                expected.resource_version,
                expected.body.clone()
            ),
            "{why}: stored row"
        );
    }
}

/// A name no other run of this suite uses (the PostgreSQL may be shared).
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Revision `revision` of object `id`, of `key` in `namespace`, counted
/// `second` seconds after a fixed time.
fn revision(namespace: &str, key: &str, id: &str, revision: i64, second: i64) -> Row {
    Row {
        namespace: namespace.into(),
        updated_at: Timestamp::from_second(1_700_000_000 + second).expect("ts"),
        body: format!("{id} revision {revision}"),
        handoff_key: key.into(),
        ..row(id, key, revision, revision * 10)
    }
}

/// `(uid, revision)` of the history of `key` in `namespace`, oldest first.
async fn history(db: &tokio_postgres::Client, namespace: &str, key: &str) -> Vec<(String, i64)> {
    db.query(
        "SELECT handoff_id::text, revision FROM handoff_revisions \
         WHERE namespace = $1 AND handoff_key = $2 ORDER BY written_at, revision",
        &[&namespace, &key],
    )
    .await
    .expect("history")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Leaves `row`'s revision in the history without the object's row, the
/// way the mirror's own writes leave it: the row written, its revision
/// recorded, the row deleted by `keeping` (a mirror that keeps history on
/// delete). `record_revision` itself records only while the object's row
/// is there.
async fn left_behind(keeping: &Mirror, row: &Row) {
    keeping.upsert(row).await.expect("row");
    keeping.record_revision(row).await.expect("record");
    keeping
        .delete(&row.namespace, &row.handoff_key, &row.id)
        .await
        .expect("delete the row, keep its history");
}

/// A mirror that keeps an object's history when its row is deleted.
fn keeping(url: &str) -> Mirror {
    mirror_with(
        url,
        Retention {
            keep_on_delete: true,
            ..Retention::default()
        },
    )
}

fn mirror_with(url: &str, retention: Retention) -> Mirror {
    Mirror::new(url, true)
        .expect("mirror")
        .with_retention(retention)
}

#[tokio::test]
async fn the_history_keeps_the_newest_revisions_and_forgets_an_incarnation_with_its_row() {
    let (url, db) = postgres().await;
    let three = Retention {
        revisions: NonZeroU32::new(3).expect("3"),
        ..Retention::default()
    };
    let mirror = mirror_with(&url, three);
    let ns = unique("history");
    let (a, b) = (
        "00000000-0000-4000-8000-00000000000a",
        "00000000-0000-4000-8000-00000000000b",
    );
    let at = |id: &str, n: i64, second: i64| revision(&ns, "k", id, n, second);
    let owned = |pairs: &[(&str, i64)]| -> Vec<(String, i64)> {
        pairs.iter().map(|(id, r)| ((*id).to_owned(), *r)).collect()
    };

    let mut dropped = 0;
    for n in 1..=6 {
        mirror.upsert(&at(a, n, n)).await.expect("upsert");
        dropped += mirror.record_revision(&at(a, n, n)).await.expect("record");
    }
    assert_eq!(dropped, 3, "each record beyond the cap drops the oldest");
    assert_eq!(
        history(&db, &ns, "k").await,
        owned(&[(a, 4), (a, 5), (a, 6)])
    );

    assert_eq!(
        mirror.record_revision(&at(a, 2, 2)).await.expect("record"),
        0,
        "a late record of a revision older than the kept ones adds nothing"
    );
    assert_eq!(
        history(&db, &ns, "k").await,
        owned(&[(a, 4), (a, 5), (a, 6)])
    );

    // A newer incarnation of the key: the older one's revisions go first.
    mirror.upsert(&at(b, 1, 10)).await.expect("upsert");
    mirror.record_revision(&at(b, 1, 10)).await.expect("record");
    assert_eq!(
        history(&db, &ns, "k").await,
        owned(&[(a, 5), (a, 6), (b, 1)])
    );

    // Deleting the old incarnation takes its history, not the new one's.
    assert_eq!(
        mirror.delete(&ns, "k", a).await.expect("delete"),
        Deleted {
            row: false,
            history: 2
        },
        "the row is the new incarnation's: it stays"
    );
    assert_eq!(history(&db, &ns, "k").await, owned(&[(b, 1)]));

    // Past revisions older than the age limit go; the live row's stays.
    mirror.upsert(&at(b, 2, 11)).await.expect("upsert");
    mirror.record_revision(&at(b, 2, 11)).await.expect("record");
    let aged = mirror_with(
        &url,
        Retention {
            max_age: Some(Duration::from_secs(3600)),
            ..three
        },
    );
    let later = Timestamp::from_second(1_700_000_011 + 2 * 3600).expect("ts");
    assert_eq!(
        aged.expire_history(Some(&ns), later).await.expect("expire"),
        1
    );
    assert_eq!(history(&db, &ns, "k").await, owned(&[(b, 2)]));
    assert_eq!(
        mirror
            .expire_history(Some(&ns), later)
            .await
            .expect("expire"),
        0,
        "without an age limit nothing expires"
    );

    // Kept for audit, the history outlives the row.
    let keep = mirror_with(
        &url,
        Retention {
            keep_on_delete: true,
            ..three
        },
    );
    assert_eq!(
        keep.delete(&ns, "k", b).await.expect("delete"),
        Deleted {
            row: true,
            history: 0
        }
    );
    assert_eq!(history(&db, &ns, "k").await, owned(&[(b, 2)]));
}

/// `handoff mirror purge ARGS` with the DSN in `variable` (and no other).
fn purge(dsn: Option<(&str, &str)>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_handoff"));
    command
        .args(["mirror", "purge"])
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("HANDOFF_POSTGRES_URL");
    if let Some((variable, url)) = dsn {
        command.env(variable, url);
    }
    command.output().expect("run handoff")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn mirror_purge_removes_the_rows_it_names_and_nothing_else() {
    let (url, db) = postgres().await;
    let mirror = mirror_with(&url, Retention::default());
    let (ns_a, ns_b, key) = (unique("purge-a"), unique("purge-b"), unique("leaked"));
    // Its first query migrates the schema the history is seeded into.
    mirror.versions(Some(&ns_a)).await.expect("schema");
    let id = "00000000-0000-4000-8000-0000000000c1";
    let keeping = keeping(&url);
    for (ns, k, revisions) in [
        (&ns_a, key.as_str(), 3),
        (&ns_a, "other", 2),
        (&ns_b, key.as_str(), 2),
    ] {
        for n in 1..=revisions {
            left_behind(&keeping, &revision(ns, k, id, n, n)).await;
        }
    }
    let revisions = |ns: &str, k: &str| {
        let (db, ns, k) = (&db, ns.to_owned(), k.to_owned());
        async move {
            history(db, &ns, &k)
                .await
                .into_iter()
                .map(|(_, r)| r)
                .collect::<Vec<i64>>()
        }
    };
    let everything = || async {
        (
            revisions(&ns_a, &key).await,
            revisions(&ns_a, "other").await,
            revisions(&ns_b, &key).await,
        )
    };
    let seeded = (vec![1, 2, 3], vec![1, 2], vec![1, 2]);
    assert_eq!(everything().await, seeded);

    let dry = purge(
        Some(("DATABASE_URL", &url)),
        &["--key", &key, "--namespace", &ns_a, "--dry-run"],
    );
    assert_eq!(
        stdout(&dry),
        format!(
            "would purge 3 history rows of {key:?} in namespace {ns_a} (dry run: nothing deleted)\n"
        )
    );
    assert_eq!(everything().await, seeded, "a dry run deletes nothing");

    let one = purge(
        Some(("HANDOFF_POSTGRES_URL", &url)),
        &["--key", &key, "--namespace", &ns_a, "--revision", "2"],
    );
    assert_eq!(
        stdout(&one),
        format!("purged 1 history row of {key:?} (revision 2) in namespace {ns_a}\n")
    );
    assert_eq!(everything().await, (vec![1, 3], vec![1, 2], vec![1, 2]));

    let rest = purge(
        Some(("DATABASE_URL", &url)),
        &["--key", &key, "--namespace", &ns_a],
    );
    assert_eq!(
        stdout(&rest),
        format!("purged 2 history rows of {key:?} in namespace {ns_a}\n")
    );
    assert_eq!(
        everything().await,
        (vec![], vec![1, 2], vec![1, 2]),
        "another key and the same key in another namespace stay"
    );

    let no_dsn = purge(None, &["--key", &key]);
    assert!(!no_dsn.status.success());
    let err = String::from_utf8_lossy(&no_dsn.stderr);
    assert!(
        err.contains("HANDOFF_POSTGRES_URL") && err.contains("DATABASE_URL"),
        "{err}"
    );
    assert_eq!(everything().await, (vec![], vec![1, 2], vec![1, 2]));

    let everywhere = purge(Some(("DATABASE_URL", &url)), &["--key", &key]);
    assert_eq!(
        stdout(&everywhere),
        format!("purged 2 history rows of {key:?} in every namespace\n")
    );
    assert_eq!(everything().await, (vec![], vec![1, 2], vec![]));
}

/// `(id, revision, resource_version, body)` of every row of `namespace`, by key.
async fn rows_of(
    db: &tokio_postgres::Client,
    namespace: &str,
) -> Vec<(String, String, i64, i64, String)> {
    db.query(
        "SELECT handoff_key, id::text, revision, resource_version, body FROM handoffs \
         WHERE namespace = $1 ORDER BY handoff_key",
        &[&namespace],
    )
    .await
    .expect("rows")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

/// Uid `i` of a test's `namespace` (uids are unique across the database).
fn uid_in(namespace: &str, i: usize) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    namespace.hash(&mut hasher);
    let h = hasher.finish();
    format!("{:08x}-{:04x}-4000-8000-{i:012}", h >> 32, h & 0xffff)
}

/// Revision 1 of keys `k0`… in `namespace`, one object each.
fn first_revisions(namespace: &str, n: usize) -> Vec<Row> {
    (0..n)
        .map(|i| revision(namespace, &format!("k{i}"), &uid_in(namespace, i), 1, 10))
        .collect()
}

/// A batcher whose batches close only when `rows` jobs are in (the linger
/// is far longer than any test), so which calls share a batch is exact.
fn batcher_of(mirror: Mirror, rows: usize) -> Batcher {
    Batcher::start(
        std::sync::Arc::new(mirror),
        BatchSettings {
            rows: std::num::NonZeroUsize::new(rows).expect("rows"),
            linger: Duration::from_secs(3600),
        },
        |_| {},
    )
}

#[tokio::test]
async fn concurrent_writes_land_in_one_batch_and_each_caller_gets_its_own_outcome() {
    const ROWS: usize = 8;
    let (url, db) = postgres().await;
    let namespace = unique("batch");
    let uid = |i: usize| uid_in(&namespace, i);
    let first = first_revisions(&namespace, ROWS);
    // One row is already newer in the mirror: its upsert changes nothing.
    let newer = revision(&namespace, "k3", &uid(3), 2, 20);
    let mirror = Mirror::new(&url, true).expect("mirror");
    assert!(mirror.upsert(&newer).await.expect("upsert"));

    let batcher = batcher_of(Mirror::new(&url, true).expect("mirror"), ROWS);
    let changed = futures::future::join_all(first.iter().map(|row| batcher.upsert(row))).await;
    let changed: Vec<bool> = changed.into_iter().map(|c| c.expect("upsert")).collect();
    assert_eq!(
        changed,
        (0..ROWS).map(|i| i != 3).collect::<Vec<_>>(),
        "each caller learns whether its own row changed"
    );
    assert_eq!(batcher.sent(), (1, ROWS as u64), "one batch of {ROWS} rows");
    let expected: Vec<_> = first
        .iter()
        .map(|r| if r.handoff_key == "k3" { &newer } else { r })
        .map(|r| {
            (
                r.handoff_key.clone(),
                r.id.clone(),
                r.revision,
                r.resource_version,
                r.body.clone(),
            )
        })
        .collect();
    assert_eq!(
        rows_of(&db, &namespace).await,
        expected,
        "a batch holding an older revision leaves the newer row"
    );

    // History appends of the same rows: one more batch, one transaction.
    let dropped =
        futures::future::join_all(first.iter().map(|row| batcher.record_revision(row))).await;
    let dropped: Vec<u64> = dropped.into_iter().map(|d| d.expect("record")).collect();
    assert_eq!(dropped, vec![0; ROWS]);
    assert_eq!(batcher.sent(), (2, 2 * ROWS as u64));
    for (i, row) in first.iter().enumerate() {
        assert_eq!(
            history(&db, &namespace, &row.handoff_key).await,
            vec![(uid(i), 1)],
            "{}",
            row.handoff_key
        );
    }
}

#[tokio::test]
async fn a_failed_batch_fails_every_caller_and_writes_nothing() {
    const ROWS: usize = 3;
    let (url, db) = postgres().await;
    let namespace = unique("batch-fails");
    let mut rows = first_revisions(&namespace, ROWS);
    // PostgreSQL refuses one row (revision >= 1): the transaction fails.
    rows[1].revision = 0;
    let batcher = batcher_of(Mirror::new(&url, true).expect("mirror"), 2 * ROWS);
    // Three upserts and three history appends, all sent before any answer.
    let upserts = futures::future::join_all(rows.iter().map(|row| batcher.upsert(row)));
    let records = futures::future::join_all(rows.iter().map(|row| batcher.record_revision(row)));
    let (upserts, records) = futures::join!(upserts, records);
    let outcomes: Vec<Result<(), MirrorError>> = upserts
        .into_iter()
        .map(|r| r.map(drop))
        .chain(records.into_iter().map(|r| r.map(drop)))
        .collect();
    assert_eq!(batcher.sent(), (1, 2 * ROWS as u64), "one batch");
    for outcome in outcomes {
        let err = outcome.expect_err("the batch failed");
        assert!(
            matches!(&err, MirrorError::Batch(inner) if matches!(inner.as_ref(), MirrorError::Postgres(_))),
            "{err:?}"
        );
        assert!(err.to_string().contains("handoffs_revision_check"), "{err}");
    }
    assert_eq!(
        rows_of(&db, &namespace).await,
        vec![],
        "nothing half-written"
    );
    for row in &rows {
        assert_eq!(history(&db, &namespace, &row.handoff_key).await, vec![]);
    }
}

/// `url` with its database replaced by `database`.
fn in_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    match query {
        Some(q) => format!("{server}/{database}?{q}"),
        None => format!("{server}/{database}"),
    }
}

#[tokio::test]
async fn history_reads_never_cross_objects_and_a_forgotten_object_leaves_nothing() {
    let (url, db) = postgres().await;
    // Kept on delete: forgetting an object ignores the retention.
    let mirror = keeping(&url);
    let ns = unique("objects");
    let (current, twin) = (
        "00000000-0000-4000-8000-0000000000d1",
        "00000000-0000-4000-8000-0000000000d2",
    );
    // History an object of another name left (mirrored before the mirror
    // refused such objects, its row since deleted): later than the current
    // object's, and at the same revision numbers.
    for n in 1..=3 {
        left_behind(
            &mirror,
            &Row {
                name: "my-handoff".into(),
                ..revision(&ns, "k", twin, n, 10 + n)
            },
        )
        .await;
    }
    for n in 1..=2 {
        let r = revision(&ns, "k", current, n, n);
        mirror.upsert(&r).await.expect("upsert");
        mirror.record_revision(&r).await.expect("record");
    }
    // Today a record of an object without its row adds nothing (a record
    // that arrives after the object's delete).
    mirror
        .record_revision(&revision(&ns, "k", twin, 4, 20))
        .await
        .expect("record");
    let numbers = || async {
        let entries = mirror.revisions(&ns, "k", None, 10).await;
        let entries = entries.expect("revisions");
        entries
            .into_iter()
            .map(|e| e.revision)
            .collect::<Vec<i64>>()
    };
    assert_eq!(
        numbers().await,
        [2, 1],
        "the revisions of the key's row's object only"
    );
    for n in 1..=2 {
        assert_eq!(
            mirror
                .revision(&ns, "k", n)
                .await
                .expect("revision")
                .map(|r| r.body),
            Some(format!("{current} revision {n}")),
            "revision {n} is the current object's"
        );
    }
    assert_eq!(
        mirror.revision(&ns, "k", 3).await.expect("revision"),
        None,
        "the other object's revision 3 is not the key's"
    );

    assert_eq!(
        mirror.forget(&ns, "k", twin).await.expect("forget"),
        Deleted {
            row: false,
            history: 3
        },
        "its history goes, whatever the retention; the key's row is not its"
    );
    assert_eq!(
        history(&db, &ns, "k").await,
        [(current.to_owned(), 1), (current.to_owned(), 2)]
    );

    // A deleted handoff whose history is kept: its revisions still answer.
    assert_eq!(
        mirror.delete(&ns, "k", current).await.expect("delete"),
        Deleted {
            row: true,
            history: 0
        }
    );
    assert_eq!(numbers().await, [2, 1]);
}

#[tokio::test]
async fn migration_4_keeps_what_the_previous_schema_held() {
    let url = handoff_testkit::shared_postgres_url();
    let admin = handoff_testkit::connect_postgres(&url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let database = unique("migrate").replace('-', "_");
    admin
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .expect("create database");
    let db_url = in_database(&url, &database);
    let db = handoff_testkit::connect_postgres(&db_url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    // The schema at version 3, as the previous release left it.
    db.batch_execute(
        "CREATE TABLE handoff_schema_migrations (\
             version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .await
    .expect("migrations table");
    for (version, sql) in [
        (
            1,
            include_str!("../../crates/mirror/src/migrations/0001_init.sql"),
        ),
        (
            2,
            include_str!("../../crates/mirror/src/migrations/0002_history_retention.sql"),
        ),
        (
            3,
            include_str!("../../crates/mirror/src/migrations/0003_search.sql"),
        ),
    ] {
        db.batch_execute(sql).await.expect("an earlier migration");
        db.execute(
            "INSERT INTO handoff_schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .expect("record");
    }
    // What the previous upsert allowed: the row of key `k` replaced by an
    // object of another name (uid t), the current object's (uid a)
    // history beside it; and an ordinary row.
    let (a, t, o) = (
        "00000000-0000-4000-8000-0000000000e1",
        "00000000-0000-4000-8000-0000000000e2",
        "00000000-0000-4000-8000-0000000000e3",
    );
    db.batch_execute(&format!(
        "INSERT INTO handoffs (id, namespace, handoff_key, project, created_by, body, revision, \
                               resource_version, created_at, updated_at) VALUES \
         ('{t}', 'ns', 'k', 'p', '', 'twin', 1, 30, now(), now()), \
         ('{o}', 'ns', 'other', 'p', 'w', 'other body', 4, 40, now(), now()); \
         INSERT INTO handoff_revisions (namespace, handoff_key, handoff_id, revision, project, \
                                        body, created_by, written_at) VALUES \
         ('ns', 'k', '{a}', 1, 'p', 'a1', 'w', now() - interval '2 minutes'), \
         ('ns', 'k', '{a}', 2, 'p', 'a2', 'w', now() - interval '1 minute'), \
         ('ns', 'k', '{t}', 1, 'p', 't1', '', now())"
    ))
    .await
    .expect("the previous release's rows");

    // The mirror migrates on its first call; nothing is lost.
    let mirror = Mirror::new(&db_url, true).expect("mirror");
    let before = rows_of(&db, "ns").await;
    assert_eq!(
        mirror.versions(Some("ns")).await.expect("versions").len(),
        2
    );
    let applied: Vec<i32> = db
        .query(
            "SELECT version FROM handoff_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .expect("versions")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(applied, [1, 2, 3, 4]);
    assert_eq!(rows_of(&db, "ns").await, before, "every row kept");
    let names: Vec<Option<String>> = db
        .query("SELECT name FROM handoffs ORDER BY handoff_key", &[])
        .await
        .expect("names")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, [None, None], "written before the name was recorded");

    // The key's current object takes its row back (a row without a name
    // may be replaced by the key's object), then its history answers.
    let current = Row {
        namespace: "ns".into(),
        body: "a2".into(),
        ..row(a, "k", 2, 50)
    };
    assert!(mirror.upsert(&current).await.expect("upsert"), "replaced");
    let revisions: Vec<i64> = mirror
        .revisions("ns", "k", None, 10)
        .await
        .expect("revisions")
        .into_iter()
        .map(|e| e.revision)
        .collect();
    assert_eq!(revisions, [2, 1]);
    assert_eq!(
        mirror
            .revision("ns", "k", 1)
            .await
            .expect("revision")
            .map(|r| r.body),
        Some("a1".to_owned())
    );
    // The ordinary row, rewritten by its own object, gets its name.
    let other = Row {
        namespace: "ns".into(),
        ..row(o, "other", 4, 40)
    };
    assert!(mirror.upsert(&other).await.expect("upsert"), "named");
    assert!(
        !mirror.upsert(&other).await.expect("upsert"),
        "then current"
    );
    drop(mirror);
    drop(db);
    admin
        .batch_execute(&format!("DROP DATABASE {database} WITH (FORCE)"))
        .await
        .expect("drop database");
}
