//! `make bench`: the MCP bridge (streamable HTTP, a separate `handoff mcp`
//! process) against the same operations done directly with the kube client,
//! measured side by side in one run against the local control plane.
//!
//! Both paths authenticate with the same static bearer token, and the
//! operations are interleaved (direct, bridge, direct, …) so that noise on a
//! shared machine hits both alike. Reported: median and p99 per operation
//! and the ratios; nothing is asserted.

use std::time::{Duration, Instant};

use handoff::api::naming::name_for_key;
use handoff::api::{Handoff, HandoffSpec};
use handoff_testkit::BridgeProcess;
use handoff_testkit::bench::{self, TOKEN, median_p99};
use handoff_testkit::rpc::McpHttp;
use kube::api::{Api, Patch, PatchParams};
use kube::config::AuthInfo;

const ITERATIONS: usize = 300;
const WARMUP: usize = 30;

struct Row {
    name: &'static str,
    samples: Vec<Duration>,
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let _runtime = rt.enter();
    let plane = rt.block_on(bench::plane())?;
    let mut config = rt.block_on(kube::Config::from_custom_kubeconfig(
        plane.kubeconfig().clone(),
        &Default::default(),
    ))?;
    config.auth_info = AuthInfo {
        token: Some(TOKEN.to_owned().into()),
        ..Default::default()
    };
    let direct: Api<Handoff> = Api::namespaced(kube::Client::try_from(config)?, "default");

    let bridge = BridgeProcess::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_handoff")),
        plane.kubeconfig_path(),
        "default",
        &[],
    )?;
    let url = bridge.url().to_owned();
    let mut http = McpHttp::connect(&url, TOKEN, "refine")?;

    let key = "bench/get#1";
    let name = name_for_key(key);
    let spec = |body: String| HandoffSpec {
        handoff_key: key.into(),
        project: "bench".into(),
        repo: None,
        kind: None,
        body,
        created_by: Some("bench".into()),
    };
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
        "write: direct GET + apply (write_handoff's semantics)",
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
    drop(bridge);

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
    println!("\n| ratio | median | p99 | goal |\n|---|---:|---:|---|");
    for (label, (a, b), goal) in [
        ("get: bridge / direct", (1, 0), "≤ 1.5"),
        ("write: bridge / direct", (3, 2), "≤ 1.5"),
        ("unchanged write / direct GET", (4, 0), "≤ 1.1"),
        (
            "write: bridge / direct GET + apply",
            (3, 5),
            "(bridge overhead)",
        ),
    ] {
        let (m, p) = ratio(a, b);
        println!("| {label} | {m:.2} | {p:.2} | {goal} |");
    }
    drop(plane);
    Ok(())
}
