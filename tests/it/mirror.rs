//! The mirror's own rules, checked against a real PostgreSQL: a row never
//! moves backwards. The rule is the `WHERE` of the upsert's `ON CONFLICT`
//! clause, so only PostgreSQL can prove it.

use handoff::mirror::{Mirror, Row};
use jiff::Timestamp;

fn row(id: &str, key: &str, revision: i64, resource_version: i64) -> Row {
    Row {
        id: id.into(),
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
    let key = format!("k-{}", std::process::id());
    let newest = row(uid, &key, 3, 300);
    assert!(mirror.upsert(&newest).await.expect("upsert"), "first write");

    // (upsert, written?, the row afterwards) — each against what is stored.
    let cases = [
        (
            row(uid, &key, 2, 400),
            false,
            newest.clone(),
            "an older revision",
        ),
        (
            row(uid, &key, 3, 200),
            false,
            newest.clone(),
            "the same revision at an older resourceVersion",
        ),
        (
            row(uid, &key, 3, 300),
            false,
            newest.clone(),
            "the same revision and resourceVersion",
        ),
        (
            row(uid, &key, 3, 350),
            true,
            row(uid, &key, 3, 350),
            "the same revision at a newer resourceVersion",
        ),
        (
            row(uid, &key, 4, 360),
            true,
            row(uid, &key, 4, 360),
            "a newer revision",
        ),
        (
            row(other, &key, 1, 10),
            true,
            row(other, &key, 1, 10),
            "another incarnation of the key, even older",
        ),
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
