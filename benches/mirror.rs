//! The PostgreSQL mirror, measured (not a test; nothing is asserted):
//!
//! 1. convergence: `handoff controller --postgres-url` runs as a separate
//!    process; N handoffs of 2 KiB (100 projects × N/100) are written with
//!    server-side apply; reported are the time until the mirror holds every
//!    one at its counted revision (from the first write, and from the
//!    last), and the controller's peak RSS (`VmHWM` in /proc).
//! 2. lists: `list_handoffs` of one project (100 handoffs, one page of 100)
//!    through a bridge reading PostgreSQL and through a bridge reading the
//!    apiserver, interleaved; median, p99 and the ratio.
//!
//! `HANDOFF_BENCH_HANDOFFS` overrides N (default 10,000).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use handoff::api::naming::{labels_for, name_for_key};
use handoff::api::{Handoff, HandoffSpec};
use handoff::testing::rpc::McpHttp;
use handoff::testing::{
    Assets, BridgeProcess, ControlPlane, PlaneOptions, Postgres, StaticToken, install_crds,
};
use kube::api::{Api, Patch, PatchParams};

const TOKEN: &str = "bench-token-0123456789abcdef";
const NAMESPACE: &str = "default";
const PROJECTS: usize = 100;
const LIST_ROUNDS: usize = 200;
const WARMUP: usize = 20;

/// Entries of one page of `list_handoffs` for `project`.
fn list(http: &mut McpHttp, project: &str) -> anyhow::Result<usize> {
    let result = http.call(
        "list_handoffs",
        serde_json::json!({"project": project, "limit": 100}),
    )?;
    result["handoffs"]
        .as_array()
        .map(Vec::len)
        .ok_or_else(|| anyhow::anyhow!("not a list result: {result}"))
}

/// Median and p99 of a sample, in microseconds.
fn summary(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at =
        |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `handoff mcp --listen` (with `extra` args); returns it and its URL.
fn bridge(plane: &ControlPlane, extra: &[&str]) -> anyhow::Result<(BridgeProcess, String)> {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_handoff"));
    let process = BridgeProcess::start_with_env(
        binary,
        plane.kubeconfig_path(),
        NAMESPACE,
        extra,
        &[("RUST_LOG", "warn")],
    )?;
    let url = process.url().to_owned();
    Ok((process, url))
}

/// `VmHWM` (peak resident set) of `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn main() -> anyhow::Result<()> {
    let total: usize = std::env::var("HANDOFF_BENCH_HANDOFFS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let per_project = total.div_ceil(PROJECTS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let _runtime = rt.enter();
    let tokens = vec![StaticToken {
        token: TOKEN.into(),
        user: "bench".into(),
        groups: vec!["system:masters".into()],
    }];
    let plane = rt.block_on(ControlPlane::start_with(
        Assets::locate()?,
        PlaneOptions {
            static_tokens: tokens,
            ..Default::default()
        },
    ))?;
    let admin = rt.block_on(plane.client())?;
    rt.block_on(install_crds(&admin))?;
    let pg = Postgres::start()?;
    let url = pg.url();

    let controller = Proc(
        Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args(["controller", "--postgres-url", &url, "--identity", "bench"])
            .args(["--namespace", NAMESPACE, "--lease-namespace", NAMESPACE])
            .args(["--metrics-listen", "127.0.0.1:0", "--concurrency", "16"])
            .env("KUBECONFIG", plane.kubeconfig_path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let pid = controller.0.id();

    let (db, connection) = rt.block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls))?;
    rt.spawn(connection);

    let api: Api<Handoff> = Api::namespaced(admin.clone(), NAMESPACE);
    let body = "x".repeat(2048);
    eprintln!("bench: writing {total} handoffs of 2 KiB ({PROJECTS} projects) …");
    let started = Instant::now();
    rt.block_on(async {
        let params = PatchParams::apply("bench-writer").force();
        let results: Vec<Result<Handoff, kube::Error>> = futures::stream::iter(0..total)
            .map(|i| {
                let (api, params, body) = (api.clone(), params.clone(), body.clone());
                async move {
                    let key = format!("bench/{}#{}", i % PROJECTS, i / PROJECTS);
                    let project = format!("project-{:03}", i % PROJECTS);
                    let name = name_for_key(&key);
                    let mut h = Handoff::new(
                        &name,
                        HandoffSpec {
                            handoff_key: key,
                            project: project.clone(),
                            repo: Some("org/repo".into()),
                            kind: Some("issue".into()),
                            body,
                            created_by: Some("bench".into()),
                        },
                    );
                    h.metadata.labels = Some(labels_for(&project, Some("org/repo"), Some("issue")));
                    api.patch(&name, &params, &Patch::Apply(&h)).await
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        results.into_iter().collect::<Result<Vec<_>, _>>().map(drop)
    })?;
    let written = started.elapsed();
    eprintln!("bench: written in {written:?}; waiting for the mirror …");
    let expected = i64::try_from(total)?;
    loop {
        let rows: i64 = rt
            .block_on(db.query_one(
                "SELECT count(*) FROM handoffs WHERE namespace = $1 AND revision = 1",
                &[&NAMESPACE],
            ))?
            .get(0);
        if rows >= expected {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "the mirror holds {rows} of {total} rows after 30 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let converged = started.elapsed();
    let rss = peak_rss_kib(pid);

    let (_pg_bridge, pg_url) = bridge(&plane, &["--postgres-url", &url])?;
    let (_api_bridge, api_url) = bridge(&plane, &[])?;
    let mut via_pg = McpHttp::connect(&pg_url, TOKEN, "refine")?;
    let mut via_api = McpHttp::connect(&api_url, TOKEN, "refine")?;
    let mut samples = [Vec::new(), Vec::new()];
    eprintln!("bench: {LIST_ROUNDS} list rounds (+{WARMUP} warm-up) …");
    for i in 0..WARMUP + LIST_ROUNDS {
        let project = format!("project-{:03}", i % PROJECTS);
        let t = Instant::now();
        let n_pg = list(&mut via_pg, &project)?;
        let took_pg = t.elapsed();
        let t = Instant::now();
        let n_api = list(&mut via_api, &project)?;
        let took_api = t.elapsed();
        anyhow::ensure!(
            n_pg == n_api && n_pg == per_project.min(100),
            "{project}: {n_pg} via PostgreSQL, {n_api} via the apiserver"
        );
        if i >= WARMUP {
            samples[0].push(took_pg);
            samples[1].push(took_api);
        }
    }
    let (pg_median, pg_p99) = summary(&mut samples[0]);
    let (api_median, api_p99) = summary(&mut samples[1]);

    println!(
        "\n## Mirror ({} cores, Kubernetes {})\n",
        std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1),
        handoff::testing::Versions::pinned().kubernetes
    );
    println!("| measure | value |\n|---|---:|");
    println!("| handoffs written (2 KiB, server-side apply, 32 in flight) | {total} |");
    println!("| write phase | {:.1} s |", written.as_secs_f64());
    println!(
        "| mirror converged, from the first write | {:.1} s |",
        converged.as_secs_f64()
    );
    println!(
        "| mirror converged, after the last write | {:.1} s |",
        (converged - written).as_secs_f64()
    );
    match rss {
        Some(kib) => println!(
            "| controller peak RSS (VmHWM) | {:.1} MiB |",
            kib as f64 / 1024.0
        ),
        None => println!("| controller peak RSS (VmHWM) | unavailable |"),
    }
    println!(
        "\n### list_handoffs, one project of {PROJECTS} × {per_project} ({LIST_ROUNDS} samples each)\n"
    );
    println!("| via | median µs | p99 µs |\n|---|---:|---:|");
    println!("| PostgreSQL mirror | {pg_median:.0} | {pg_p99:.0} |");
    println!("| apiserver | {api_median:.0} | {api_p99:.0} |");
    println!(
        "| ratio PostgreSQL / apiserver | {:.2} | {:.2} |",
        pg_median / api_median,
        pg_p99 / api_p99
    );
    drop(controller);
    drop(pg);
    drop(plane);
    Ok(())
}
