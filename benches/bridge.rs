//! `make bench`: the MCP bridge (streamable HTTP, a separate `handoff mcp`
//! process) against the same operations done directly with the kube client,
//! measured side by side in one run against the local control plane.
//!
//! Both paths authenticate with the same static bearer token, and the
//! operations are interleaved (direct, bridge, direct, …) so that noise on a
//! shared machine hits both alike. Reported: median and p99 per operation
//! and the ratios; nothing is asserted.
//!
//! The ratios are printed beside the previous run's (read from the
//! committed BENCHMARKS.md, or the copy `make bench` keeps of it:
//! `handoff_testkit::previous`).
//!
//! Then the same agent's `get_handoff` quiet and during a flood of requests
//! with distinct invalid tokens (64 in flight, bounded in count), as a
//! ratio: what a valid agent feels while someone hammers the bridge.
//!
//! Then the fair share: [`QUIET`] quiet callers (identities of their own),
//! each calling `get_handoff` one at a time, alone and beside one greedy
//! caller keeping [`GREEDY`] `write_handoff` calls going at once, first
//! sending a refused one again at once, then after its `Retry-After`: the
//! quiet callers' p99 against their quiet p99, and how many of their calls
//! were refused.
//!
//! Last, a bridge with the PostgreSQL mirror: one caller's `get_handoff`
//! quiet and while four connections of another identity diff, back to back,
//! two revisions of [`DIFF_LINES`] short lines with little in common (the
//! worst kind of input for a line diff) — the p99 ratio the diff's bounds
//! keep small. `HANDOFF_BENCH_DIFF_ONLY=1` runs that part alone,
//! `HANDOFF_BENCH_FAIR_ONLY=1` the fair-share part alone.

use std::time::{Duration, Instant};

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::bench::{self, TOKEN, median_p99};
use handoff_testkit::http::{addr_of, exchange, flood, mcp_post_as, metric, scrape, tool_call};
use handoff_testkit::previous::{Previous, medians};
use handoff_testkit::rpc::McpHttp;
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::{Assets, BridgeProcess, ControlPlane, PlaneOptions, StaticToken};
use kube::api::{Api, Patch, PatchParams};

const ITERATIONS: usize = 300;
const WARMUP: usize = 30;
/// Requests with distinct invalid tokens in the flood, and how many at once.
const FLOOD: usize = 20_000;
const FLOOD_IN_FLIGHT: usize = 64;
/// Lines of each revision in the diff under load, and how many callers diff at once.
const DIFF_LINES: usize = 16_000;
const DIFFERS: usize = 4;
/// Quiet callers beside the greedy one, the calls each makes per phase,
/// and the greedy caller's calls at once.
const QUIET: usize = 16;
const QUIET_CALLS: usize = 100;
const GREEDY: usize = 160;
/// The section of BENCHMARKS.md with the fair-share ratio.
const FAIR_SECTION: &str = "Quiet callers beside a greedy one";
/// The section of BENCHMARKS.md with the diff-under-load ratio.
const DIFF_SECTION: &str = "Another caller during four worst-case diffs";
/// The section of BENCHMARKS.md with the ratios (and the previous run's).
const SECTION: &str = "Bridge vs direct";

struct Row {
    name: &'static str,
    samples: Vec<Duration>,
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let _runtime = rt.enter();
    let previous =
        Previous::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md"));
    let plane = rt.block_on(plane())?;
    let direct: Api<Handoff> =
        Api::namespaced(rt.block_on(bench::agent_client(&plane))?, "default");
    if std::env::var_os("HANDOFF_BENCH_DIFF_ONLY").is_some() {
        let key = "bench/get#1";
        rt.block_on(direct.patch(
            &name_for_key(key),
            &PatchParams::apply("bench-direct").force(),
            &Patch::Apply(&Handoff::new(
                &name_for_key(key),
                spec(key).project("bench").body("steady body").by("bench"),
            )),
        ))?;
        under_diffs(&rt, &plane, &direct, key)?.print(previous.as_ref());
        return Ok(());
    }
    if std::env::var_os("HANDOFF_BENCH_FAIR_ONLY").is_some() {
        let bridge = BridgeProcess::start(
            std::path::Path::new(env!("CARGO_BIN_EXE_handoff")),
            plane.kubeconfig_path(),
            "default",
            &[],
        )?;
        let key = "bench/get#1";
        McpHttp::connect(bridge.url(), TOKEN, "refine")?.call(
            "write_handoff",
            serde_json::json!({"handoff_key": key, "project": "bench", "body": "steady body"}),
        )?;
        beside_a_greedy_caller(&rt, &bridge, key)?.print(previous.as_ref());
        return Ok(());
    }

    let bridge = BridgeProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_handoff")),
        plane.kubeconfig_path(),
        "default",
        &["--metrics-listen", "127.0.0.1:0"],
    )?;
    let url = bridge.url().to_owned();
    let mut http = McpHttp::connect(&url, TOKEN, "refine")?;

    let key = "bench/get#1";
    let name = name_for_key(key);
    let spec = |body: String| spec(key).project("bench").body(body).by("bench");
    let params = PatchParams::apply("bench-direct").force();
    let write_args =
        |body: &str| serde_json::json!({"handoff_key": key, "project": "bench", "body": body});
    http.call("write_handoff", write_args("steady body"))?;

    const NAMES: [&str; 6] = [
        "get: direct (kube client GET)",
        "get: bridge (get_handoff)",
        "write: direct (server-side apply)",
        "write: bridge (write_handoff, new content)",
        "write: bridge (write_handoff, unchanged)",
        "write: direct GET + apply (write_handoff's former two round trips)",
    ];
    let mut rows: Vec<Row> = NAMES
        .iter()
        .map(|name| Row {
            name,
            samples: Vec::new(),
        })
        .collect();
    eprintln!(
        "bench: {ITERATIONS} rounds of {} operations (+{WARMUP} warm-up) …",
        rows.len()
    );
    for i in 0..WARMUP + ITERATIONS {
        let mut timings = [Duration::ZERO; 6];
        let t = Instant::now();
        rt.block_on(direct.get(&name))?;
        timings[0] = t.elapsed();
        let t = Instant::now();
        http.call("get_handoff", serde_json::json!({"handoff_key": key}))?;
        timings[1] = t.elapsed();
        let t = Instant::now();
        let h = Handoff::new(&name, spec(format!("direct body {i}")));
        rt.block_on(direct.patch(&name, &params, &Patch::Apply(&h)))?;
        timings[2] = t.elapsed();
        let t = Instant::now();
        http.call("write_handoff", write_args(&format!("bridge body {i}")))?;
        timings[3] = t.elapsed();
        let t = Instant::now();
        http.call("write_handoff", write_args(&format!("bridge body {i}")))?;
        timings[4] = t.elapsed();
        let t = Instant::now();
        rt.block_on(direct.get(&name))?;
        let h = Handoff::new(&name, spec(format!("direct again {i}")));
        rt.block_on(direct.patch(&name, &params, &Patch::Apply(&h)))?;
        timings[5] = t.elapsed();
        if i >= WARMUP {
            for (row, took) in rows.iter_mut().zip(timings) {
                row.samples.push(took);
            }
        }
        if (i + 1) % 100 == 0 {
            eprintln!("bench: {}/{}", i + 1, WARMUP + ITERATIONS);
        }
    }
    let flooded = under_flood(&rt, &bridge, &mut http, key)?;
    let fair = beside_a_greedy_caller(&rt, &bridge, key)?;
    drop(bridge);
    let diffed = under_diffs(&rt, &plane, &direct, key)?;

    let stats: Vec<(f64, f64)> = rows
        .iter_mut()
        .map(|r| median_p99(&mut r.samples))
        .collect();
    println!(
        "\n## Bridge vs direct ({} cores, Kubernetes {}, {ITERATIONS} samples each)\n",
        bench::cores(),
        handoff_testkit::Versions::pinned().kubernetes
    );
    println!("| operation | median µs | p99 µs |\n|---|---:|---:|");
    for (row, (median, p99)) in rows.iter().zip(&stats) {
        println!("| {} | {median:.0} | {p99:.0} |", row.name);
    }
    let ratio = |a: usize, b: usize| (stats[a].0 / stats[b].0, stats[a].1 / stats[b].1);
    println!(
        "\n| ratio | median | p99 | previous run ({}) median / p99 | goal |\n|---|---:|---:|---:|---|",
        previous.as_ref().map_or("none", Previous::date)
    );
    for (label, (a, b), goal) in [
        ("get: bridge / direct", (1, 0), "≤ 1.5"),
        ("write: bridge / direct", (3, 2), "≤ 1.5"),
        ("unchanged write / direct GET", (4, 0), "≤ 1.1"),
        (
            "write: bridge / direct GET + apply",
            (3, 5),
            "(< 1: the read write_handoff no longer makes)",
        ),
    ] {
        let (m, p) = ratio(a, b);
        let before = medians(previous.as_ref(), SECTION, label);
        println!("| {label} | {m:.2} | {p:.2} | {before} | {goal} |");
    }
    flooded.print();
    fair.print(previous.as_ref());
    diffed.print(previous.as_ref());
    drop(plane);
    Ok(())
}

/// The token of quiet caller `i` (a user of its own, `bench-caller-<i>`).
fn caller_token(i: usize) -> String {
    format!("bench-caller-{i:02}-0123456789abcdef")
}

/// The benchmark's plane ([`bench::plane`]) that also accepts the tokens of
/// [`QUIET`] callers, each a user of its own.
async fn plane() -> anyhow::Result<ControlPlane> {
    let admin = |token: String, user: String| StaticToken {
        token,
        user,
        groups: vec!["system:masters".into()],
    };
    let static_tokens = std::iter::once(admin(TOKEN.into(), "bench".into()))
        .chain((1..=QUIET).map(|i| admin(caller_token(i), format!("bench-caller-{i:02}"))))
        .collect();
    let options = PlaneOptions {
        etcd_quota_bytes: Some(bench::ETCD_QUOTA_BYTES),
        static_tokens,
        ..PlaneOptions::default()
    };
    let plane = ControlPlane::start_with(Assets::locate()?, options).await?;
    handoff_testkit::install_crds(&plane.client().await?).await?;
    Ok(plane)
}

/// The quiet callers' `get_handoff` beside one greedy caller.
struct Phase {
    /// How the greedy caller takes a refusal.
    greedy_retries: &'static str,
    samples: Vec<Duration>,
    refused: usize,
    /// The greedy caller's answers by status ("none": no answer; "200
    /// tool error": a write the bridge answered but did not store).
    greedy: std::collections::BTreeMap<String, usize>,
    greedy_seconds: f64,
}

/// The quiet callers' `get_handoff`, alone and beside the greedy caller.
struct Greedy {
    quiet: Vec<Duration>,
    refused_quiet: usize,
    phases: Vec<Phase>,
}

/// [`QUIET`] callers, each on a thread of its own, make [`QUIET_CALLS`]
/// calls of `get_handoff` one at a time; their latencies and how many
/// were refused (a refused call counts with the time it took).
fn quiet_callers(url: &str, key: &str) -> (Vec<Duration>, usize) {
    let callers: Vec<_> = (1..=QUIET)
        .map(|i| {
            let (url, key) = (url.to_owned(), key.to_owned());
            std::thread::spawn(move || {
                let get = serde_json::json!({"handoff_key": key});
                let (mut samples, mut refused) = (Vec::with_capacity(QUIET_CALLS), 0);
                let mut caller = McpHttp::connect(&url, &caller_token(i), "refine").ok();
                for _ in 0..QUIET_CALLS {
                    let t = Instant::now();
                    let answered = match caller.as_mut() {
                        Some(c) => c.call("get_handoff", get.clone()).is_ok(),
                        None => false,
                    };
                    samples.push(t.elapsed());
                    if !answered {
                        refused += 1;
                        caller = McpHttp::connect(&url, &caller_token(i), "refine").ok();
                    }
                }
                (samples, refused)
            })
        })
        .collect();
    callers.into_iter().filter_map(|c| c.join().ok()).fold(
        (Vec::new(), 0),
        |(mut all, refused), (samples, r)| {
            all.extend(samples);
            (all, refused + r)
        },
    )
}

fn beside_a_greedy_caller(
    rt: &tokio::runtime::Runtime,
    bridge: &BridgeProcess,
    key: &str,
) -> anyhow::Result<Greedy> {
    let _warm_up = quiet_callers(bridge.url(), key);
    let (quiet, refused_quiet) = quiet_callers(bridge.url(), key);
    let phases = [false, true]
        .into_iter()
        .map(|backs_off| greedy_phase(rt, bridge, key, backs_off))
        .collect::<anyhow::Result<_>>()?;
    Ok(Greedy {
        quiet,
        refused_quiet,
        phases,
    })
}

/// The quiet callers while one greedy caller keeps [`GREEDY`] writes (of
/// new content each time) going at once; a refused write is sent again at
/// once, or after its
/// `Retry-After` when `backs_off`.
fn greedy_phase(
    rt: &tokio::runtime::Runtime,
    bridge: &BridgeProcess,
    key: &str,
    backs_off: bool,
) -> anyhow::Result<Phase> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    eprintln!(
        "bench: one greedy caller, {GREEDY} writes at once (backing off: {backs_off}), beside {QUIET} quiet ones …"
    );
    let addr = addr_of(bridge.url())?;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let greedy: Vec<_> = (0..GREEDY)
        .map(|i| {
            let (addr, stop) = (addr.clone(), stop.clone());
            rt.spawn(async move {
                let mut statuses = std::collections::BTreeMap::new();
                for round in 0usize.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    // New content each time: every write reaches etcd.
                    let write = tool_call(
                        "write_handoff",
                        serde_json::json!({"handoff_key": format!("bench/greedy#{i}"), "project": "bench", "body": format!("greedy {round}")}),
                    );
                    let request = mcp_post_as(&addr, Some(TOKEN), Some("implement"), &write);
                    let answer = exchange(&addr, &request).await.ok();
                    let status = match &answer {
                        None => "none".to_owned(),
                        Some(a) if a.status == 200 && a.body.contains("\"isError\":true") => {
                            "200 tool error".to_owned()
                        }
                        Some(a) => a.status.to_string(),
                    };
                    *statuses.entry(status).or_insert(0usize) += 1;
                    let wait = answer
                        .as_ref()
                        .and_then(|a| a.header("retry-after"))
                        .and_then(|v| v.parse::<u64>().ok());
                    if let (true, Some(seconds)) = (backs_off, wait) {
                        tokio::time::sleep(Duration::from_secs(seconds)).await;
                    }
                }
                statuses
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (samples, refused) = quiet_callers(bridge.url(), key);
    stop.store(true, Ordering::Relaxed);
    let mut statuses = std::collections::BTreeMap::new();
    for task in greedy {
        for (status, n) in rt.block_on(task)? {
            *statuses.entry(status).or_insert(0) += n;
        }
    }
    Ok(Phase {
        greedy_retries: if backs_off {
            "after `Retry-After`"
        } else {
            "at once"
        },
        samples,
        refused,
        greedy: statuses,
        greedy_seconds: started.elapsed().as_secs_f64(),
    })
}

impl Greedy {
    fn print(mut self, previous: Option<&Previous>) {
        let (quiet_median, quiet_p99) = median_p99(&mut self.quiet);
        let shares = handoff_bridge::limits::Limits::default().shares();
        println!("\n## {FAIR_SECTION} ({} cores)\n", bench::cores());
        println!(
            "{QUIET} callers, each an identity of its own, called `get_handoff` one at a time ({QUIET_CALLS} calls each), \
             alone and while one greedy caller (its client on the same cores) kept {GREEDY} `write_handoff` calls (new content each time) going \
             at once, sending a refused one again at once, then after its `Retry-After`. Bridge defaults: \
             `--max-in-flight` {}, `--max-in-flight-per-caller` {}, `--max-queued-per-caller` {}. Quiet calls refused \
             alone: {}.\n",
            shares.max_in_flight, shares.per_caller, shares.queued_per_caller, self.refused_quiet
        );
        for phase in &self.phases {
            println!(
                "- greedy caller retrying {}: {:.1} s, its answers by status {:?}; quiet calls refused: {}",
                phase.greedy_retries, phase.greedy_seconds, phase.greedy, phase.refused
            );
        }
        println!(
            "\n| get_handoff (quiet callers) | samples | median µs | p99 µs |\n|---|---:|---:|---:|"
        );
        println!(
            "| alone | {} | {quiet_median:.0} | {quiet_p99:.0} |",
            self.quiet.len()
        );
        let mut ratios = Vec::new();
        for phase in &mut self.phases {
            let (median, p99) = median_p99(&mut phase.samples);
            println!(
                "| beside a greedy caller retrying {} | {} | {median:.0} | {p99:.0} |",
                phase.greedy_retries,
                phase.samples.len()
            );
            ratios.push((phase.greedy_retries, median / quiet_median, p99 / quiet_p99));
        }
        println!(
            "\n| ratio | median | p99 | previous run ({}) median / p99 | goal |\n|---|---:|---:|---:|---|",
            previous.map_or("none", Previous::date)
        );
        for (retries, median, p99) in ratios {
            let label = format!("greedy retrying {retries} / quiet");
            println!(
                "| {label} | {median:.2} | {p99:.2} | {} | p99 ≤ 3, none refused |",
                medians(previous, FAIR_SECTION, &label)
            );
        }
    }
}
/// The valid agent's `get_handoff`, quiet and during the flood.
struct Flooded {
    quiet: Vec<Duration>,
    flooded: Vec<Duration>,
    refused: usize,
    other: String,
    flood_seconds: f64,
    reviews: f64,
}

fn under_flood(
    rt: &tokio::runtime::Runtime,
    bridge: &BridgeProcess,
    http: &mut McpHttp,
    key: &str,
) -> anyhow::Result<Flooded> {
    let get = serde_json::json!({"handoff_key": key});
    let mut quiet = Vec::with_capacity(ITERATIONS);
    for _ in 0..ITERATIONS {
        let t = Instant::now();
        http.call("get_handoff", get.clone())?;
        quiet.push(t.elapsed());
    }
    eprintln!("bench: flood of {FLOOD} invalid tokens, {FLOOD_IN_FLIGHT} in flight …");
    let addr = addr_of(bridge.url())?;
    let started = Instant::now();
    let task = rt.spawn(async move {
        flood(&addr, FLOOD, FLOOD_IN_FLIGHT, |i| {
            format!("bench-junk-token-{i:06}")
        })
        .await
    });
    let mut flooded = Vec::new();
    while !task.is_finished() {
        let t = Instant::now();
        http.call("get_handoff", get.clone())?;
        flooded.push(t.elapsed());
    }
    let tally = rt.block_on(task)?;
    let flood_seconds = started.elapsed().as_secs_f64();
    let refused = tally.statuses.get(&401).copied().unwrap_or_default();
    let other = format!(
        "{:?}, {} without an answer",
        tally
            .statuses
            .iter()
            .filter(|(status, _)| **status != 401)
            .collect::<Vec<_>>(),
        tally.failures
    );
    let metrics_addr = bridge
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("the bridge printed no metrics address"))?;
    let text = rt.block_on(scrape(&metrics_addr))?;
    let reviews = metric(
        &text,
        "handoff_mcp_identity_reviews_total{result=\"rejected\"}",
    );
    Ok(Flooded {
        quiet,
        flooded,
        refused,
        other,
        flood_seconds,
        reviews,
    })
}

impl Flooded {
    fn print(mut self) {
        let (quiet_median, quiet_p99) = median_p99(&mut self.quiet);
        let (flood_median, flood_p99) = median_p99(&mut self.flooded);
        println!(
            "\n## A valid agent during an invalid-token flood ({} cores)\n",
            bench::cores()
        );
        println!(
            "{FLOOD} requests with distinct invalid tokens, {FLOOD_IN_FLIGHT} in flight, on connections of their own: \
             {} answered 401 in {:.1} s ({:.0}/s), other answers: {}; {} identity reviews (one per distinct token). \
             Meanwhile one agent with a valid token called `get_handoff` on its kept-alive connection \
             (bridge defaults: `--max-concurrent-reviews` {}).\n",
            self.refused,
            self.flood_seconds,
            self.refused as f64 / self.flood_seconds,
            self.other,
            self.reviews,
            handoff_bridge::DEFAULT_CONCURRENT_REVIEWS
        );
        println!(
            "| get_handoff (valid agent) | samples | median µs | p99 µs |\n|---|---:|---:|---:|"
        );
        println!(
            "| quiet | {} | {quiet_median:.0} | {quiet_p99:.0} |",
            self.quiet.len()
        );
        println!(
            "| during the flood | {} | {flood_median:.0} | {flood_p99:.0} |",
            self.flooded.len()
        );
        println!("\n| ratio | median | p99 | goal |\n|---|---:|---:|---|");
        println!(
            "| flood / quiet | {:.2} | {:.2} | ≤ 3 at the median |",
            flood_median / quiet_median,
            flood_p99 / quiet_p99
        );
    }
}

/// Two revisions of [`DIFF_LINES`] one-digit lines with little in common
/// (32,000 characters each, within a body's limit).
fn worst_bodies() -> (String, String) {
    let old = (0..DIFF_LINES).map(|i| format!("{}\n", i % 7)).collect();
    let new = (0..DIFF_LINES)
        .map(|i| format!("{}\n", (i * 3 + 1) % 10))
        .collect();
    (old, new)
}

/// One caller's `get_handoff`, quiet and during the diffs.
struct Diffs {
    one_diff: Duration,
    quiet: Vec<Duration>,
    loaded: Vec<Duration>,
    diffs: usize,
    failed: usize,
    unanswered: usize,
    approximate: bool,
}

fn under_diffs(
    rt: &tokio::runtime::Runtime,
    plane: &handoff_testkit::ControlPlane,
    direct: &Api<Handoff>,
    get_key: &str,
) -> anyhow::Result<Diffs> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let postgres = handoff_testkit::Postgres::start()?;
    let url = postgres.url();
    let mirror = handoff_mirror::Mirror::new(&url, true)?;
    rt.block_on(mirror.versions(Some("default")))?;
    let bridge = BridgeProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_handoff")),
        plane.kubeconfig_path(),
        "default",
        &["--postgres-url", &url],
    )?;
    let key = "bench/diff#1";
    let (old, new) = worst_bodies();
    let mut caller = McpHttp::connect(bridge.url(), TOKEN, "refine")?;
    caller.call(
        "write_handoff",
        serde_json::json!({"handoff_key": key, "project": "bench", "body": new}),
    )?;
    let uid = rt
        .block_on(direct.get(&name_for_key(key)))?
        .metadata
        .uid
        .ok_or_else(|| anyhow::anyhow!("the handoff has no uid"))?;
    // Both revisions straight into the history, as the controller would
    // record them for this object.
    for (revision, body) in [(1, &old), (2, &new)] {
        let row = handoff_mirror::Row {
            id: uid.clone(),
            name: name_for_key(key),
            namespace: "default".into(),
            handoff_key: key.into(),
            project: "bench".into(),
            repo: None,
            kind: None,
            created_by: "bench".into(),
            body: body.clone(),
            revision,
            resource_version: revision,
            created_at: k8s_openapi::jiff::Timestamp::now(),
            updated_at: k8s_openapi::jiff::Timestamp::now(),
        };
        rt.block_on(mirror.upsert(&row))?;
        rt.block_on(mirror.record_revision(&row))?;
    }
    let diff_args = serde_json::json!({"handoff_key": key, "from": 1, "to": 2});
    let t = Instant::now();
    let answer = caller.call("diff_handoff", diff_args.clone())?;
    let one_diff = t.elapsed();
    let approximate = answer["approximate"] == serde_json::json!(true);

    let get = serde_json::json!({"handoff_key": get_key});
    let mut quiet = Vec::with_capacity(ITERATIONS);
    for _ in 0..WARMUP + ITERATIONS {
        let t = Instant::now();
        caller.call("get_handoff", get.clone())?;
        quiet.push(t.elapsed());
    }
    quiet.drain(..WARMUP);
    eprintln!("bench: {DIFFERS} callers diffing {DIFF_LINES}-line revisions back to back …");
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let differs: Vec<_> = (0..DIFFERS)
        .map(|_| {
            let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
            let (url, args) = (bridge.url().to_owned(), diff_args.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let answered = McpHttp::connect(&url, &caller_token(1), "refine")
                        .and_then(|mut c| c.call("diff_handoff", args.clone()));
                    let counter = if answered.is_ok() { &done } else { &failed };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Wait until every differ has a diff in progress, then sample.
    std::thread::sleep(Duration::from_millis(200));
    // At most ITERATIONS samples, and at most a minute of them (a bridge
    // whose diffs stall its workers answers slowly).
    let mut loaded = Vec::with_capacity(ITERATIONS);
    let sampling = Instant::now();
    let mut unanswered = 0;
    while loaded.len() < ITERATIONS && sampling.elapsed() < Duration::from_secs(60) {
        let t = Instant::now();
        // A call that fails (no answer within the call timeout) counts with
        // the time it took to fail.
        if caller.call("get_handoff", get.clone()).is_err() {
            unanswered += 1;
        }
        loaded.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for differ in differs {
        let _ = differ.join();
    }
    drop(bridge);
    drop(postgres);
    Ok(Diffs {
        one_diff,
        quiet,
        loaded,
        diffs: done.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        unanswered,
        approximate,
    })
}

impl Diffs {
    fn print(mut self, previous: Option<&Previous>) {
        let (quiet_median, quiet_p99) = median_p99(&mut self.quiet);
        let (loaded_median, loaded_p99) = median_p99(&mut self.loaded);
        println!("\n## {DIFF_SECTION} ({} cores)\n", bench::cores());
        println!(
            "A bridge with the PostgreSQL mirror; revisions of {DIFF_LINES} one-digit lines with little in common. \
             One diff alone took {:.0} ms (approximate: {}). While {DIFFERS} connections of one identity diffed back to back \
             ({} diffs answered, {} failed), another identity called `get_handoff` ({} of its calls failed).\n",
            self.one_diff.as_secs_f64() * 1000.0,
            self.approximate,
            self.diffs,
            self.failed,
            self.unanswered
        );
        println!(
            "| get_handoff (another caller) | samples | median µs | p99 µs |\n|---|---:|---:|---:|"
        );
        println!(
            "| quiet | {} | {quiet_median:.0} | {quiet_p99:.0} |",
            self.quiet.len()
        );
        println!(
            "| during {DIFFERS} diffs | {} | {loaded_median:.0} | {loaded_p99:.0} |",
            self.loaded.len()
        );
        let label = "diffs / quiet";
        println!(
            "\n| ratio | median | p99 | previous run ({}) median / p99 | goal |\n|---|---:|---:|---:|---|",
            previous.map_or("none", Previous::date)
        );
        println!(
            "| {label} | {:.2} | {:.2} | {} | p99 ≤ 3 |",
            loaded_median / quiet_median,
            loaded_p99 / quiet_p99,
            medians(previous, DIFF_SECTION, label)
        );
    }
}
