//! The throwaway PostgreSQL of the harness: starts (as the `postgres` user
//! when we are root), answers real queries, survives a restart with its
//! data, and is gone when dropped.

use std::time::{Duration, Instant};

use handoff_testkit::Postgres;
use handoff_testkit::is_gone;

async fn connect(url: &str) -> tokio_postgres::Client {
    handoff_testkit::connect_postgres(url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

#[tokio::test]
async fn starts_answers_restarts_and_stops() {
    let mut pg = tokio::task::spawn_blocking(Postgres::start)
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("PostgreSQL could not start: {e:#}"));
    let url = pg.url();
    let client = connect(&url).await;
    client
        .batch_execute("CREATE TABLE t (v text NOT NULL); INSERT INTO t VALUES ('kept')")
        .await
        .expect("ddl");
    drop(client);

    pg = tokio::task::spawn_blocking(move || {
        pg.restart_server().expect("restart");
        pg
    })
    .await
    .expect("join");
    let client = connect(&url).await;
    let row = client
        .query_one("SELECT v FROM t", &[])
        .await
        .expect("select");
    assert_eq!(row.get::<_, String>(0), "kept", "data survives a restart");
    drop(client);

    let (pid, dir) = (pg.pid(), pg.dir().to_owned());
    drop(pg);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_gone(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(is_gone(pid), "postgres {pid} still running after drop");
    assert!(!dir.exists(), "{} left behind", dir.display());
}
