//! The e2e node's images in a real containerd (issue 30): the three archives
//! of `handoff_testkit::image` are imported by a throwaway containerd (its
//! own root, state and socket in a temporary directory) and each runs under
//! runc. The project's image prints `handoff --version`, and runs as user
//! 65532 with host names resolved by the static binary (glibc's built-in
//! `files` backend, an /etc/hosts bind-mounted as the kubelet does).
//!
//! Needs root, containerd, ctr and runc (`make e2e-assets`), the static
//! binary (`make e2e-image-binary`); fails with what to run when one is
//! missing. The node's programs (pause, agent) come from
//! hack/e2e/build.sh, which reuses its cache.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use handoff_testkit::image::{self, ImageSpec};

/// The repository's root (the test kit is one of its members).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn require_root() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the containerd image check runs containers: run it as root"
    );
}

fn require_tools() {
    for tool in ["containerd", "ctr", "runc"] {
        let found = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
            .unwrap_or(false);
        assert!(
            found,
            "{tool} is missing: run `make e2e-assets` as root (it installs containerd, runc and the CNI plugins)"
        );
    }
}

/// The e2e cache directory of hack/e2e/build.sh (pause, agent).
fn e2e_programs() -> PathBuf {
    let out = Command::new(root().join("hack/e2e/build.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("hack/e2e/build.sh");
    assert!(
        out.status.success(),
        "hack/e2e/build.sh failed (see above): `make e2e-assets` builds the node's programs"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the cache directory on the last line")
            .trim(),
    )
}

/// A containerd of its own, stopped (its containers first) when dropped.
struct Containerd {
    child: Child,
    dir: tempfile::TempDir,
    socket: PathBuf,
    containers: Vec<String>,
}

impl Containerd {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let socket = d.join("containerd.sock");
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "{pause}"
"#,
            root = d.join("root").display(),
            state = d.join("state").display(),
            socket = socket.display(),
            pause = image::PAUSE_IMAGE,
        );
        std::fs::write(d.join("config.toml"), config).expect("config");
        let log = std::fs::File::create(d.join("containerd.log")).expect("log");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("containerd");
        let mut containerd = Self {
            child,
            dir,
            socket,
            containers: Vec::new(),
        };
        containerd.wait_ready();
        containerd
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// Polls `ctr version` until the socket answers (or containerd died).
    fn wait_ready(&mut self) {
        for _ in 0..300 {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("containerd exited ({status}):\n{}", self.log());
            }
            if self.ctr(&["version"]).status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "containerd did not answer on {}:\n{}",
            self.socket.display(),
            self.log()
        );
    }

    fn ctr(&self, args: &[&str]) -> Output {
        Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()
            .expect("ctr")
    }

    /// `ctr ARGS`, which must succeed; its stdout.
    fn ctr_ok(&self, args: &[&str]) -> String {
        let out = self.ctr(args);
        assert!(
            out.status.success(),
            "ctr {args:?}: {}\nstdout: {}\nstderr: {}\ncontainerd:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes `spec` as an archive and imports it; the manifest's digest.
    fn import(&self, spec: &ImageSpec) -> image::Digest {
        let archive = self
            .dir
            .path()
            .join(format!("{}.tar", spec.reference.replace(['/', ':'], "_")));
        let digest = spec.write_archive(&archive).expect("archive");
        self.ctr_ok(&["images", "import", &archive.to_string_lossy()]);
        digest
    }

    /// `ctr run --rm IMAGE ID ARGS...`: the container's stdout and stderr.
    fn run(&mut self, reference: &str, id: &str, args: &[&str]) -> String {
        self.containers.push(id.into());
        let mut all = vec!["run", "--rm", reference, id];
        all.extend_from_slice(args);
        let out = self.ctr(&all);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        for id in &self.containers {
            let _ = self.ctr(&["task", "delete", "--force", id]);
            let _ = self.ctr(&["containers", "delete", id]);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn containerd_imports_and_runs_the_node_images() {
    require_root();
    require_tools();
    let handoff = image::static_handoff_binary(&root()).unwrap_or_else(|e| panic!("{e:#}"));
    let programs = e2e_programs();
    let mut containerd = Containerd::start();

    let specs = [
        image::handoff_image(&handoff),
        image::pause_image(&programs.join("pause")),
        image::agent_image(&programs.join("agent"), &handoff),
    ];
    let listed_before = containerd.ctr_ok(&["images", "ls"]);
    for spec in &specs {
        assert!(
            !listed_before.contains(&spec.reference),
            "a fresh containerd has no {}",
            spec.reference
        );
        let digest = containerd.import(spec);
        let listed = containerd.ctr_ok(&["images", "ls"]);
        let line = listed
            .lines()
            .find(|l| l.starts_with(&format!("{} ", spec.reference)));
        let line = line.unwrap_or_else(|| panic!("{} not imported:\n{listed}", spec.reference));
        assert!(
            line.contains(digest.as_str()),
            "{} has digest {digest}: {line}",
            spec.reference
        );
    }

    let version = containerd.run(image::HANDOFF_IMAGE, "t-version", &[]);
    assert!(
        version.contains("Usage: handoff <COMMAND>"),
        "the entrypoint is /handoff: {version}"
    );
    let version = containerd.run(
        image::HANDOFF_IMAGE,
        "t-version2",
        &["/handoff", "--version"],
    );
    assert_eq!(
        version.trim(),
        format!("handoff {}", env!("CARGO_PKG_VERSION"))
    );
    let pause = containerd.run(image::PAUSE_IMAGE, "t-pause", &["/pause", "-v"]);
    assert!(pause.contains("pause (handoff e2e)"), "{pause}");
    pause_holds_until_sigterm(&mut containerd);
    let agent = containerd.run(image::AGENT_IMAGE, "t-agent", &[]);
    assert!(
        agent.contains("agent: no script"),
        "the entrypoint is /agent: {agent}"
    );
    let beside = containerd.run(
        image::AGENT_IMAGE,
        "t-agent-handoff",
        &["/handoff", "--version"],
    );
    assert!(
        beside.starts_with("handoff "),
        "/handoff is in the agent's image: {beside}"
    );

    user_and_name_resolution(&mut containerd, image::HANDOFF_IMAGE, "t-uid");
    // glibc's own `files` backend, not the image's /etc/nsswitch.conf.
    let mut bare = image::handoff_image(&handoff);
    bare.reference = "localhost/handoff:no-nsswitch".into();
    bare.files.retain(|f| f.path != "/etc/nsswitch.conf");
    containerd.import(&bare);
    user_and_name_resolution(&mut containerd, &bare.reference, "t-uid-bare");
}

/// The sandbox runs until the kubelet's SIGTERM (as PID 1, which ignores
/// signals it has no handler for), then exits 0.
fn pause_holds_until_sigterm(containerd: &mut Containerd) {
    let id = "t-pause-held";
    containerd.containers.push(id.into());
    containerd.ctr_ok(&["run", "--detach", image::PAUSE_IMAGE, id]);
    let status = |containerd: &Containerd| {
        let tasks = containerd.ctr_ok(&["task", "ls"]);
        let line = tasks
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .map(str::to_owned);
        line.unwrap_or_else(|| panic!("no task {id}: {tasks}"))
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        status(containerd).contains("RUNNING"),
        "pause holds: {}",
        status(containerd)
    );
    containerd.ctr_ok(&["task", "kill", "--signal", "SIGTERM", id]);
    for _ in 0..100 {
        if status(containerd).contains("STOPPED") {
            // ctr warns of a non-zero exit code only; zero is silent.
            let out = containerd.ctr(&["task", "delete", id]);
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && !said.contains("exit code"),
                "pause exits 0 on SIGTERM: {said}"
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("pause did not stop on SIGTERM: {}", status(containerd));
}

/// The name of the test's listener inside the container.
const HOST: &str = "handoff-e2e-postgres";

/// The image `reference` runs as 65532:65532, and its static binary resolves
/// a host name: `handoff mirror purge` dials PostgreSQL at
/// `handoff-e2e-postgres:<port>`, a name only the /etc/hosts this test
/// bind-mounts knows (as the kubelet mounts one into a Pod), on the host
/// network where this test listens. While it is connected, the
/// container's process is read in /proc.
fn user_and_name_resolution(containerd: &mut Containerd, reference: &str, id: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let (accepted, connection) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = accepted.send(listener.accept());
    });
    let hosts = containerd.dir.path().join(format!("{id}.hosts"));
    std::fs::write(&hosts, format!("127.0.0.1 localhost\n127.0.0.1 {HOST}\n")).expect("hosts");
    let url = format!("HANDOFF_POSTGRES_URL=postgres://u@{HOST}:{port}/db");
    let hosts_mount = format!(
        "type=bind,src={},dst=/etc/hosts,options=rbind:ro",
        hosts.display()
    );
    containerd.containers.push(id.into());
    containerd.ctr_ok(&[
        "run",
        "--detach",
        "--log-uri",
        &format!(
            "file://{}",
            containerd.dir.path().join(format!("{id}.log")).display()
        ),
        // The host's network, without the host's /etc/hosts that --net-host adds.
        "--with-ns",
        &format!("network:/proc/{}/ns/net", std::process::id()),
        "--env",
        &url,
        "--mount",
        &hosts_mount,
        reference,
        id,
        "/handoff",
        "mirror",
        "purge",
        "--key",
        "k",
        "--dry-run",
    ]);
    let log = containerd.dir.path().join(format!("{id}.log"));
    let stream = loop {
        if let Ok(accepted) = connection.recv_timeout(Duration::from_millis(100)) {
            break accepted.expect("accept");
        }
        let tasks = containerd.ctr_ok(&["task", "ls"]);
        let stopped = tasks
            .lines()
            .any(|l| l.starts_with(&format!("{id} ")) && l.contains("STOPPED"));
        assert!(
            !stopped,
            "{reference} exited before dialing {HOST}:{port} (name resolution?):\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    let tasks = containerd.ctr_ok(&["task", "ls"]);
    let pid = tasks
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{id} ")))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{id} is not running: {tasks}"));
    let mut status = String::new();
    std::fs::File::open(format!("/proc/{pid}/status"))
        .and_then(|mut f| f.read_to_string(&mut status))
        .expect("the container's /proc status");
    let ids = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
    };
    assert_eq!(ids("Uid:"), Some(vec!["65532"; 4]), "{status}");
    assert_eq!(ids("Gid:"), Some(vec!["65532"; 4]), "{status}");
    drop(stream);
}
