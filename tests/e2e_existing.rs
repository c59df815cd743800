//! The whole `it` suite with `USE_EXISTING_CLUSTER=true` against the e2e
//! node's cluster (`make test-e2e`): the suites that run against kind run
//! here against a cluster with a real controller-manager, scheduler and
//! kubelet, not only an apiserver.
//!
//! This binary starts the cluster (no installation: the `it` suites
//! install what they need), finds the `it` test binary cargo built, and
//! runs it as a child with the cluster's kubeconfig, skipping only
//! [`CANNOT_RUN_THERE`], each with its reason.
//!
//! It also checks the cluster's promise to the host: stopped, it leaves
//! the host as it found it (chains, links, mounts, `ip_forward`, the
//! kubelet's fixed directories, processes).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use handoff_testkit::cluster::{Cluster, HostLock, NodeAssets};
use handoff_testkit::image::pause_image;

/// Why a test of the `it` suite cannot run against a real cluster.
const NEEDS_INSTALL: &str = "applies config/default as built: the published image and \
     cert-manager, which this cluster has neither of (the e2e tier's install scenario installs \
     it here with the local image and a certificate of its own)";
const PLAYS_THE_JOB_CONTROLLER: &str = "plays the Job controller (patches a Job's status by \
     hand), which a cluster with a real one refuses (the e2e tier's schedule scenario runs real \
     Jobs instead)";

/// The `it` tests that cannot run against an existing cluster (names or
/// module prefixes, as `--skip` takes them), and why. docs/testing.md, "The e2e
/// tier on a real node", lists the same.
const CANNOT_RUN_THERE: [(&str, &str); 11] = [
    ("install::", NEEDS_INSTALL),
    ("policy::", NEEDS_INSTALL),
    (
        "secrets::the_issue_cases_through_kubectl_create_dry_run",
        NEEDS_INSTALL,
    ),
    (
        "secrets::the_secret_corpus_through_the_webhook",
        NEEDS_INSTALL,
    ),
    (
        "tenancy::a_refused_write_makes_the_bridge_read_no_settings",
        NEEDS_INSTALL,
    ),
    (
        "tenancy::another_teams_account_labelled_as_the_destination_may_not_reject_its_offers",
        NEEDS_INSTALL,
    ),
    (
        "tenancy::two_teams_share_one_bridge_and_never_see_each_other",
        NEEDS_INSTALL,
    ),
    (
        "offers::agent_activation_supersedes_pending_offers_and_accepts_the_named_one",
        PLAYS_THE_JOB_CONTROLLER,
    ),
    (
        "schedule::a_due_tick_runs_refine_then_brainstorm_then_idles",
        PLAYS_THE_JOB_CONTROLLER,
    ),
    (
        "schedule::a_tick_during_a_cycle_is_recorded_once_and_the_next_cycle_starts",
        PLAYS_THE_JOB_CONTROLLER,
    ),
    (
        "schedule::the_running_loop_reacts_to_job_status_through_its_watch",
        PLAYS_THE_JOB_CONTROLLER,
    ),
];

/// The `it` test binary of this build: cargo names its path when asked to
/// build it without running (a no-op when `make test` has built it).
fn it_binary() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "test",
            "--locked",
            "--test",
            "it",
            "--no-run",
            "--message-format=json",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cargo does not run: {e}"));
    assert!(
        out.status.success(),
        "building the it suite failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "it")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo named no executable for the it suite"))
}

/// A cluster with only the sandbox image (the `it` suites start their own
/// processes; nothing of the project runs as a Pod here).
async fn start_cluster(lock: HostLock) -> Cluster {
    let node = NodeAssets::locate().unwrap_or_else(|e| panic!("{e:#}"));
    let images = tempfile::tempdir().unwrap_or_else(|e| panic!("a temp dir: {e}"));
    let pause = images.path().join("pause.tar");
    pause_image(&node.bin("pause"))
        .write_archive(&pause)
        .unwrap_or_else(|e| panic!("the pause image: {e:#}"));
    Cluster::start_holding(lock, &[pause])
        .await
        .unwrap_or_else(|e| panic!("the e2e cluster could not start: {e:#}"))
}

#[tokio::test]
async fn the_it_suite_runs_against_the_e2e_cluster() {
    let lock = HostLock::acquire().unwrap_or_else(|e| panic!("{e:#}"));
    let cluster = start_cluster(lock).await;
    let mut it = Command::new(it_binary());
    it.env("USE_EXISTING_CLUSTER", "true")
        .env("KUBECONFIG", cluster.kubeconfig_path())
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (suite, _why) in CANNOT_RUN_THERE {
        it.args(["--skip", suite]);
    }
    let status = it
        .status()
        .unwrap_or_else(|e| panic!("the it suite does not run: {e}"));
    assert!(
        status.success(),
        "the it suite against the e2e cluster failed ({status}); its output is above"
    );
}

/// What a node may change on the host, as comparable sets.
struct HostState {
    /// `iptables-save` / `ip6tables-save` lines without counters.
    rules: BTreeSet<String>,
    /// Network interfaces.
    links: BTreeSet<String>,
    /// Mount points.
    mounts: BTreeSet<String>,
    ip_forward: String,
    fixed_dirs: Vec<bool>,
}

impl HostState {
    /// Pure: what differs from `before`, one line per item (`+` added, `-`
    /// gone), for a readable failure.
    fn changes_since(&self, before: &HostState) -> Vec<String> {
        let mut out = Vec::new();
        for (what, now, then) in [
            ("rule", &self.rules, &before.rules),
            ("link", &self.links, &before.links),
            ("mount", &self.mounts, &before.mounts),
        ] {
            out.extend(now.difference(then).map(|x| format!("+ {what} {x}")));
            out.extend(then.difference(now).map(|x| format!("- {what} {x}")));
        }
        if self.ip_forward != before.ip_forward {
            out.push(format!(
                "ip_forward {} -> {}",
                before.ip_forward.trim(),
                self.ip_forward.trim()
            ));
        }
        if self.fixed_dirs != before.fixed_dirs {
            out.push(format!(
                "fixed dirs {:?} -> {:?}",
                before.fixed_dirs, self.fixed_dirs
            ));
        }
        out
    }
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Pure: the lines of an `iptables-save` that describe rules and chains
/// (comments and counters dropped, which change on their own).
fn rule_lines(save: &str) -> impl Iterator<Item = String> + '_ {
    save.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| match l.split_once(" [") {
            Some((chain, _counters)) if l.starts_with(':') => chain.to_owned(),
            _ => l.to_owned(),
        })
}

fn host_state() -> HostState {
    let v4 = command_output("iptables-save", &[]);
    let v6 = command_output("ip6tables-save", &[]);
    let rules = rule_lines(&v4)
        .map(|l| format!("4 {l}"))
        .chain(rule_lines(&v6).map(|l| format!("6 {l}")))
        .collect();
    let links = command_output("ip", &["-o", "link", "show"])
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n).to_owned())
        })
        .collect();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .collect();
    HostState {
        rules,
        links,
        mounts,
        ip_forward: std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap_or_default(),
        fixed_dirs: ["/var/lib/kubelet", "/var/log/containers"]
            .iter()
            .map(|d| Path::new(d).exists())
            .collect(),
    }
}

#[tokio::test]
async fn a_stopped_cluster_leaves_the_host_as_it_found_it() {
    // Held across: no other node may change the host in between.
    let lock = HostLock::acquire().unwrap_or_else(|e| panic!("{e:#}"));
    let before = host_state();
    let cluster = start_cluster(lock).await;
    // A Pod on the pod network: a sandbox, a veth, CNI rules and a lease.
    let kubectl = |args: &[&str]| {
        Command::new(cluster.assets().bin("kubectl"))
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_path())
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("kubectl: {e}"))
    };
    let run = kubectl(&[
        "run",
        "sleeper",
        "--image=localhost/pause:e2e",
        "--image-pull-policy=Never",
        "--restart=Never",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // A Job's Pod that never finishes: it keeps the Job controller's
    // tracking finalizer, which the drain must release itself.
    let job = kubectl(&["create", "job", "unfinished", "--image=localhost/pause:e2e"]);
    assert!(
        job.status.success(),
        "{}",
        String::from_utf8_lossy(&job.stderr)
    );
    for pods in [
        &["pod/sleeper"][..],
        &["pod", "--selector=job-name=unfinished"],
    ] {
        let ready = kubectl(&[&["wait", "--for=condition=Ready", "--timeout=120s"], pods].concat());
        assert!(
            ready.status.success(),
            "{pods:?}: {}",
            String::from_utf8_lossy(&ready.stderr)
        );
    }
    let during = host_state();
    assert_ne!(
        during.links, before.links,
        "the Pod's bridge and veth exist while it runs"
    );
    let pids = cluster.pids();
    let stopped = cluster.stop();
    let changes = host_state().changes_since(&before);
    drop(stopped.lock);
    assert_eq!(
        stopped.left,
        Vec::<String>::new(),
        "what the drain left: the Pods and sandboxes not gone within its minute"
    );
    assert_eq!(
        changes,
        Vec::<String>::new(),
        "the host after the cluster stopped"
    );
    let alive: Vec<u32> = pids
        .into_iter()
        .filter(|p| !handoff_testkit::is_gone(*p))
        .collect();
    assert_eq!(
        alive,
        Vec::<u32>::new(),
        "the cluster's processes outlived it"
    );
}

#[test]
fn rules_are_compared_without_counters_or_comments() {
    let save = "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [3:180]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n# Completed\n";
    let lines: Vec<String> = rule_lines(save).collect();
    assert_eq!(
        lines,
        [
            "*nat",
            ":PREROUTING ACCEPT",
            ":KUBE-SERVICES -",
            "-A PREROUTING -j KUBE-SERVICES",
            "COMMIT"
        ]
    );
}
