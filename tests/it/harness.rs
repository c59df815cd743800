//! The local control plane leaves nothing behind: not after a normal exit of
//! a test binary that shared it, not when a plane is dropped by a panic, and
//! not when `handoff dev` is interrupted or killed outright (whose data
//! directory, on purpose, keeps its state for the next run).

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
        // The test kit's own plane, even when this run uses an existing
        // cluster (the e2e tier runs the suite so).
        .env_remove("USE_EXISTING_CLUSTER")
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

/// Starts `handoff dev` on `dir` (and `extra` flags) and waits for its ready
/// line; returns the child, its children's pids and the `name: value` lines
/// it printed.
fn start_dev(dir: &Path, extra: &[&str]) -> (Dev, Vec<u32>, HashMap<String, String>) {
    let mut child = dev_command(dir, extra)
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
    (Dev(child), pids, printed)
}

/// A running `handoff dev`, killed if a failed assertion leaves it running
/// (its processes die with it).
struct Dev(std::process::Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn dev_command(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handoff"));
    cmd.args(["dev", "--data-dir"]).arg(dir).args(extra);
    cmd
}

/// A data directory the `postgres` user can reach when the tests run as
/// root (the server then runs as that user; tempdirs are private).
fn data_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// Interrupts `handoff dev` like Ctrl-C and checks that it exits cleanly
/// and takes its processes along.
fn interrupt(mut dev: Dev, pids: &[u32]) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(dev.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = dev.0.wait().expect("wait");
    assert!(status.success(), "handoff dev exited with {status}");
    assert_eq!(
        survivors_after(pids, Duration::from_secs(10)),
        Vec::<u32>::new()
    );
}

/// The MCP URL and token of the printed `implement` client config.
fn implement_client(dir: &Path) -> (String, String) {
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("mcp-implement.json")).expect("mcp config"))
            .expect("json");
    let server = &config["mcpServers"]["handoff"];
    let url = server["url"].as_str().expect("url").to_owned();
    let token = server["headers"]["Authorization"]
        .as_str()
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("token")
        .to_owned();
    (url, token)
}

/// Runs an MCP plan as the `implement` dev agent.
fn as_implement(url: &str, token: &str, plan: serde_json::Value) -> Vec<serde_json::Value> {
    common::drive(&["http", url, token, "implement"], plan, &[])
}

/// The body `get_handoff` returns for `key`, or the error text.
fn get_body(url: &str, token: &str, key: &str) -> String {
    let results = as_implement(
        url,
        token,
        serde_json::json!([{"op": "call", "tool": "get_handoff", "args": {"handoff_key": key}}]),
    );
    results[0]["structured"]["handoff"]["body"]
        .as_str()
        .map_or_else(|| results[0].to_string(), str::to_owned)
}

/// `source <dir>/env && handoff history KEY` in a shell without any
/// handoff variable of its own, once the mirror holds the key: the SRE's
/// read through the dev bridge with the dev kubeconfig's token.
fn history_after_sourcing_env(dir: &Path, key: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("sh")
            .args(["-c", ". \"$1/env\" && exec \"$2\" history \"$3\"", "sh"])
            .arg(dir)
            .arg(env!("CARGO_BIN_EXE_handoff"))
            .arg(key)
            .env_remove("KUBECONFIG")
            .env_remove("HANDOFF_BRIDGE_URL")
            .env_remove("HANDOFF_POSTGRES_URL")
            .env_remove("HANDOFF_CA_FILE")
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        // Only "not mirrored yet" is worth waiting for.
        assert!(
            stderr.contains("holds no revisions") && Instant::now() < deadline,
            "source env && handoff history {key}: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn handoff_dev_serves_kubectl_and_stops_cleanly_on_interrupt() {
    let dir = data_dir();
    let (child, pids, printed) = start_dev(dir.path(), &[]);
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
    let (url, token) = implement_client(dir.path());
    assert_eq!(Some(url.as_str()), printed.get("mcp").map(String::as_str));
    let results = as_implement(
        &url,
        &token,
        serde_json::json!([{"op": "list_tools"},
            {"op": "call", "tool": "write_handoff", "args": {"handoff_key": "dev#1", "project": "dev", "body": "hello"}}]),
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
    if handoff_testkit::postgres::available() {
        let history = history_after_sourcing_env(dir.path(), "dev#1");
        let rows: Vec<Vec<&str>> = history.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(rows.len(), 2, "{history}");
        assert_eq!(rows[0], ["REVISION", "UPDATED", "WRITER", "BYTES"]);
        assert_eq!(
            (rows[1][0], rows[1][2], rows[1][3]),
            ("1", "dev:implement", "5")
        );
    }
    interrupt(child, &pids);
    assert!(kubeconfig.exists(), "the kubeconfig stays for the next run");
}

#[test]
fn handoff_dev_keeps_its_handoffs_configs_and_ports_across_restarts() {
    let dir = data_dir();
    let (child, pids, first) = start_dev(dir.path(), &[]);
    let (url, token) = implement_client(dir.path());
    let written = as_implement(
        &url,
        &token,
        serde_json::json!([{"op": "call", "tool": "write_handoff", "args": {"handoff_key": "keep#1", "project": "dev", "body": "still here"}}]),
    );
    assert_eq!(
        written[0]["structured"]["outcome"], "created",
        "{written:?}"
    );
    let config = std::fs::read(dir.path().join("mcp-implement.json")).expect("config");
    let kubeconfig = std::fs::read(dir.path().join("kubeconfig")).expect("kubeconfig");

    // A second instance on the same directory is refused, naming the holder.
    let second = dev_command(dir.path(), &[]).output().expect("second run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success(),
        "a second handoff dev must not start"
    );
    assert!(
        stderr.contains(&format!("another handoff dev (pid {})", child.0.id())),
        "{stderr}"
    );
    interrupt(child, &pids);

    // Restarted: the same configs and kubeconfig work, and the handoff is there.
    let (child, pids, again) = start_dev(dir.path(), &[]);
    assert_eq!(
        again.get("mcp"),
        first.get("mcp"),
        "the bridge keeps its port"
    );
    assert_eq!(
        std::fs::read(dir.path().join("mcp-implement.json")).expect("config"),
        config,
        "the MCP client config is unchanged"
    );
    assert_eq!(
        std::fs::read(dir.path().join("kubeconfig")).expect("kubeconfig"),
        kubeconfig,
        "the kubeconfig is unchanged"
    );
    assert_eq!(get_body(&url, &token, "keep#1"), "still here");
    interrupt(child, &pids);

    // --fresh starts over: the handoff is gone.
    let (child, pids, _) = start_dev(dir.path(), &["--fresh"]);
    let (url, token) = implement_client(dir.path());
    let after = get_body(&url, &token, "keep#1");
    assert!(after.contains("\"found\":false"), "{after}");
    interrupt(child, &pids);
}

#[test]
fn handoff_dev_killed_outright_takes_its_processes_along_and_starts_again() {
    let dir = data_dir();
    let (child, pids, _) = start_dev(dir.path(), &[]);
    assert!(pids.len() >= 2, "{pids:?}");
    let (url, token) = implement_client(dir.path());
    as_implement(
        &url,
        &token,
        serde_json::json!([{"op": "call", "tool": "write_handoff", "args": {"handoff_key": "kill#1", "project": "dev", "body": "survives"}}]),
    );
    drop(child);
    assert_eq!(
        survivors_after(&pids, Duration::from_secs(10)),
        Vec::<u32>::new(),
        "orphans after SIGKILL"
    );
    // The lock died with the process, and the data survived it.
    let (child, pids, _) = start_dev(dir.path(), &[]);
    assert_eq!(get_body(&url, &token, "kill#1"), "survives");
    interrupt(child, &pids);
}

/// The suites that used to race a controller already running in the
/// cluster, as `USE_EXISTING_CLUSTER=true make test` runs them against
/// `handoff dev`: this test binary runs them again as a child against a
/// `handoff dev` it started. The running controller manages only unclaimed
/// namespaces and the test kit claims its own, so each test's outcome is its
/// own controller's.
#[test]
fn suites_share_a_cluster_where_handoff_dev_runs() {
    const RACED: [&str; 3] = [
        "schedule::a_due_tick_runs_refine_then_brainstorm_then_idles",
        "controller::create_update_delete_are_reflected_in_status_events_labels_and_postgres",
        "controller::one_leader_writes_and_the_other_takes_over_within_the_lease_duration",
    ];
    let dir = data_dir();
    let (dev, pids, _) = start_dev(dir.path(), &[]);
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args(RACED)
        .args(["--exact", "--test-threads=1"])
        .env("USE_EXISTING_CLUSTER", "true")
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env_remove(CHILD_ENV)
        .output()
        .expect("the suites run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    interrupt(dev, &pids);
    let outcomes = outcomes(&stdout);
    let mut want: Vec<(&str, &str)> = RACED.iter().map(|name| (*name, "ok")).collect();
    want.sort_unstable();
    assert!(
        outcomes == want && out.status.success(),
        "against handoff dev: {outcomes:?} ({})\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `(name, outcome)` of each `test NAME ... OUTCOME` line of libtest's
/// output, sorted by name: what each test did, not a count.
fn outcomes(stdout: &str) -> Vec<(&str, &str)> {
    let mut outcomes: Vec<(&str, &str)> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test ")?.split_once(" ... "))
        .map(|(name, outcome)| (name, outcome.split([' ', ',']).next().unwrap_or_default()))
        .collect();
    outcomes.sort_unstable();
    outcomes
}

#[test]
fn each_test_line_gives_its_name_and_outcome() {
    let run = "\nrunning 3 tests\ntest b::two ... FAILED\ntest a::one ... ok\n\
               test c::three ... ignored, slow\n\nfailures:\n\n\
               test result: FAILED. 1 passed; 1 failed; 1 ignored\n";
    assert_eq!(
        outcomes(run),
        [
            ("a::one", "ok"),
            ("b::two", "FAILED"),
            ("c::three", "ignored")
        ]
    );
    assert_eq!(outcomes("test result: ok. 3 passed"), []);
}

/// `handoff dev` registers the admission webhook: a twin created with
/// kubectl (a name of its own, another Handoff's key) is refused with the
/// name the key must have, while the bridge's write of that key (it
/// derives the name) and a kubectl write under the derived name pass.
#[test]
fn handoff_dev_refuses_twins_and_squats_on_every_kubectl_path() {
    let dir = data_dir();
    let (child, pids, printed) = start_dev(dir.path(), &[]);
    assert!(
        printed
            .get("webhook")
            .is_some_and(|url| url.starts_with("https://127.0.0.1:")),
        "{printed:?}"
    );
    let (url, token) = implement_client(dir.path());
    let results = as_implement(
        &url,
        &token,
        serde_json::json!([{"op": "call", "tool": "write_handoff",
            "args": {"handoff_key": "dev#twin", "project": "dev", "body": "genuine"}}]),
    );
    assert_eq!(
        results[0]["structured"]["outcome"], "created",
        "{results:?}"
    );
    let kubectl = Assets::locate().expect("assets").bin("kubectl");
    // `kubectl <args> -f -` with a Handoff named `name` holding `key`.
    let run = |args: &[&str], name: &str, key: &str| {
        let yaml = format!(
            "apiVersion: handoff.dev/v1alpha1\nkind: Handoff\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  handoffKey: {key:?}\n  project: dev\n  body: \"not the genuine one\"\n"
        );
        let mut child = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .args(args)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), yaml.as_bytes())
            .expect("stdin");
        child.wait_with_output().expect("kubectl output")
    };
    let derived = handoff_core::api::naming::name_for_key("dev#twin");
    // A twin (a name of its own, the genuine key) through every way kubectl
    // creates; a squat (the genuine name, another key) the same way.
    let paths: [&[&str]; 4] = [
        &["create"],
        &["apply", "--server-side", "--field-manager=someone-else"],
        &["apply"],
        &["replace", "--force"],
    ];
    for path in paths {
        let twin = run(path, "my-twin", "dev#twin");
        let stderr = String::from_utf8_lossy(&twin.stderr);
        assert!(!twin.status.success(), "{path:?}: the twin was created");
        for part in [
            "\"my-twin\"",
            "\"dev#twin\"",
            &derived,
            "handoff name 'dev#twin'",
        ] {
            assert!(stderr.contains(part), "{path:?}: {part} not in {stderr}");
        }
        let squatted = handoff_core::api::naming::name_for_key("dev#other");
        let squat = run(path, &squatted, "dev#squatter");
        let stderr = String::from_utf8_lossy(&squat.stderr);
        assert!(!squat.status.success(), "{path:?}: the squat was created");
        assert!(
            stderr.contains("is not the name of spec.handoffKey \"dev#squatter\""),
            "{path:?}: {stderr}"
        );
    }
    // The derived name is taken by the genuine object: kubectl meets the
    // apiserver's own uniqueness, not the webhook.
    let again = run(&["create"], &derived, "dev#twin");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    interrupt(child, &pids);
}
