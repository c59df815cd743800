//! The console's pages against the bridge's tools for the same data (not a
//! test; nothing is asserted): what a person waits for in a browser beside
//! what an agent waits for from `list_handoffs` and `get_handoff`.
//!
//! One control plane holds `HANDOFF_BENCH_CONSOLE_HANDOFFS` handoffs
//! (100,000 by default) of 2 KiB in namespace `default`: 1,000 of them (half
//! the total when that is fewer) in the project the pages show, the rest in
//! 99 others. `handoff console --behind-proxy` and `handoff mcp` run as
//! separate processes, neither with the mirror: both read the apiserver, as
//! an installation without PostgreSQL does (the console reads a project's
//! page from the apiserver in any case). Both are asked as the benchmark's
//! agent, with its bearer token (the console as a proxy forwards it), on
//! keep-alive connections. Interleaved, after warm-up rounds:
//! - the project page (HTTP GET, the whole HTML page of the first 50
//!   handoffs) against `list_handoffs` of that project's first page;
//! - a handoff's page (its body rendered) against `get_handoff` of it.
//!
//! Each round checks the page shows what the tool returned (every key of
//! the page, the handoff's key). The table goes to stdout (for
//! BENCHMARKS.md), the ratios beside the previous run's.
//! `HANDOFF_BENCH_BINARY` runs another `handoff` than the one cargo built
//! for the bench (e.g. the release binary of `make e2e-image-binary` under
//! a debug build of this harness, `BENCH_DEBUG=1`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use handoff_core::api::naming::name_for_key;
use handoff_testkit::bench::{self, TOKEN, median_p99};
use handoff_testkit::previous::{Previous, beside};
use handoff_testkit::rpc::McpHttp;
use handoff_testkit::{BridgeProcess, ConsoleProcess};
use kube::api::Api;

const NAMESPACE: &str = "default";
/// The project whose pages are measured.
const PROJECT: &str = "console";
/// Its share of the handoffs (at most).
const IN_PROJECT: usize = 1_000;
/// Projects holding the rest.
const OTHERS: usize = 99;
const BODY_BYTES: usize = 2048;
const ROUNDS: usize = 100;
const WARMUP: usize = 10;
/// The section of BENCHMARKS.md this bench writes (and reads back).
const SECTION: &str = "Console";
/// The column of the ratios, read back for the next run.
const RATIO: &str = "console / bridge, median / p99";

/// How many handoffs: `HANDOFF_BENCH_CONSOLE_HANDOFFS` or 100,000.
fn handoffs() -> anyhow::Result<usize> {
    let Ok(text) = std::env::var("HANDOFF_BENCH_CONSOLE_HANDOFFS") else {
        return Ok(100_000);
    };
    let n: usize = text.trim().parse().map_err(|e| {
        anyhow::anyhow!("HANDOFF_BENCH_CONSOLE_HANDOFFS={text}: {e} (want a count, e.g. 2000)")
    })?;
    anyhow::ensure!(
        n >= 200,
        "HANDOFF_BENCH_CONSOLE_HANDOFFS={text}: want at least 200 (a page of 50 and other projects)"
    );
    Ok(n)
}

/// Pure: the key and project of handoff `i` of `total`.
fn handoff_of(i: usize, total: usize) -> (String, String) {
    let in_project = IN_PROJECT.min(total / 2);
    if i < in_project {
        (format!("bench/{PROJECT}#{i}"), PROJECT.to_owned())
    } else {
        let p = i % OTHERS;
        (format!("bench/{p}#{i}"), format!("project-{p:03}"))
    }
}

/// One keep-alive connection to the console, as a proxy forwarding the
/// agent's bearer token.
struct Pages {
    stream: BufReader<TcpStream>,
    host: String,
}

impl Pages {
    fn connect(url: &str) -> anyhow::Result<Self> {
        let host = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow::anyhow!("http URL expected: {url}"))?
            .trim_end_matches('/')
            .to_owned();
        let stream = TcpStream::connect(&host)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream: BufReader::new(stream),
            host,
        })
    }

    /// The body of `GET path`, which must answer 200.
    fn get(&mut self, path: &str) -> anyhow::Result<String> {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/html\r\n\r\n",
            self.host
        );
        self.stream.get_mut().write_all(request.as_bytes())?;
        let mut status = String::new();
        self.stream.read_line(&mut status)?;
        let (mut length, mut chunked) = (None, false);
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            let line = line.to_ascii_lowercase();
            if let Some(v) = line.strip_prefix("content-length:") {
                length = Some(v.trim().parse::<usize>()?);
            } else if line.starts_with("transfer-encoding:") && line.contains("chunked") {
                chunked = true;
            }
        }
        let body = match (length, chunked) {
            (Some(n), false) => self.exactly(n)?,
            (_, true) => self.chunks()?,
            (None, false) => anyhow::bail!("GET {path}: an answer without a length"),
        };
        let body = String::from_utf8(body)?;
        anyhow::ensure!(
            status.contains(" 200 "),
            "GET {path}: the console answered {}: {}",
            status.trim(),
            body.chars().take(400).collect::<String>()
        );
        Ok(body)
    }

    fn exactly(&mut self, n: usize) -> anyhow::Result<Vec<u8>> {
        let mut body = vec![0; n];
        self.stream.read_exact(&mut body)?;
        Ok(body)
    }

    /// A chunked body, read to its last chunk.
    fn chunks(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            self.stream.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)?;
            let mut chunk = self.exactly(size + 2)?;
            chunk.truncate(size);
            body.extend(chunk);
            if size == 0 {
                return Ok(body);
            }
        }
    }
}

/// The keys of a `list_handoffs` or `get_handoff` result.
fn keys(result: &serde_json::Value) -> Vec<String> {
    let one = |h: &serde_json::Value| h["handoff_key"].as_str().map(str::to_owned);
    match result["handoffs"].as_array() {
        Some(list) => list.iter().filter_map(one).collect(),
        None => one(&result["handoff"]).into_iter().collect(),
    }
}

/// Interleaved rounds of `console` (a page) and `bridge` (a tool); each
/// round's page must show every key the tool returned. (console, bridge)
/// median and p99 in µs.
fn rounds(
    mut console: impl FnMut() -> anyhow::Result<String>,
    mut bridge: impl FnMut() -> anyhow::Result<serde_json::Value>,
    want: usize,
) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let (mut pages, mut tools) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for round in 0..WARMUP + ROUNDS {
        let t = Instant::now();
        let page = console()?;
        let took_page = t.elapsed();
        let t = Instant::now();
        let result = bridge()?;
        let took_tool = t.elapsed();
        let keys = keys(&result);
        anyhow::ensure!(
            keys.len() == want,
            "the tool returned {} keys, want {want}: {result}",
            keys.len()
        );
        if let Some(missing) = keys.iter().find(|k| !page.contains(k.as_str())) {
            anyhow::bail!("the page does not show {missing}");
        }
        if round >= WARMUP {
            pages.push(took_page);
            tools.push(took_tool);
        }
    }
    Ok((median_p99(&mut pages), median_p99(&mut tools)))
}

/// One row of the report.
struct Row {
    what: &'static str,
    console: (f64, f64),
    bridge: (f64, f64),
}

impl Row {
    fn ratio(&self) -> String {
        format!(
            "{:.2} / {:.2}",
            self.console.0 / self.bridge.0.max(1.0),
            self.console.1 / self.bridge.1.max(1.0)
        )
    }
}

fn print_report(total: usize, binary: &str, rows: &[Row], previous: Option<&Previous>) {
    println!(
        "\n## Console vs the bridge: a project page and a handoff page ({} cores, Kubernetes {})\n",
        bench::cores(),
        handoff_testkit::Versions::pinned().kubernetes
    );
    println!(
        "{total} handoffs of {BODY_BYTES} bytes in namespace `{NAMESPACE}`, {} of them in the \
         project shown; the console behind a proxy (the agent's bearer token) and the bridge, \
         both reading the apiserver (no mirror), on keep-alive connections. A page is the \
         whole HTML answer of an HTTP GET; {ROUNDS} samples each after {WARMUP} warm-up rounds, \
         interleaved. Goal: each ratio of the medians ≤ 2. The processes: {binary}.",
        IN_PROJECT.min(total / 2)
    );
    let olds: Vec<Option<String>> = rows
        .iter()
        .map(|row| previous.and_then(|p| p.cell(SECTION, row.what, RATIO)))
        .collect();
    if let Some(previous) = previous.filter(|_| olds.iter().any(Option::is_some)) {
        println!(
            "Beside the ratios, `(was …)`: the previous run's ({}).",
            previous.date()
        );
    }
    println!();
    println!("| page vs tool | console median / p99 (ms) | bridge median / p99 (ms) | {RATIO} |");
    println!("|---|---:|---:|---:|");
    for (row, old) in rows.iter().zip(olds) {
        println!(
            "| {} | {:.1} / {:.1} | {:.1} / {:.1} | {} |",
            row.what,
            row.console.0 / 1e3,
            row.console.1 / 1e3,
            row.bridge.0 / 1e3,
            row.bridge.1 / 1e3,
            beside(&row.ratio(), old.as_deref())
        );
    }
}

fn main() -> anyhow::Result<()> {
    let total = handoffs()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let _runtime = rt.enter();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let previous = Previous::load(&root.join("BENCHMARKS.md"));
    let plane = rt.block_on(bench::plane())?;
    let admin = rt.block_on(plane.client())?;
    eprintln!("bench: writing {total} handoffs …");
    rt.block_on(bench::fill(
        &Api::namespaced(admin, NAMESPACE),
        0..total,
        BODY_BYTES,
        |i| handoff_of(i, total),
        "fill",
    ))?;

    let binary = std::env::var_os("HANDOFF_BENCH_BINARY").map_or_else(
        || env!("CARGO_BIN_EXE_handoff").into(),
        std::path::PathBuf::from,
    );
    let binary = binary.as_path();
    eprintln!("bench: {}", binary.display());
    let kubeconfig = plane.kubeconfig_path();
    let quiet = [("RUST_LOG", "warn")];
    let bridge = BridgeProcess::start_with_env(binary, kubeconfig, NAMESPACE, &[], &quiet)?;
    let console = ConsoleProcess::behind_proxy(binary, kubeconfig, &["--namespace", NAMESPACE])?;
    let mut tools = McpHttp::connect(bridge.url(), TOKEN, "refine")?;
    let mut pages = Pages::connect(console.url())?;

    eprintln!("bench: {ROUNDS} project page rounds (+{WARMUP} warm-up) …");
    let project_path = handoff_console::routes::project(NAMESPACE, PROJECT, None, None, None);
    let (console_list, bridge_list) = rounds(
        || pages.get(&project_path),
        || tools.call("list_handoffs", serde_json::json!({"project": PROJECT})),
        50,
    )?;

    eprintln!("bench: {ROUNDS} handoff page rounds (+{WARMUP} warm-up) …");
    let (key, _) = handoff_of(7, total);
    let handoff_path = handoff_console::routes::handoff(NAMESPACE, &name_for_key(&key));
    let (console_get, bridge_get) = rounds(
        || pages.get(&handoff_path),
        || tools.call("get_handoff", serde_json::json!({"handoff_key": key})),
        1,
    )?;

    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let built = match std::env::var_os("HANDOFF_BENCH_BINARY") {
        Some(_) => format!(
            "the `handoff` of `HANDOFF_BENCH_BINARY`, under a {profile} build of the harness"
        ),
        None => format!("a {profile} build"),
    };
    print_report(
        total,
        &built,
        &[
            Row {
                what: "project page (50 of the project) vs list_handoffs",
                console: console_list,
                bridge: bridge_list,
            },
            Row {
                what: "handoff page vs get_handoff",
                console: console_get,
                bridge: bridge_get,
            },
        ],
        previous.as_ref(),
    );
    drop(console);
    drop(bridge);
    Ok(())
}
