//! How cost grows with the work (not a test; nothing is asserted): the
//! PostgreSQL mirror, `list_handoffs`, the apiserver's writes, the bridge's
//! write overhead and the memory of every process at 1,000 / 10,000 /
//! 50,000 / 100,000 handoffs, measured in one run.
//!
//! `handoff controller --postgres-url` and two bridges (one listing from
//! the apiserver, one from PostgreSQL) run as separate processes against
//! the benchmark's plane (etcd's quota sized for the last stage:
//! `handoff_testkit::bench::ETCD_QUOTA_BYTES`). Handoffs of 2 KiB in 100
//! projects are written with server-side apply (32 in flight) up to each
//! stage; then, per stage:
//! - the time until the mirror holds every handoff, after the last write;
//! - the apiserver's writes per agent write: its `apiserver_request_total`
//!   (writes to `handoffs`, `handoffs/status`, `events`), read before the
//!   stage's writes and once the mirror caught up and the controller is
//!   idle (no such write for [`IDLE`]), over the stage's agent writes;
//! - the controller's resident memory (`VmRSS`) and peak (`VmHWM`), its
//!   growth per handoff since the previous stage (the slope) and per
//!   handoff overall; the apiserver's and etcd's resident memory, etcd's
//!   database size;
//! - `list_handoffs` of one project (first page, the default limit of 50)
//!   through both bridges, interleaved: median, p99 and the ratio;
//! - `write_handoff` through the bridge (new content each time) against a
//!   direct server-side apply of the same handoff, interleaved: the ratio
//!   of the medians and of the p99s.
//!
//! The table goes to stdout (for BENCHMARKS.md), each key measure beside
//! the previous run's (`handoff_testkit::previous`), and the figure to
//! `docs/bench-scaling.svg`. `HANDOFF_BENCH_STAGES` overrides the stages
//! (e.g. `500,2000` for a quick look).

use std::time::{Duration, Instant};

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::bench::{self, TOKEN, Writes, apiserver_writes, median_p99, memory_mib};
use handoff_testkit::http::{metric, scrape};
use handoff_testkit::plot::{self, Panel, Series};
use handoff_testkit::previous::{Previous, beside};
use handoff_testkit::rpc::McpHttp;
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::{BridgeProcess, ControlPlane, ControllerProcess, Postgres};
use kube::api::{Api, Patch, PatchParams};

const NAMESPACE: &str = "default";
const PROJECTS: usize = 100;
const LIST_ROUNDS: usize = 100;
const WARMUP: usize = 10;
/// `write_handoff` vs direct apply samples per stage (each).
const WRITE_ROUNDS: usize = 100;
const BODY_BYTES: usize = 2048;
const CONVERGENCE_LIMIT: Duration = Duration::from_secs(3600);
/// The controller is idle once the apiserver counted no write of a
/// handoff, its status or an Event for this long.
const IDLE: Duration = Duration::from_secs(3);
/// How often long work prints where it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// The section of BENCHMARKS.md this bench writes (and reads back).
const SECTION: &str = "Scaling";
/// The project of the write-ratio handoffs (not one of the listed ones).
const RATIO_PROJECT: &str = "write-ratio";

/// What one stage measured.
struct Stage {
    handoffs: usize,
    agent_writes: usize,
    written: Duration,
    caught_up: Duration,
    writes: Writes,
    controller_rss: f64,
    controller_peak: f64,
    /// KiB per handoff added since the previous stage (or the start).
    controller_slope: f64,
    bridge_peak: f64,
    apiserver_rss: f64,
    etcd_rss: f64,
    etcd_db: (f64, f64),
    via_api: (f64, f64),
    via_pg: (f64, f64),
    bridge_write: (f64, f64),
    direct_write: (f64, f64),
}

impl Stage {
    fn writes_per_agent_write(&self) -> f64 {
        self.writes.of_handoffs() / self.agent_writes.max(1) as f64
    }

    /// The controller's resident KiB per handoff.
    fn controller_kib_per_handoff(&self) -> f64 {
        self.controller_rss * 1024.0 / self.handoffs.max(1) as f64
    }

    /// Bridge write / direct apply: (of the medians, of the p99s).
    fn write_ratio(&self) -> (f64, f64) {
        (
            self.bridge_write.0 / self.direct_write.0.max(1.0),
            self.bridge_write.1 / self.direct_write.1.max(1.0),
        )
    }
}

fn stages() -> anyhow::Result<Vec<usize>> {
    let Ok(text) = std::env::var("HANDOFF_BENCH_STAGES") else {
        return Ok(vec![1_000, 10_000, 50_000, 100_000]);
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

/// Waits until the mirror holds `expected` rows of the listed projects,
/// printing progress.
async fn wait_for_mirror(
    db: &tokio_postgres::Client,
    expected: usize,
    stage: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut reported = Instant::now();
    let mut initial = None;
    loop {
        let rows: i64 = db
            .query_one(
                "SELECT count(*) FROM handoffs WHERE namespace = $1 AND project LIKE 'project-%'",
                &[&NAMESPACE],
            )
            .await
            .map_or(0, |row| row.get(0));
        let rows = usize::try_from(rows)?;
        if rows >= expected {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < CONVERGENCE_LIMIT,
            "the mirror holds {rows} of {expected} rows after {CONVERGENCE_LIMIT:?}"
        );
        // The rate counts only what the mirror caught up while waiting.
        let initial = *initial.get_or_insert(rows);
        if reported.elapsed() >= PROGRESS_EVERY {
            eprintln!(
                "bench: {stage}:   mirror {rows} / {expected} rows; while waiting: {}",
                bench::progress(rows.saturating_sub(initial), expected - initial, started)
            );
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The apiserver's writes once none of handoffs, their status or Events
/// came for [`IDLE`] (the controller is done with what it saw).
async fn wait_idle(admin: &kube::Client) -> anyhow::Result<Writes> {
    let started = Instant::now();
    let mut last = apiserver_writes(admin).await?;
    let mut quiet_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = apiserver_writes(admin).await?;
        if now.of_handoffs() != last.of_handoffs() {
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= IDLE {
            return Ok(now);
        }
        last = now;
        anyhow::ensure!(
            started.elapsed() < CONVERGENCE_LIMIT,
            "the apiserver still counts writes after {CONVERGENCE_LIMIT:?}"
        );
    }
}

/// etcd's database size and the part in use, in MiB (from its `/metrics`).
async fn etcd_db_mib(plane: &ControlPlane) -> anyhow::Result<(f64, f64)> {
    let text = scrape(&format!("127.0.0.1:{}", plane.ports().0)).await?;
    let mib = |name: &str| metric(&text, name) / (1024.0 * 1024.0);
    Ok((
        mib("etcd_mvcc_db_total_size_in_bytes"),
        mib("etcd_mvcc_db_total_size_in_use_in_bytes"),
    ))
}

/// Entries of the first page of `list_handoffs` for `project`.
fn list(http: &mut McpHttp, project: &str) -> anyhow::Result<usize> {
    let result = http.call("list_handoffs", serde_json::json!({"project": project}))?;
    result["handoffs"]
        .as_array()
        .map(Vec::len)
        .ok_or_else(|| anyhow::anyhow!("not a list result: {result}"))
}

/// The key and project of the scaling benchmark's handoff `i`.
fn key_of(i: usize) -> (String, String) {
    (
        format!("bench/{}#{}", i % PROJECTS, i / PROJECTS),
        format!("project-{:03}", i % PROJECTS),
    )
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
        &["--postgres-url", &url],
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

/// `write_handoff` through the bridge (new content each time) and a direct
/// server-side apply of the same handoff (the agent's token), interleaved:
/// (bridge, direct) median and p99 in µs.
fn write_rounds(
    rt: &tokio::runtime::Runtime,
    bridge: &mut McpHttp,
    direct: &Api<Handoff>,
    stage: usize,
) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let key = format!("bench/ratio#{stage}");
    let name = name_for_key(&key);
    let params = PatchParams::apply("bench-direct").force();
    let mut via_bridge = Vec::with_capacity(WRITE_ROUNDS);
    let mut via_direct = Vec::with_capacity(WRITE_ROUNDS);
    for i in 0..WARMUP + WRITE_ROUNDS {
        let t = Instant::now();
        bridge.call(
            "write_handoff",
            serde_json::json!({
                "handoff_key": key,
                "project": RATIO_PROJECT,
                "body": format!("bridge body {i}"),
            }),
        )?;
        let took_bridge = t.elapsed();
        let h = Handoff::new(
            &name,
            spec(key.clone())
                .project(RATIO_PROJECT)
                .body(format!("direct body {i}"))
                .by("bench"),
        );
        let t = Instant::now();
        rt.block_on(direct.patch(&name, &params, &Patch::Apply(&h)))?;
        let took_direct = t.elapsed();
        if i >= WARMUP {
            via_bridge.push(took_bridge);
            via_direct.push(took_direct);
        }
    }
    Ok((median_p99(&mut via_bridge), median_p99(&mut via_direct)))
}

/// The Handoffs of the namespace as the agent (its static token).
fn agent_api(rt: &tokio::runtime::Runtime, plane: &ControlPlane) -> anyhow::Result<Api<Handoff>> {
    Ok(Api::namespaced(
        rt.block_on(bench::agent_client(plane))?,
        NAMESPACE,
    ))
}

fn measure(rt: &tokio::runtime::Runtime, system: &System) -> anyhow::Result<Vec<Stage>> {
    let admin = rt.block_on(system.plane.client())?;
    let api: Api<Handoff> = Api::namespaced(admin.clone(), NAMESPACE);
    let direct = agent_api(rt, &system.plane)?;
    let db = rt.block_on(handoff_testkit::connect_postgres(&system.postgres.url()))?;
    let pid = system.controller.pid();
    let [etcd_pid, apiserver_pid] = system.plane.pids()[..] else {
        anyhow::bail!("the plane has not two processes (etcd, kube-apiserver)");
    };

    let targets = stages()?;
    let mut results: Vec<Stage> = Vec::new();
    let (mut done, mut rss_before) = (0, memory_mib(pid, "VmRSS").unwrap_or(0.0));
    let run_started = Instant::now();
    for (index, &target) in targets.iter().enumerate() {
        let stage = format!("stage {}/{} ({target})", index + 1, targets.len());
        eprintln!("bench: {stage}: waiting until the controller is idle …");
        let before = rt.block_on(wait_idle(&admin))?;
        eprintln!("bench: {stage}: writing {} handoffs …", target - done);
        let t = Instant::now();
        rt.block_on(bench::fill(&api, done..target, BODY_BYTES, key_of, &stage))?;
        let written = t.elapsed();
        eprintln!(
            "bench: {stage}: written in {:.1} s; waiting for the mirror …",
            written.as_secs_f64()
        );
        let t = Instant::now();
        rt.block_on(wait_for_mirror(&db, target, &stage))?;
        let caught_up = t.elapsed();
        eprintln!(
            "bench: {stage}: mirror caught up in {:.1} s; waiting until the controller is idle …",
            caught_up.as_secs_f64()
        );
        let writes = rt.block_on(wait_idle(&admin))?.since(&before);
        let controller_rss = memory_mib(pid, "VmRSS").unwrap_or(0.0);
        let controller_slope = (controller_rss - rss_before) * 1024.0 / (target - done) as f64;
        let agent_writes = target - done;
        (done, rss_before) = (target, controller_rss);
        eprintln!("bench: {stage}: {LIST_ROUNDS} list rounds (+{WARMUP} warm-up) …");
        // New connections: the bridge closes one left idle longer than its
        // header read timeout (2 s), as it was while the stage was written.
        let mut via_api = McpHttp::connect(system.via_api.url(), TOKEN, "refine")?;
        let mut via_pg = McpHttp::connect(system.via_pg.url(), TOKEN, "refine")?;
        let (api_latency, pg_latency) =
            list_rounds(&mut via_api, &mut via_pg, target.div_ceil(PROJECTS))?;
        eprintln!("bench: {stage}: {WRITE_ROUNDS} write rounds (+{WARMUP} warm-up) …");
        let (bridge_write, direct_write) = write_rounds(rt, &mut via_api, &direct, target)?;
        results.push(Stage {
            handoffs: target,
            agent_writes,
            written,
            caught_up,
            writes,
            controller_rss,
            controller_peak: memory_mib(pid, "VmHWM").unwrap_or(0.0),
            controller_slope,
            bridge_peak: memory_mib(system.via_api.pid(), "VmHWM").unwrap_or(0.0),
            apiserver_rss: memory_mib(apiserver_pid, "VmRSS").unwrap_or(0.0),
            etcd_rss: memory_mib(etcd_pid, "VmRSS").unwrap_or(0.0),
            etcd_db: rt.block_on(etcd_db_mib(&system.plane))?,
            via_api: api_latency,
            via_pg: pg_latency,
            bridge_write,
            direct_write,
        });
        eprintln!(
            "bench: {stage}: done after {:.0} s in all",
            run_started.elapsed().as_secs_f64()
        );
    }
    Ok(results)
}

/// The scaling table's columns: header, and the cell of a stage (before the
/// previous run's value is put beside it, for the columns that keep one).
struct Column {
    header: &'static str,
    cell: fn(&Stage) -> String,
    keeps_previous: bool,
}

const COLUMNS: [Column; 13] = [
    Column {
        header: "handoffs",
        cell: |s| s.handoffs.to_string(),
        keeps_previous: false,
    },
    Column {
        header: "written (s)",
        cell: |s| format!("{:.1}", s.written.as_secs_f64()),
        keeps_previous: false,
    },
    Column {
        header: "mirror caught up after the last write (s)",
        cell: |s| format!("{:.1}", s.caught_up.as_secs_f64()),
        keeps_previous: true,
    },
    Column {
        header: "apiserver writes per agent write",
        cell: |s| format!("{:.2}", s.writes_per_agent_write()),
        keeps_previous: true,
    },
    Column {
        header: "controller RSS / peak (MiB)",
        cell: |s| format!("{:.0} / {:.0}", s.controller_rss, s.controller_peak),
        keeps_previous: true,
    },
    Column {
        header: "controller KiB per handoff: slope / RSS ÷ handoffs",
        cell: |s| {
            format!(
                "{:.1} / {:.1}",
                s.controller_slope,
                s.controller_kib_per_handoff()
            )
        },
        keeps_previous: true,
    },
    Column {
        header: "apiserver / etcd RSS (MiB)",
        cell: |s| format!("{:.0} / {:.0}", s.apiserver_rss, s.etcd_rss),
        keeps_previous: false,
    },
    Column {
        header: "etcd DB size / in use (MiB)",
        cell: |s| format!("{:.0} / {:.0}", s.etcd_db.0, s.etcd_db.1),
        keeps_previous: false,
    },
    Column {
        header: "bridge peak (MiB)",
        cell: |s| format!("{:.0}", s.bridge_peak),
        keeps_previous: false,
    },
    Column {
        header: "bridge write / direct apply, median / p99",
        cell: |s| {
            let (median, p99) = s.write_ratio();
            format!("{median:.2} / {p99:.2}")
        },
        keeps_previous: true,
    },
    Column {
        header: "list via apiserver median / p99 (ms)",
        cell: |s| format!("{:.1} / {:.1}", s.via_api.0 / 1e3, s.via_api.1 / 1e3),
        keeps_previous: true,
    },
    Column {
        header: "list via PostgreSQL median / p99 (ms)",
        cell: |s| format!("{:.1} / {:.1}", s.via_pg.0 / 1e3, s.via_pg.1 / 1e3),
        keeps_previous: true,
    },
    Column {
        header: "apiserver / PostgreSQL",
        cell: |s| format!("{:.1}×", s.via_api.0 / s.via_pg.0.max(1.0)),
        keeps_previous: false,
    },
];

fn print_report(stages: &[Stage], previous: Option<&Previous>) {
    println!(
        "\n## Scaling: mirror, list_handoffs, apiserver writes and memory ({} cores, Kubernetes {})\n",
        bench::cores(),
        handoff_testkit::Versions::pinned().kubernetes
    );
    println!(
        "Handoffs of {BODY_BYTES} bytes in {PROJECTS} projects, written with server-side apply; \
         `list_handoffs` of one project, first page of 50, {LIST_ROUNDS} samples per path; \
         `write_handoff` through the bridge (new content each time) against a direct \
         server-side apply of the same handoff, {WRITE_ROUNDS} samples each, interleaved. \
         apiserver writes: `apiserver_request_total` of writes to handoffs, their status and \
         Events from before the stage's writes until the mirror caught up and the controller \
         was idle, over the stage's agent writes. etcd's quota: {} GiB.",
        bench::ETCD_QUOTA_BYTES >> 30
    );
    if let Some(previous) = previous {
        println!(
            "Beside the key measures, `(was …)`: the previous run's ({}).",
            previous.date()
        );
    }
    println!();
    let headers: Vec<&str> = COLUMNS.iter().map(|c| c.header).collect();
    println!("| {} |", headers.join(" | "));
    println!("|{}", "---:|".repeat(COLUMNS.len()));
    for s in stages {
        let row = s.handoffs.to_string();
        let cells: Vec<String> = COLUMNS
            .iter()
            .map(|c| {
                let new = (c.cell)(s);
                let old = previous
                    .filter(|_| c.keeps_previous)
                    .and_then(|p| p.cell(SECTION, &row, c.header));
                beside(&new, old.as_deref())
            })
            .collect();
        println!("| {} |", cells.join(" | "));
    }
    println!(
        "\nThe apiserver's writes per stage (spec / status / Events / other resources, e.g. Leases):\n"
    );
    for s in stages {
        println!(
            "- {} handoffs ({} agent writes): {:.0} / {:.0} / {:.0} / {:.0}",
            s.handoffs,
            s.agent_writes,
            s.writes.spec,
            s.writes.status,
            s.writes.events,
            s.writes.other
        );
    }
    println!("\n![scaling](docs/bench-scaling.svg)");
}

fn figure(stages: &[Stage], previous: Option<&Previous>) -> String {
    let line = |name: &str, value: fn(&Stage) -> f64| Series {
        name: name.into(),
        points: stages
            .iter()
            .map(|s| (s.handoffs as f64, value(s)))
            .collect(),
        dashed: false,
    };
    // The previous run's points of a column, when it had them.
    let before = |name: &str, column: &str| {
        let points: Vec<(f64, f64)> = previous
            .map(|p| p.column(SECTION, column))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(row, value)| Some((row.parse::<f64>().ok()?, value)))
            .collect();
        (!points.is_empty()).then(|| Series {
            name: format!("{name}, previous run"),
            points,
            dashed: true,
        })
    };
    let with_previous = |series: Vec<(Series, Option<Series>)>| {
        series
            .into_iter()
            .flat_map(|(now, was)| std::iter::once(now).chain(was))
            .collect()
    };
    let panels = [
        Panel {
            title: "list_handoffs, one project (median)".into(),
            y_label: "ms".into(),
            series: with_previous(vec![
                (
                    line("via apiserver", |s| s.via_api.0 / 1e3),
                    before("via apiserver", "list via apiserver"),
                ),
                (
                    line("via PostgreSQL", |s| s.via_pg.0 / 1e3),
                    before("via PostgreSQL", "list via PostgreSQL"),
                ),
            ]),
        },
        Panel {
            title: "controller memory".into(),
            y_label: "MiB".into(),
            series: with_previous(vec![
                (
                    line("resident (VmRSS)", |s| s.controller_rss),
                    before("resident", "controller RSS"),
                ),
                (line("peak (VmHWM)", |s| s.controller_peak), None),
            ]),
        },
        Panel {
            title: "controller KiB per handoff".into(),
            y_label: "KiB".into(),
            series: with_previous(vec![
                (
                    line("slope since last stage", |s| s.controller_slope),
                    before("slope", "controller KiB per handoff"),
                ),
                (
                    line("RSS ÷ handoffs", Stage::controller_kib_per_handoff),
                    None,
                ),
            ]),
        },
        Panel {
            title: "apiserver writes per agent write".into(),
            y_label: "writes".into(),
            series: with_previous(vec![(
                line("handoffs, status, Events", Stage::writes_per_agent_write),
                before("writes", "apiserver writes per agent write"),
            )]),
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
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let previous = Previous::load(&root.join("BENCHMARKS.md"));
    let system = start(&rt)?;
    let stages = measure(&rt, &system)?;
    print_report(&stages, previous.as_ref());
    let path = root.join("docs/bench-scaling.svg");
    std::fs::write(&path, figure(&stages, previous.as_ref()))?;
    eprintln!("bench: wrote {}", path.display());
    Ok(())
}
