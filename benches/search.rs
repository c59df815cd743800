//! `search_handoffs` against `list_handoffs`, both as the bridge asks
//! PostgreSQL (not a test; nothing is asserted): [`Mirror::search`] and
//! [`Mirror::list`] on a mirror of 10,000 and 50,000 rows.
//!
//! Rows are inserted straight into `handoffs` (the controller's path is
//! measured by `benches/scaling.rs`): 100 projects, bodies of about 2 KiB,
//! every row mentioning `payments_test.go`, one in ten `refund`. Per stage,
//! interleaved, 100 samples each after 10 warm-up rounds: the first page
//! (50) of one project listed, searched for `refund` (a tenth of its rows
//! match), and for `payments_test.go` (all of them match and are ranked).
//! `HANDOFF_BENCH_STAGES` overrides the stages (e.g. `1000`).

use std::time::{Duration, Instant};

use handoff_mirror::Mirror;
use handoff_testkit::Postgres;
use handoff_testkit::bench::median_p99;

const NAMESPACE: &str = "default";
const PROJECT: &str = "p7";
const ROUNDS: usize = 100;
const WARMUP: usize = 10;

const FILL: &str = r#"
INSERT INTO handoffs (id, namespace, handoff_key, project, repo, kind, created_by, body,
                      revision, resource_version, created_at, updated_at)
SELECT gen_random_uuid(), 'default', 'key-' || i, 'p' || (i % 100), 'org/a', 'issue', 'bench',
       '## State' || chr(10) || 'flaky payments_test.go in run ' || i || chr(10)
       || CASE WHEN i % 1000 < 100 THEN 'the refund job failed' || chr(10) ELSE '' END
       || repeat('step ' || i || ' of the checkout work, see notes and the dashboard. ', 35),
       1, i, now(), now() - i * interval '1 second'
FROM generate_series($1::bigint, $2::bigint) AS i
"#;

fn main() -> anyhow::Result<()> {
    let stages: Vec<i64> = std::env::var("HANDOFF_BENCH_STAGES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 50_000]);
    let postgres = Postgres::start()?;
    let url = postgres.url();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let mirror = Mirror::new(&url, true)?;
        mirror.versions(Some(NAMESPACE)).await?; // connects and migrates
        let db = handoff_testkit::connect_postgres(&url).await?;
        println!(
            "\n## search_handoffs vs list_handoffs through PostgreSQL ({} cores)\n",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        println!(
            "Rows inserted directly; one project of 1/100 of the rows, first page of 50, {ROUNDS} samples each.\n"
        );
        println!(
            "| rows | list median / p99 (ms) | search `refund` median / p99 (ms) | search `payments_test.go` median / p99 (ms) |"
        );
        println!("|---:|---:|---:|---:|");
        let mut filled = 0i64;
        for target in stages {
            db.execute(FILL, &[&(filled + 1), &target]).await?;
            db.batch_execute("ANALYZE handoffs").await?;
            filled = target;
            let mut list = Vec::new();
            let mut refund = Vec::new();
            let mut ident = Vec::new();
            for round in 0..WARMUP + ROUNDS {
                let started = Instant::now();
                mirror.list(NAMESPACE, PROJECT, None, None, 50).await?;
                let l = started.elapsed();
                let started = Instant::now();
                mirror
                    .search(NAMESPACE, PROJECT, None, "refund", 0, 51)
                    .await?;
                let r = started.elapsed();
                let started = Instant::now();
                mirror
                    .search(NAMESPACE, PROJECT, None, "payments_test.go", 0, 51)
                    .await?;
                let s = started.elapsed();
                if round >= WARMUP {
                    list.push(l);
                    refund.push(r);
                    ident.push(s);
                }
            }
            let ms = |samples: &mut Vec<Duration>| {
                let (median, p99) = median_p99(samples);
                format!("{:.1} / {:.1}", median / 1000.0, p99 / 1000.0)
            };
            println!(
                "| {target} | {} | {} | {} |",
                ms(&mut list),
                ms(&mut refund),
                ms(&mut ident)
            );
        }
        anyhow::Ok(())
    })
}
