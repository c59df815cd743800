//! The local control plane leaves nothing behind: not after a normal exit of
//! a test binary that shared it, not when a plane is dropped by a panic, and
//! not when `handoff dev` is interrupted or killed outright.

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::is_gone;
use handoff_testkit::{self as testing, Assets, ControlPlane};

const CHILD_ENV: &str = "HANDOFF_HARNESS_CHILD";

/// Waits (bounded) until every pid is gone; returns the survivors.
fn survivors_after(pids: &[u32], within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| !is_gone(*p)).collect();
        if alive.is_empty() || Instant::now() > deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Direct children of `parent`, from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// Run by `shared_plane_is_gone_after_the_test_binary_exits` in a child
/// process: starts the shared plane and reports what it started.
#[test]
#[ignore = "runs only as the child process of shared_plane_is_gone_after_the_test_binary_exits"]
fn shared_plane_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let env = testing::shared();
    let dir = env
        .kubeconfig_path()
        .parent()
        .expect("plane dir")
        .display()
        .to_string();
    let pids: Vec<String> = env.pids().iter().map(u32::to_string).collect();
    println!("PLANE {dir} {}", pids.join(" "));
}

#[test]
fn shared_plane_is_gone_after_the_test_binary_exits() {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([
            "--exact",
            "harness::shared_plane_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("child test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| Some(l.split_once("PLANE ")?.1))
        .unwrap_or_else(|| panic!("no PLANE line: {stdout}"));
    let mut parts = line.split_whitespace();
    let dir = parts.next().expect("dir").to_owned();
    let pids: Vec<u32> = parts.map(|p| p.parse().expect("pid")).collect();
    assert_eq!(pids.len(), 2, "etcd and kube-apiserver expected: {line}");
    assert_eq!(
        survivors_after(&pids, Duration::from_secs(10)),
        Vec::<u32>::new(),
        "orphaned control plane"
    );
    assert!(
        !Path::new(&dir).exists(),
        "plane directory {dir} left behind"
    );
}

#[test]
fn a_plane_dropped_by_a_panic_stops_its_processes() {
    let started = std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let plane = rt
            .block_on(ControlPlane::start(Assets::locate().expect("assets")))
            .unwrap_or_else(|e| panic!("control plane: {e:#}"));
        let report = (plane.pids(), plane.dir().to_owned());
        // Hand the facts out through the panic payload, then unwind with the plane alive.
        std::panic::panic_any(report);
    })
    .join();
    let payload = started.expect_err("the thread panics on purpose");
    let (pids, dir) = *payload
        .downcast::<(Vec<u32>, std::path::PathBuf)>()
        .unwrap_or_else(|_| panic!("the control plane did not start"));
    assert_eq!(
        survivors_after(&pids, Duration::from_secs(10)),
        Vec::<u32>::new()
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
}

/// Starts `handoff dev` in a temp dir and waits for its ready line; returns
/// the child, its children's pids and the `name: value` lines it printed.
fn start_dev(dir: &Path) -> (std::process::Child, Vec<u32>, HashMap<String, String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(["dev", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("handoff dev starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with(handoff::dev::READY_LINE));
    assert!(ready, "handoff dev exited before it was ready");
    let printed: HashMap<String, String> = lines
        .by_ref()
        .map_while(Result::ok)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.trim().split_once(": ")?;
            Some((name.trim().to_owned(), value.trim().to_owned()))
        })
        .collect();
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let pids = children_of(child.id());
    (child, pids, printed)
}

#[test]
fn handoff_dev_serves_kubectl_and_stops_cleanly_on_interrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, pids, printed) = start_dev(dir.path());
    let expected = if handoff_testkit::postgres::available() {
        3
    } else {
        2
    };
    assert_eq!(
        pids.len(),
        expected,
        "etcd, kube-apiserver and, when installed, postgres: {pids:?}"
    );

    let kubeconfig = dir.path().join("kubeconfig");
    let kubectl = Assets::locate().expect("assets").bin("kubectl");
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "handoffs", "-A"])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl get handoffs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("No resources found"));

    // The printed MCP client config reaches the dev bridge with the real MCP client.
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("mcp-implement.json")).expect("mcp config"),
    )
    .expect("json");
    let server = &config["mcpServers"]["handoff"];
    assert_eq!(
        server["url"].as_str(),
        printed.get("mcp").map(String::as_str)
    );
    let token = server["headers"]["Authorization"]
        .as_str()
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("token");
    let results = common::drive(
        &[
            "http",
            server["url"].as_str().expect("url"),
            token,
            "implement",
        ],
        serde_json::json!([{"op": "list_tools"},
            {"op": "call", "tool": "write_handoff", "args": {"handoff_key": "dev#1", "project": "dev", "body": "hello"}}]),
        &[],
    );
    let listed = results[0]["tools"].as_array().expect("tools");
    assert!(
        listed.iter().any(|t| t == "write_handoff")
            && !listed.iter().any(|t| t == "delete_handoff"),
        "{results:?}"
    );
    assert_eq!(
        results[1]["structured"]["outcome"], "created",
        "{results:?}"
    );
    assert_eq!(
        results[1]["structured"]["handoff"]["created_by"],
        "dev:implement"
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = child.wait().expect("wait");
    assert!(status.success(), "handoff dev exited with {status}");
    assert_eq!(
        survivors_after(&pids, Duration::from_secs(10)),
        Vec::<u32>::new()
    );
    assert!(
        !kubeconfig.exists(),
        "kubeconfig of a stopped plane left behind"
    );
}

#[test]
fn handoff_dev_killed_outright_takes_its_processes_along() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, pids, printed) = start_dev(dir.path());
    assert!(pids.len() >= 2, "{pids:?}");
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_eq!(
        survivors_after(&pids, Duration::from_secs(10)),
        Vec::<u32>::new(),
        "orphans after SIGKILL"
    );
    // A killed process cannot remove its directories: that is the price of
    // SIGKILL. The control plane's lives in `dir`; PostgreSQL's (as root, in
    // the system temp dir) is removed here.
    if let Some(pg_dir) = printed.get("pg data") {
        std::fs::remove_dir_all(pg_dir).expect("remove the PostgreSQL dir");
    }
}
