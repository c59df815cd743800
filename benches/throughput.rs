//! `make bench`: how much one bridge replica serves, side by side with the
//! apiserver serving the same load directly, and whether the PostgreSQL
//! mirror keeps up with writers at that rate (not a test; nothing is
//! asserted).
//!
//! One plane (its static token file holds one token per agent, each its own
//! user in `system:masters`, so every agent is a distinct identity to the
//! bridge and to API Priority and Fairness alike), one `handoff mcp`
//! process over streamable HTTP with its default limits, and `handoff
//! controller --postgres-url` beside them (its status writes load both
//! paths alike, as in an installation).
//!
//! Throughput, at 64 and 256 concurrent agents: each agent, in a loop,
//! writes its own handoff (2 KiB, new content each time) and reads it back
//! — `write_handoff` then `get_handoff` through the bridge (one keep-alive
//! connection per agent), or a server-side apply then a GET with the kube
//! client (one client per agent token). Rounds of a fixed time alternate
//! the paths (direct, bridge, bridge, direct, …) so the machine's noise
//! hits both; a warm-up round of each comes first (token reviews, TLS).
//! Reported per path: calls per second (each write and each read is a
//! call), the p99 of a call, the calls refused or failed (a refused agent
//! waits the second its `Retry-After` asks, then goes on), and the ratio
//! bridge / direct. Goal: ≥ 0.8 at 64 and 256 agents.
//!
//! The mirror: then 50,000 new handoffs are written with server-side apply
//! by 64 agents as fast as the apiserver takes them, and the time from the
//! last write until PostgreSQL holds every one is the lag. Goal: ≤ 15 s.
//!
//! Overrides for a quick look: `HANDOFF_BENCH_AGENTS` (`64,256`; `none`
//! measures only the mirror), `HANDOFF_BENCH_ROUNDS` (rounds per path per
//! level, 3), `HANDOFF_BENCH_ROUND_SECONDS` (5) and
//! `HANDOFF_BENCH_MIRROR_WRITES` (50000), e.g. `HANDOFF_BENCH_AGENTS=8
//! HANDOFF_BENCH_ROUNDS=1 HANDOFF_BENCH_ROUND_SECONDS=1
//! HANDOFF_BENCH_MIRROR_WRITES=500 cargo test --bench throughput`; and
//! `HANDOFF_BENCH_CONTROLLER_ARGS` adds flags to the controller (e.g.
//! `--concurrency 64`) to try them against the mirror's goal. The
//! controller's own account of the mirror stage (its reconciles and mirror
//! batches, from its `/metrics`) goes to stderr.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use handoff_core::api::Handoff;
use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_testkit::bench::{self, TOKEN, Writes, median_p99};
use handoff_testkit::http::{metric, scrape};
use handoff_testkit::previous::{Previous, beside};
use handoff_testkit::rpc::McpHttp;
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::{
    Assets, BridgeProcess, ControlPlane, ControllerProcess, PlaneOptions, Postgres, StaticToken,
};
use kube::api::{Api, Patch, PatchParams};

const NAMESPACE: &str = "default";
/// The project of the throughput rounds' handoffs.
const PROJECT: &str = "throughput";
/// The project of the mirror stage's handoffs.
const MIRROR_PROJECT: &str = "mirror-lag";
const BODY_BYTES: usize = 2048;
/// Writers of the mirror stage.
const MIRROR_WRITERS: usize = 64;
/// How long a refused or failed agent waits before its next call: the
/// `Retry-After` of the bridge's refusals (and of the apiserver's 429).
const RETRY_PAUSE: Duration = Duration::from_secs(1);
const WARMUP: Duration = Duration::from_secs(2);
const CONVERGENCE_LIMIT: Duration = Duration::from_secs(1800);
const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// The section of BENCHMARKS.md this bench writes (and reads back).
const SECTION: &str = "Throughput";

/// What the run does (the defaults, or the environment's overrides).
struct Settings {
    agents: Vec<usize>,
    rounds: usize,
    round: Duration,
    mirror_writes: usize,
    controller_args: Vec<String>,
}

/// `name`'s value as a number, or `default` when unset.
fn number(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => anyhow::bail!("{name}={text}: want a whole number of at least 1"),
        },
    }
}

impl Settings {
    fn from_env() -> anyhow::Result<Self> {
        let agents = match std::env::var("HANDOFF_BENCH_AGENTS") {
            Err(_) => vec![64, 256],
            Ok(text) if text.trim() == "none" => Vec::new(),
            Ok(text) => text
                .split(',')
                .map(|s| s.trim().parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .ok()
                .filter(|v| !v.is_empty() && v.iter().all(|&n| n > 0))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "HANDOFF_BENCH_AGENTS={text}: want counts of agents, e.g. 64,256"
                    )
                })?,
        };
        Ok(Self {
            agents,
            rounds: number("HANDOFF_BENCH_ROUNDS", 3)?,
            round: Duration::from_secs(number("HANDOFF_BENCH_ROUND_SECONDS", 5)? as u64),
            mirror_writes: number("HANDOFF_BENCH_MIRROR_WRITES", 50_000)?,
            controller_args: std::env::var("HANDOFF_BENCH_CONTROLLER_ARGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        })
    }

    fn most_agents(&self) -> usize {
        self.agents
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(MIRROR_WRITERS)
    }
}

/// Agent `i`'s bearer token (its user is `agent-<i>`).
fn token(i: usize) -> String {
    format!("throughput-agent-{i:04}-0123456789abcdef")
}

/// What the calls of one or more rounds of one path came to.
#[derive(Default)]
struct Tally {
    samples: Vec<Duration>,
    failed: usize,
    busy: Duration,
    /// The first failure's message, to show what went wrong.
    first_error: Option<String>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.samples.extend(other.samples);
        self.failed += other.failed;
        self.busy += other.busy;
        self.first_error = self.first_error.take().or(other.first_error);
    }

    fn fail(&mut self, err: &anyhow::Error) {
        self.failed += 1;
        self.first_error.get_or_insert_with(|| format!("{err:#}"));
    }

    fn per_second(&self) -> f64 {
        self.samples.len() as f64 / self.busy.as_secs_f64().max(1e-9)
    }

    /// The p99 of a call, in ms.
    fn p99_ms(&mut self) -> f64 {
        median_p99(&mut self.samples).1 / 1e3
    }
}

/// The pause after a refused or failed call: [`RETRY_PAUSE`], but not
/// past the round's `deadline` (the round's time is until its last call).
fn pause(deadline: Instant) -> Duration {
    RETRY_PAUSE.min(deadline.saturating_duration_since(Instant::now()))
}

/// The body of an agent's `call`th write: new content each time.
fn body(agent: usize, call: usize) -> String {
    let head = format!("agent {agent} call {call}\n");
    let fill = "x".repeat(BODY_BYTES.saturating_sub(head.len()));
    head + &fill
}

/// The handoff an agent of `path` writes.
fn key_of(path: &str, agent: usize) -> String {
    format!("{PROJECT}/{path}-{agent}")
}

/// One agent's direct round: apply then GET until `deadline`.
async fn direct_agent(api: Api<Handoff>, agent: usize, deadline: Instant) -> Tally {
    let key = key_of("direct", agent);
    let name = name_for_key(&key);
    let params = PatchParams::apply("bench-direct").force();
    let mut tally = Tally::default();
    let mut call = 0;
    while Instant::now() < deadline {
        call += 1;
        let mut h = Handoff::new(
            &name,
            spec(key.clone())
                .project(PROJECT)
                .body(body(agent, call))
                .by(format!("agent-{agent:04}")),
        );
        h.metadata.labels = Some(labels_for(PROJECT, None, None));
        let t = Instant::now();
        match api.patch(&name, &params, &Patch::Apply(&h)).await {
            Ok(_) => tally.samples.push(t.elapsed()),
            Err(err) => {
                tally.fail(&err.into());
                tokio::time::sleep(pause(deadline)).await;
                continue;
            }
        }
        let t = Instant::now();
        match api.get(&name).await {
            Ok(_) => tally.samples.push(t.elapsed()),
            Err(err) => {
                tally.fail(&err.into());
                tokio::time::sleep(pause(deadline)).await;
            }
        }
    }
    tally
}

/// A round of `apis.len()` agents straight to the apiserver.
fn direct_round(
    rt: &tokio::runtime::Runtime,
    apis: &[Api<Handoff>],
    length: Duration,
) -> anyhow::Result<Tally> {
    let started = Instant::now();
    let deadline = started + length;
    let tasks: Vec<_> = apis
        .iter()
        .enumerate()
        .map(|(agent, api)| rt.spawn(direct_agent(api.clone(), agent, deadline)))
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        tally.add(rt.block_on(task)?);
    }
    tally.busy = started.elapsed();
    Ok(tally)
}

/// One agent's bridge round: `write_handoff` then `get_handoff` until
/// `deadline`, on one keep-alive connection (a new one after a refusal,
/// whose answer the client leaves unread).
fn bridge_agent(url: &str, agent: usize, start: &Barrier, length: Duration) -> Tally {
    let key = key_of("bridge", agent);
    let token = token(agent);
    let mut tally = Tally::default();
    let mut http = McpHttp::connect(url, &token, "refine");
    start.wait();
    let deadline = Instant::now() + length;
    let mut call = 0;
    while Instant::now() < deadline {
        let conn = match &mut http {
            Ok(conn) => conn,
            Err(err) => {
                tally.fail(err);
                std::thread::sleep(pause(deadline));
                http = McpHttp::connect(url, &token, "refine");
                continue;
            }
        };
        call += 1;
        let write = serde_json::json!({
            "handoff_key": key, "project": PROJECT, "body": body(agent, call),
        });
        let t = Instant::now();
        let outcome = conn.call("write_handoff", write).and_then(|_| {
            tally.samples.push(t.elapsed());
            let t = Instant::now();
            conn.call("get_handoff", serde_json::json!({"handoff_key": key}))
                .map(|_| tally.samples.push(t.elapsed()))
        });
        if let Err(err) = outcome {
            tally.fail(&err);
            std::thread::sleep(pause(deadline));
            http = McpHttp::connect(url, &token, "refine");
        }
    }
    tally
}

/// A round of `agents` agents through the bridge at `url`, one thread each.
fn bridge_round(url: &str, agents: usize, length: Duration) -> Tally {
    let start = Barrier::new(agents + 1);
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..agents)
            .map(|agent| {
                let start = &start;
                scope.spawn(move || bridge_agent(url, agent, start, length))
            })
            .collect();
        start.wait();
        let started = Instant::now();
        let mut tally = Tally::default();
        for thread in threads {
            match thread.join() {
                Ok(t) => tally.add(t),
                Err(_) => tally.fail(&anyhow::anyhow!("an agent's thread panicked")),
            }
        }
        tally.busy = started.elapsed();
        tally
    })
}

/// What one level of concurrency measured, per path.
struct Level {
    agents: usize,
    direct: Tally,
    bridge: Tally,
}

impl Level {
    fn ratio(&self) -> f64 {
        self.bridge.per_second() / self.direct.per_second().max(1e-9)
    }
}

/// Alternating rounds at each level of `settings.agents`.
fn throughput(
    rt: &tokio::runtime::Runtime,
    settings: &Settings,
    apis: &[Api<Handoff>],
    url: &str,
) -> anyhow::Result<Vec<Level>> {
    let mut levels = Vec::new();
    for &agents in &settings.agents {
        let apis = &apis[..agents];
        eprintln!("bench: {agents} agents: warm-up rounds ({WARMUP:?} each) …");
        direct_round(rt, apis, WARMUP)?;
        bridge_round(url, agents, WARMUP);
        let mut level = Level {
            agents,
            direct: Tally::default(),
            bridge: Tally::default(),
        };
        for round in 0..settings.rounds {
            // direct, bridge, bridge, direct, …: neither path always first.
            for bridge_now in [round % 2 == 1, round % 2 == 0] {
                if bridge_now {
                    level.bridge.add(bridge_round(url, agents, settings.round));
                } else {
                    level.direct.add(direct_round(rt, apis, settings.round)?);
                }
            }
            eprintln!(
                "bench: {agents} agents: round {}/{}: direct {:.0}/s, bridge {:.0}/s so far",
                round + 1,
                settings.rounds,
                level.direct.per_second(),
                level.bridge.per_second()
            );
        }
        for (path, tally) in [("direct", &level.direct), ("bridge", &level.bridge)] {
            if let Some(err) = &tally.first_error {
                eprintln!(
                    "bench: {agents} agents: {path}: {} calls refused or failed, the first: {err}",
                    tally.failed
                );
            }
        }
        levels.push(level);
    }
    Ok(levels)
}

/// The mirror stage: `writes` new handoffs, then the wait for PostgreSQL.
struct MirrorStage {
    writes: usize,
    written: Duration,
    caught_up: Duration,
    /// What the apiserver served meanwhile, per agent write: (writes of
    /// handoffs, their status and Events; GETs of one handoff).
    apiserver: (f64, f64),
}

impl MirrorStage {
    fn write_rate(&self) -> f64 {
        self.writes as f64 / self.written.as_secs_f64().max(1e-9)
    }

    /// Rows per second the mirror took in, over the whole stage.
    fn mirror_rate(&self) -> f64 {
        self.writes as f64 / (self.written + self.caught_up).as_secs_f64().max(1e-9)
    }
}

/// Writes `total` new handoffs with server-side apply, [`MIRROR_WRITERS`]
/// in flight (agent `i % MIRROR_WRITERS` writes the `i`th).
async fn write_new(apis: &[Api<Handoff>], total: usize) -> anyhow::Result<()> {
    let handoff_of = |i| {
        let key = format!("{MIRROR_PROJECT}/{i}");
        let mut h = Handoff::new(
            &name_for_key(&key),
            spec(key)
                .project(MIRROR_PROJECT)
                .body(body(i % MIRROR_WRITERS, i))
                .by("bench"),
        );
        h.metadata.labels = Some(labels_for(MIRROR_PROJECT, None, None));
        h
    };
    bench::apply_all(
        0..total,
        MIRROR_WRITERS,
        "bench-direct",
        |i| apis[i % MIRROR_WRITERS].clone(),
        handoff_of,
        "mirror",
    )
    .await
}

/// Waits until the mirror holds `expected` rows of [`MIRROR_PROJECT`].
async fn wait_for_mirror(db: &tokio_postgres::Client, expected: usize) -> anyhow::Result<()> {
    let (started, mut reported) = (Instant::now(), Instant::now());
    loop {
        let rows: i64 = db
            .query_one(
                "SELECT count(*) FROM handoffs WHERE namespace = $1 AND project = $2",
                &[&NAMESPACE, &MIRROR_PROJECT],
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
        if reported.elapsed() >= PROGRESS_EVERY {
            eprintln!("bench: mirror:   {rows} / {expected} rows in PostgreSQL");
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The apiserver's `/metrics` text, read with `admin`.
async fn apiserver_metrics(admin: &kube::Client) -> anyhow::Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(admin.request_text(request).await?)
}

/// The GETs of one handoff (not a list, not its status) the apiserver
/// counted in `metrics` (`apiserver_request_total`).
fn handoff_gets(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| {
            line.starts_with("apiserver_request_total{")
                && line.contains("resource=\"handoffs\"")
                && line.contains("subresource=\"\"")
                && line.contains("verb=\"GET\"")
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

fn mirror_stage(
    rt: &tokio::runtime::Runtime,
    admin: &kube::Client,
    apis: &[Api<Handoff>],
    db: &tokio_postgres::Client,
    writes: usize,
) -> anyhow::Result<MirrorStage> {
    eprintln!("bench: mirror: writing {writes} new handoffs ({MIRROR_WRITERS} writers) …");
    let before = rt.block_on(apiserver_metrics(admin))?;
    let t = Instant::now();
    rt.block_on(write_new(apis, writes))?;
    let written = t.elapsed();
    eprintln!(
        "bench: mirror: written in {:.1} s; waiting for PostgreSQL …",
        written.as_secs_f64()
    );
    let t = Instant::now();
    rt.block_on(wait_for_mirror(db, writes))?;
    let caught_up = t.elapsed();
    eprintln!(
        "bench: mirror: caught up {:.1} s after the last write",
        caught_up.as_secs_f64()
    );
    let after = rt.block_on(apiserver_metrics(admin))?;
    let per_write = |n: f64| n / writes as f64;
    Ok(MirrorStage {
        writes,
        written,
        caught_up,
        apiserver: (
            per_write(
                Writes::parse(&after)
                    .since(&Writes::parse(&before))
                    .of_handoffs(),
            ),
            per_write(handoff_gets(&after) - handoff_gets(&before)),
        ),
    })
}

/// What the controller's `/metrics` counted between `before` and `after`:
/// its Handoff reconciles (how many, mean time) and mirror batches (how
/// many, mean writes per batch).
fn account(before: &str, after: &str) -> String {
    let delta = |series: &str| metric(after, series) - metric(before, series);
    let reconciles = delta("handoff_controller_reconcile_duration_seconds_count");
    let seconds = delta("handoff_controller_reconcile_duration_seconds_sum");
    let batches = delta("handoff_controller_mirror_batch_rows_count");
    let rows = delta("handoff_controller_mirror_batch_rows_sum");
    format!(
        "{reconciles:.0} reconciles, {:.1} ms each on average; {batches:.0} mirror batches, \
         {:.1} writes each on average",
        seconds * 1e3 / reconciles.max(1.0),
        rows / batches.max(1.0)
    )
}

/// A plane whose static token file holds the admin's [`TOKEN`] and one
/// token per agent (each its own user), with the CRDs installed.
async fn plane(agents: usize) -> anyhow::Result<ControlPlane> {
    let masters = || vec!["system:masters".to_owned()];
    let mut tokens = vec![StaticToken {
        token: TOKEN.into(),
        user: "bench".into(),
        groups: masters(),
    }];
    tokens.extend((0..agents).map(|i| StaticToken {
        token: token(i),
        user: format!("agent-{i:04}"),
        groups: masters(),
    }));
    let options = PlaneOptions {
        etcd_quota_bytes: Some(bench::ETCD_QUOTA_BYTES),
        static_tokens: tokens,
        ..PlaneOptions::default()
    };
    let plane = ControlPlane::start_with(Assets::locate()?, options).await?;
    handoff_testkit::install_crds(&plane.client().await?).await?;
    Ok(plane)
}

/// The Handoffs of the namespace as each agent (its own token and client).
async fn agent_apis(plane: &ControlPlane, agents: usize) -> anyhow::Result<Vec<Api<Handoff>>> {
    let base =
        kube::Config::from_custom_kubeconfig(plane.kubeconfig().clone(), &Default::default())
            .await?;
    (0..agents)
        .map(|i| {
            let mut config = base.clone();
            config.auth_info = kube::config::AuthInfo {
                token: Some(token(i).into()),
                ..Default::default()
            };
            Ok(Api::namespaced(kube::Client::try_from(config)?, NAMESPACE))
        })
        .collect()
}

/// `new (was …)` for `column` of `row`, the previous run's value beside.
fn cell(previous: Option<&Previous>, row: &str, column: &str, new: String) -> String {
    beside(
        &new,
        previous
            .and_then(|p| p.cell(SECTION, row, column))
            .as_deref(),
    )
}

const LEVEL_COLUMNS: [&str; 6] = [
    "agents",
    "direct (calls/s)",
    "bridge (calls/s)",
    "bridge / direct",
    "p99 direct / bridge (ms)",
    "refused or failed, direct / bridge",
];
const MIRROR_COLUMNS: [&str; 6] = [
    "writes",
    "written (s)",
    "writes/s",
    "mirror caught up after the last write (s)",
    "mirror rows/s over the stage",
    "apiserver writes / GETs per write",
];

fn print_report(
    settings: &Settings,
    levels: &mut [Level],
    mirror: &MirrorStage,
    previous: Option<&Previous>,
) {
    println!(
        "\n## {SECTION}: one bridge replica vs the apiserver directly, and the mirror ({} cores, Kubernetes {})\n",
        bench::cores(),
        handoff_testkit::Versions::pinned().kubernetes
    );
    println!(
        "Each agent its own identity (a static token of its own user), writing its own handoff \
         ({BODY_BYTES} bytes, new content each time) and reading it back, in a loop: \
         `write_handoff` + `get_handoff` through one `handoff mcp` process (default limits), or \
         server-side apply + GET with the kube client. {} rounds of {} s per path per level, \
         alternated, after a warm-up round of each; the controller runs with the mirror \
         throughout. A call is one write or one read. Goal: bridge / direct ≥ 0.8 at 64 and 256 \
         agents.",
        settings.rounds,
        settings.round.as_secs()
    );
    if let Some(previous) = previous {
        println!(
            "Beside the key measures, `(was …)`: the previous run's ({}).",
            previous.date()
        );
    }
    println!();
    println!("| {} |", LEVEL_COLUMNS.join(" | "));
    println!("|{}", "---:|".repeat(LEVEL_COLUMNS.len()));
    for level in levels.iter_mut() {
        let row = level.agents.to_string();
        let ratio = level.ratio();
        let cells = [
            row.clone(),
            cell(
                previous,
                &row,
                LEVEL_COLUMNS[1],
                format!("{:.0}", level.direct.per_second()),
            ),
            cell(
                previous,
                &row,
                LEVEL_COLUMNS[2],
                format!("{:.0}", level.bridge.per_second()),
            ),
            cell(previous, &row, LEVEL_COLUMNS[3], format!("{ratio:.2}")),
            cell(
                previous,
                &row,
                LEVEL_COLUMNS[4],
                format!(
                    "{:.1} / {:.1}",
                    level.direct.p99_ms(),
                    level.bridge.p99_ms()
                ),
            ),
            format!("{} / {}", level.direct.failed, level.bridge.failed),
        ];
        println!("| {} |", cells.join(" | "));
    }
    println!(
        "\nThe mirror: {} new handoffs written with server-side apply by {MIRROR_WRITERS} agents \
         as fast as the apiserver takes them, then the time until PostgreSQL holds every one; \
         the apiserver's writes (handoffs, their status, Events) and GETs of a handoff from the \
         first write until then, per write. Goal: caught up ≤ 15 s after the last write.\n",
        mirror.writes
    );
    println!("| {} |", MIRROR_COLUMNS.join(" | "));
    println!("|{}", "---:|".repeat(MIRROR_COLUMNS.len()));
    let row = mirror.writes.to_string();
    let cells = [
        row.clone(),
        format!("{:.1}", mirror.written.as_secs_f64()),
        cell(
            previous,
            &row,
            MIRROR_COLUMNS[2],
            format!("{:.0}", mirror.write_rate()),
        ),
        cell(
            previous,
            &row,
            MIRROR_COLUMNS[3],
            format!("{:.1}", mirror.caught_up.as_secs_f64()),
        ),
        cell(
            previous,
            &row,
            MIRROR_COLUMNS[4],
            format!("{:.0}", mirror.mirror_rate()),
        ),
        cell(
            previous,
            &row,
            MIRROR_COLUMNS[5],
            format!("{:.2} / {:.2}", mirror.apiserver.0, mirror.apiserver.1),
        ),
    ];
    println!("| {} |", cells.join(" | "));
}

fn main() -> anyhow::Result<()> {
    let settings = Settings::from_env()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let _runtime = rt.enter();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let previous = Previous::load(&root.join("BENCHMARKS.md"));
    let most = settings.most_agents();
    let plane = rt.block_on(plane(most))?;
    let postgres = Postgres::start()?;
    let url = postgres.url();
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_handoff"));
    let kubeconfig = plane.kubeconfig_path();
    let mut controller_args = vec!["--postgres-url", &url];
    controller_args.extend(settings.controller_args.iter().map(String::as_str));
    let controller =
        ControllerProcess::start(binary, kubeconfig, NAMESPACE, "bench", &controller_args)?;
    let bridge =
        BridgeProcess::start_with_env(binary, kubeconfig, NAMESPACE, &[], &[("RUST_LOG", "warn")])?;
    let apis = rt.block_on(agent_apis(&plane, most))?;
    let db = rt.block_on(handoff_testkit::connect_postgres(&url))?;
    let mut levels = throughput(&rt, &settings, &apis, bridge.url())?;
    let before = rt.block_on(scrape(controller.metrics_addr()))?;
    let admin = rt.block_on(plane.client())?;
    let mirror = mirror_stage(&rt, &admin, &apis, &db, settings.mirror_writes)?;
    let after = rt.block_on(scrape(controller.metrics_addr()))?;
    eprintln!(
        "bench: mirror: the controller: {}",
        account(&before, &after)
    );
    print_report(&settings, &mut levels, &mirror, previous.as_ref());
    Ok(())
}
