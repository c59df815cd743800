//! How cost grows with the work (not a test; nothing is asserted): the
//! PostgreSQL mirror, `list_handoffs` and the controller's memory at
//! 1,000 / 10,000 / 50,000 handoffs, measured in one run.
//!
//! `handoff controller --postgres-url` and two bridges (one listing from
//! the apiserver, one from PostgreSQL) run as separate processes. Handoffs
//! of 2 KiB in 100 projects are written with server-side apply (32 in
//! flight) up to each stage; then, per stage:
//! - the time until the mirror holds every handoff, after the last write;
//! - the controller's resident memory (`VmRSS`) and peak (`VmHWM`);
//! - `list_handoffs` of one project (first page, the default limit of 50)
//!   through both bridges, interleaved: median, p99 and the ratio.
//!
//! The table goes to stdout (for BENCHMARKS.md) and the figure to
//! `docs/bench-scaling.svg`. `HANDOFF_BENCH_STAGES` overrides the stages
//! (e.g. `500,2000` for a quick look).

use std::time::{Duration, Instant};

use futures::StreamExt;
use handoff::api::naming::{labels_for, name_for_key};
use handoff::api::{Handoff, HandoffSpec};
use handoff_testkit::bench::{self, TOKEN, median_p99, memory_mib};
use handoff_testkit::plot::{self, Panel, Series};
use handoff_testkit::rpc::McpHttp;
use handoff_testkit::{BridgeProcess, ControlPlane, ControllerProcess, Postgres};
use kube::api::{Api, Patch, PatchParams};

const NAMESPACE: &str = "default";
const PROJECTS: usize = 100;
const LIST_ROUNDS: usize = 100;
const WARMUP: usize = 10;
const BODY_BYTES: usize = 2048;
const CONVERGENCE_LIMIT: Duration = Duration::from_secs(1800);

/// What one stage measured.
struct Stage {
    handoffs: usize,
    written: Duration,
    caught_up: Duration,
    controller_rss: f64,
    controller_peak: f64,
    bridge_peak: f64,
    via_api: (f64, f64),
    via_pg: (f64, f64),
}

fn stages() -> anyhow::Result<Vec<usize>> {
    let Ok(text) = std::env::var("HANDOFF_BENCH_STAGES") else {
        return Ok(vec![1_000, 10_000, 50_000]);
    };
    let stages = text
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("HANDOFF_BENCH_STAGES={text}: {e} (want e.g. 1000,10000)"))?;
    anyhow::ensure!(
        !stages.is_empty() && stages.windows(2).all(|w| w[0] < w[1]) && stages[0] >= PROJECTS,
        "HANDOFF_BENCH_STAGES={text}: want increasing counts of at least {PROJECTS} (one per project)"
    );
    Ok(stages)
}

/// Writes handoffs `from..to` with server-side apply, 32 in flight.
async fn write_range(api: &Api<Handoff>, from: usize, to: usize) -> anyhow::Result<()> {
    let params = PatchParams::apply("bench-writer").force();
    let body = "x".repeat(BODY_BYTES);
    let results: Vec<Result<Handoff, kube::Error>> = futures::stream::iter(from..to)
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
    results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(())
}

/// Waits until the mirror holds `expected` rows, printing progress.
async fn wait_for_mirror(db: &tokio_postgres::Client, expected: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut reported = Instant::now();
    loop {
        let rows: i64 = db
            .query_one(
                "SELECT count(*) FROM handoffs WHERE namespace = $1",
                &[&NAMESPACE],
            )
            .await
            .map_or(0, |row| row.get(0));
        if usize::try_from(rows)? >= expected {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < CONVERGENCE_LIMIT,
            "the mirror holds {rows} of {expected} rows after {CONVERGENCE_LIMIT:?}"
        );
        if reported.elapsed() >= Duration::from_secs(15) {
            eprintln!("bench:   mirror {rows} / {expected} rows …");
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Entries of the first page of `list_handoffs` for `project`.
fn list(http: &mut McpHttp, project: &str) -> anyhow::Result<usize> {
    let result = http.call("list_handoffs", serde_json::json!({"project": project}))?;
    result["handoffs"]
        .as_array()
        .map(Vec::len)
        .ok_or_else(|| anyhow::anyhow!("not a list result: {result}"))
}

/// Interleaved `list_handoffs` rounds: (via apiserver, via PostgreSQL).
fn list_rounds(
    via_api: &mut McpHttp,
    via_pg: &mut McpHttp,
    per_project: usize,
) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let mut api_samples = Vec::with_capacity(LIST_ROUNDS);
    let mut pg_samples = Vec::with_capacity(LIST_ROUNDS);
    for i in 0..WARMUP + LIST_ROUNDS {
        let project = format!("project-{:03}", i % PROJECTS);
        let t = Instant::now();
        let n_api = list(via_api, &project)?;
        let took_api = t.elapsed();
        let t = Instant::now();
        let n_pg = list(via_pg, &project)?;
        let took_pg = t.elapsed();
        anyhow::ensure!(
            n_api == n_pg && n_api == per_project.min(50),
            "{project}: {n_api} via the apiserver, {n_pg} via PostgreSQL"
        );
        if i >= WARMUP {
            api_samples.push(took_api);
            pg_samples.push(took_pg);
        }
    }
    Ok((median_p99(&mut api_samples), median_p99(&mut pg_samples)))
}

/// The processes under measurement.
struct System {
    plane: ControlPlane,
    postgres: Postgres,
    controller: ControllerProcess,
    via_api: BridgeProcess,
    via_pg: BridgeProcess,
}

fn start(rt: &tokio::runtime::Runtime) -> anyhow::Result<System> {
    let plane = rt.block_on(bench::plane())?;
    let postgres = Postgres::start()?;
    let url = postgres.url();
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_handoff"));
    let kubeconfig = plane.kubeconfig_path();
    let controller = ControllerProcess::start(
        binary,
        kubeconfig,
        NAMESPACE,
        "bench",
        &["--postgres-url", &url, "--concurrency", "16"],
    )?;
    let quiet = [("RUST_LOG", "warn")];
    let via_api = BridgeProcess::start_with_env(binary, kubeconfig, NAMESPACE, &[], &quiet)?;
    let via_pg = BridgeProcess::start_with_env(
        binary,
        kubeconfig,
        NAMESPACE,
        &["--postgres-url", &url],
        &quiet,
    )?;
    Ok(System {
        plane,
        postgres,
        controller,
        via_api,
        via_pg,
    })
}

fn measure(rt: &tokio::runtime::Runtime, system: &System) -> anyhow::Result<Vec<Stage>> {
    let admin = rt.block_on(system.plane.client())?;
    let api: Api<Handoff> = Api::namespaced(admin, NAMESPACE);
    let db = rt.block_on(handoff_testkit::connect_postgres(&system.postgres.url()))?;
    let mut via_api = McpHttp::connect(system.via_api.url(), TOKEN, "refine")?;
    let mut via_pg = McpHttp::connect(system.via_pg.url(), TOKEN, "refine")?;
    let pid = system.controller.pid();

    let mut results = Vec::new();
    let mut done = 0;
    for target in stages()? {
        eprintln!(
            "bench: stage {target}: writing {} handoffs …",
            target - done
        );
        let t = Instant::now();
        rt.block_on(write_range(&api, done, target))?;
        let written = t.elapsed();
        done = target;
        eprintln!(
            "bench: stage {target}: written in {:.1} s; waiting for the mirror …",
            written.as_secs_f64()
        );
        let t = Instant::now();
        rt.block_on(wait_for_mirror(&db, target))?;
        let caught_up = t.elapsed();
        eprintln!("bench: stage {target}: {LIST_ROUNDS} list rounds (+{WARMUP} warm-up) …");
        let (api_latency, pg_latency) =
            list_rounds(&mut via_api, &mut via_pg, target.div_ceil(PROJECTS))?;
        results.push(Stage {
            handoffs: target,
            written,
            caught_up,
            controller_rss: memory_mib(pid, "VmRSS").unwrap_or(0.0),
            controller_peak: memory_mib(pid, "VmHWM").unwrap_or(0.0),
            bridge_peak: memory_mib(system.via_api.pid(), "VmHWM").unwrap_or(0.0),
            via_api: api_latency,
            via_pg: pg_latency,
        });
    }
    Ok(results)
}

fn print_report(stages: &[Stage]) {
    println!(
        "\n## Scaling: mirror, list_handoffs and controller memory ({} cores, Kubernetes {})\n",
        bench::cores(),
        handoff_testkit::Versions::pinned().kubernetes
    );
    println!(
        "Handoffs of {BODY_BYTES} bytes in {PROJECTS} projects; `list_handoffs` of one project, \
         first page of 50, {LIST_ROUNDS} samples per path.\n"
    );
    println!(
        "| handoffs | written (s) | mirror caught up after the last write (s) \
         | controller RSS / peak (MiB) | bridge peak (MiB) \
         | list via apiserver median / p99 (ms) | list via PostgreSQL median / p99 (ms) \
         | apiserver / PostgreSQL |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in stages {
        println!(
            "| {} | {:.1} | {:.1} | {:.0} / {:.0} | {:.0} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1}× |",
            s.handoffs,
            s.written.as_secs_f64(),
            s.caught_up.as_secs_f64(),
            s.controller_rss,
            s.controller_peak,
            s.bridge_peak,
            s.via_api.0 / 1e3,
            s.via_api.1 / 1e3,
            s.via_pg.0 / 1e3,
            s.via_pg.1 / 1e3,
            s.via_api.0 / s.via_pg.0.max(1.0),
        );
    }
    println!("\n![scaling](docs/bench-scaling.svg)");
}

fn figure(stages: &[Stage]) -> String {
    let line = |name: &str, value: fn(&Stage) -> f64| Series {
        name: name.into(),
        points: stages
            .iter()
            .map(|s| (s.handoffs as f64, value(s)))
            .collect(),
    };
    let panels = [
        Panel {
            title: "list_handoffs, one project (median)".into(),
            y_label: "ms".into(),
            series: vec![
                line("via apiserver", |s| s.via_api.0 / 1e3),
                line("via PostgreSQL", |s| s.via_pg.0 / 1e3),
            ],
        },
        Panel {
            title: "controller memory".into(),
            y_label: "MiB".into(),
            series: vec![
                line("resident (VmRSS)", |s| s.controller_rss),
                line("peak (VmHWM)", |s| s.controller_peak),
            ],
        },
    ];
    plot::svg(
        "handoff: how cost grows with the number of handoffs",
        "handoffs",
        &panels,
    )
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let _runtime = rt.enter();
    let system = start(&rt)?;
    let stages = measure(&rt, &system)?;
    print_report(&stages);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench-scaling.svg");
    std::fs::write(&path, figure(&stages))?;
    eprintln!("bench: wrote {}", path.display());
    Ok(())
}
