//! A real node beside the local control plane: the e2e tier's cluster.
//!
//! The envtest-style plane ([`ControlPlane`]) proves everything that talks
//! to a kube-apiserver; nothing there ever runs as a Pod. [`Cluster`] adds
//! one node on this host, started and stopped as one supervised group:
//!
//! - containerd (its own root, state and socket: it never meets a system
//!   containerd) with runc, and a CNI bridge network (`handoff0`,
//!   10.244.0.0/24);
//! - the kubelet, kube-controller-manager (garbage collection, namespace
//!   deletion, Jobs, Deployments, ServiceAccounts), kube-scheduler and
//!   kube-proxy (Services), built by `make e2e-assets`;
//! - CoreDNS as a host process on the bridge's gateway (the Pods' DNS).
//!
//! The apiserver binds the gateway address, so Pods reach it (directly and
//! through the `kubernetes` Service) and get ServiceAccount tokens. Images
//! come from OCI archives imported into containerd ([`crate::image`]): no
//! registry; Pods use `imagePullPolicy: Never`.
//!
//! What this VM needed, learned by a probe (issue 30): containerd's
//! `restrict_oom_score_adj`, the kubelet's `failCgroupV1: false`,
//! `cgroupDriver: cgroupfs` and `failSwapOn: false` ([`config`]); the real
//! host name (the apiserver dials it for logs and exec); `ip_forward`.
//!
//! Nothing is left behind: on drop the Pods go first (their sandboxes'
//! network teardown removes the CNI rules and leases), then the node's
//! processes and containerd's shims, kube-proxy's chains
//! (`kube-proxy --cleanup`), every mount under the node's directory, the
//! bridge, and `ip_forward` is restored ([`host`]). One node per host at a
//! time: a lock serialises test binaries.

pub mod config;
mod host;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::Api;

use handoff_local::process::{Supervised, free_port};
use handoff_local::{Assets, ControlPlane, PlaneOptions, Versions, install_crds};

use config::{KubeletSettings, Layout, PodNetwork};
use host::{Bridge, FixedDirs, KubeletChains, Runtime, Sysctl};

pub use host::HostLock;

pub use crate::image::PAUSE_IMAGE;

/// How long the node gets to become Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The e2e node's binaries (`make e2e-assets`).
#[derive(Debug, Clone)]
pub struct NodeAssets {
    /// The directory holding them.
    pub dir: PathBuf,
}

/// What `hack/e2e/build.sh` builds: the node's processes, and the
/// programs of its images (the sandbox's pause, the scripted agent).
const NODE_BINARIES: [&str; 7] = [
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "coredns",
    "pause",
    "agent",
];

impl NodeAssets {
    /// The version-keyed cache directory of `hack/e2e/build.sh`; fails
    /// naming what is missing and how to build it.
    pub fn locate() -> anyhow::Result<Self> {
        let versions = Versions::pinned();
        let dir = handoff_local::assets::cache_root()
            .join("e2e")
            .join(format!(
                "k8s-{}-coredns-{}",
                versions.kubernetes, versions.coredns
            ));
        let missing: Vec<&str> = NODE_BINARIES
            .into_iter()
            .filter(|b| !dir.join(b).is_file())
            .collect();
        anyhow::ensure!(
            missing.is_empty(),
            "the e2e node's binaries are missing from {} ({missing:?}): run `make e2e-assets`",
            dir.display()
        );
        Ok(Self { dir })
    }

    /// Path of one binary.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The control plane with one real node. Dropping it tears everything
/// down (see the module docs).
pub struct Cluster {
    node: Option<NodeProcesses>,
    plane: Option<ControlPlane>,
    runtime: Runtime,
    network: PodNetwork,
    socket: PathBuf,
    node_name: String,
    /// Undone after the processes ([`Cluster::stop`]).
    host: Option<HostChanges>,
    dir: tempfile::TempDir,
    lock: Option<HostLock>,
}

/// What the node changed on the host, undone in field order when dropped.
struct HostChanges {
    _chains: KubeletChains,
    _fixed_dirs: FixedDirs,
    _bridge: Bridge,
    _forwarding: Sysctl,
}

/// The node's processes, stopped in field order after the Pods are gone.
struct NodeProcesses {
    controller_manager: Supervised,
    scheduler: Supervised,
    kubelet: Supervised,
    kube_proxy: Supervised,
    coredns: Supervised,
    containerd: Supervised,
    kube_proxy_config: PathBuf,
    kube_proxy_bin: PathBuf,
}

impl Cluster {
    /// Starts the plane and the node, imports `images` (OCI archives; the
    /// pause image [`PAUSE_IMAGE`] must be one of them), installs the CRDs,
    /// and waits until the node is Ready and the `default` ServiceAccount
    /// exists. Fails with what to do when not root or a part is missing.
    pub async fn start(images: &[PathBuf]) -> anyhow::Result<Self> {
        host::require_root()?;
        Self::start_holding(HostLock::acquire()?, images).await
    }

    /// [`Cluster::start`] with the host's lock already held (a caller that
    /// looks at the host before the node changes it).
    pub async fn start_holding(lock: HostLock, images: &[PathBuf]) -> anyhow::Result<Self> {
        host::require_root()?;
        let runtime = Runtime::locate()?;
        let assets = Assets::locate()?;
        let node_assets = NodeAssets::locate()?;
        let network = PodNetwork::E2E;
        // Short: containerd's socket path must fit a sockaddr_un.
        let dir = tempfile::Builder::new()
            .prefix("handoff-node-")
            .tempdir_in("/tmp")?;
        let chains = KubeletChains::snapshot();
        let fixed_dirs = FixedDirs::snapshot(&["/var/lib/kubelet", "/var/log/containers"]);
        let forwarding = Sysctl::set("net.ipv4.ip_forward", "1")?;
        let bridge = Bridge::create(&network)?;
        let plane = ControlPlane::start_with(
            assets,
            PlaneOptions {
                node_address: Some(network.gateway),
                ..PlaneOptions::default()
            },
        )
        .await?;
        let socket = dir.path().join("containerd.sock");
        let node_name = host_name()?;
        let mut cluster = Self {
            node: None,
            plane: Some(plane),
            runtime,
            network,
            socket,
            node_name,
            host: Some(HostChanges {
                _chains: chains,
                _fixed_dirs: fixed_dirs,
                _bridge: bridge,
                _forwarding: forwarding,
            }),
            dir,
            lock: Some(lock),
        };
        cluster.node = Some(cluster.start_node(&node_assets, images)?);
        cluster.wait_ready().await?;
        install_crds(&cluster.client().await?).await?;
        Ok(cluster)
    }

    fn plane(&self) -> &ControlPlane {
        match &self.plane {
            Some(plane) => plane,
            None => unreachable!("the plane lives as long as the cluster"),
        }
    }

    fn start_node(&self, assets: &NodeAssets, images: &[PathBuf]) -> anyhow::Result<NodeProcesses> {
        let root = self.dir.path();
        let sub = |name: &str| -> anyhow::Result<PathBuf> {
            let path = root.join(name);
            std::fs::create_dir_all(&path)?;
            Ok(path)
        };
        let (cni_conf, cni_ipam) = (sub("cni/net.d")?, sub("cni/ipam")?);
        let (containerd_root, containerd_state) =
            (sub("containerd/root")?, sub("containerd/state")?);
        let layout = Layout {
            containerd_root: &containerd_root,
            containerd_state: &containerd_state,
            containerd_socket: &self.socket,
            cni_bin: &self.runtime.cni_bin,
            cni_conf: &cni_conf,
            cni_ipam: &cni_ipam,
            runc: &self.runtime.runc,
            pause_image: PAUSE_IMAGE,
        };
        std::fs::write(
            cni_conf.join("10-handoff-e2e.conflist"),
            config::cni_conflist(&self.network, &cni_ipam),
        )?;
        let containerd_config = root.join("containerd.toml");
        std::fs::write(&containerd_config, config::containerd_toml(&layout))?;
        let mut containerd = Command::new(&self.runtime.containerd);
        containerd.arg("--config").arg(&containerd_config);
        let mut containerd =
            Supervised::spawn("containerd", containerd, &root.join("containerd.log"))?;
        self.wait_for_socket(&mut containerd)?;
        for image in images {
            self.import(image)?;
        }

        let plane = self.plane();
        let kubeconfig = plane.kubeconfig_path();
        let certs = plane.dir().join("certs");
        let arg = |flag: &str, path: &Path| format!("--{flag}={}", path.display());

        let mut kcm = Command::new(assets.bin("kube-controller-manager"));
        kcm.arg(arg("kubeconfig", kubeconfig))
            .arg(arg("authentication-kubeconfig", kubeconfig))
            .arg(arg("authorization-kubeconfig", kubeconfig))
            .arg(arg(
                "service-account-private-key-file",
                &certs.join("sa.key"),
            ))
            .arg(arg("root-ca-file", &certs.join("ca.crt")))
            .arg("--controllers=*,-nodeipam")
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port()?))
            .arg("--v=1");
        let controller_manager = Supervised::spawn(
            "kube-controller-manager",
            kcm,
            &root.join("kube-controller-manager.log"),
        )?;

        let mut scheduler = Command::new(assets.bin("kube-scheduler"));
        scheduler
            .arg(arg("kubeconfig", kubeconfig))
            .arg(arg("authentication-kubeconfig", kubeconfig))
            .arg(arg("authorization-kubeconfig", kubeconfig))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port()?))
            .arg("--v=1");
        let scheduler = Supervised::spawn(
            "kube-scheduler",
            scheduler,
            &root.join("kube-scheduler.log"),
        )?;

        let kube_proxy_config = root.join("kube-proxy.json");
        std::fs::write(
            &kube_proxy_config,
            config::kube_proxy_config(kubeconfig, &self.network, free_port()?, free_port()?),
        )?;
        let mut proxy = Command::new(assets.bin("kube-proxy"));
        proxy.arg(arg("config", &kube_proxy_config)).arg("--v=1");
        let kube_proxy = Supervised::spawn("kube-proxy", proxy, &root.join("kube-proxy.log"))?;

        let corefile = root.join("Corefile");
        std::fs::write(
            &corefile,
            config::corefile(self.network.gateway, kubeconfig, "handoff-dev"),
        )?;
        let mut dns = Command::new(assets.bin("coredns"));
        dns.arg("-conf").arg(&corefile);
        let coredns = Supervised::spawn("coredns", dns, &root.join("coredns.log"))?;

        let kubelet_config = root.join("kubelet.json");
        std::fs::write(
            &kubelet_config,
            config::kubelet_config(&KubeletSettings {
                containerd_socket: &self.socket,
                client_ca: &certs.join("ca.crt"),
                dns: self.network.gateway,
                port: free_port()?,
                healthz_port: free_port()?,
                pod_logs: &sub("pod-logs")?,
            }),
        )?;
        let mut kubelet = Command::new(assets.bin("kubelet"));
        kubelet
            .arg(arg("config", &kubelet_config))
            .arg(arg("kubeconfig", kubeconfig))
            .arg(arg("root-dir", &sub("kubelet")?))
            .arg(arg("cert-dir", &sub("kubelet-pki")?))
            .arg("--v=1");
        let kubelet = Supervised::spawn("kubelet", kubelet, &root.join("kubelet.log"))?;

        Ok(NodeProcesses {
            controller_manager,
            scheduler,
            kubelet,
            kube_proxy,
            coredns,
            containerd,
            kube_proxy_config,
            kube_proxy_bin: assets.bin("kube-proxy"),
        })
    }

    fn wait_for_socket(&self, containerd: &mut Supervised) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.ctr(&["version"]).is_err() {
            containerd.ensure_running()?;
            anyhow::ensure!(
                Instant::now() < deadline,
                "containerd did not answer within 30s:\n{}",
                containerd.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// `ctr -a <our socket> -n k8s.io …` (the CRI's namespace): its
    /// stdout, or why it failed (e.g. a scenario killing a container's task).
    pub fn ctr(&self, args: &[&str]) -> anyhow::Result<String> {
        let socket = self.socket.display().to_string();
        let mut all = vec!["-a", socket.as_str(), "-n", "k8s.io"];
        all.extend_from_slice(args);
        host::run(&self.runtime.ctr, &all)
    }

    /// Imports an OCI archive into the node's containerd (Pods then run it
    /// with `imagePullPolicy: Never`).
    pub fn import(&self, archive: &Path) -> anyhow::Result<()> {
        let path = archive.display().to_string();
        self.ctr(&["images", "import", &path])
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("import {path} into the node: {e:#}"))
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let client = self.client().await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.ensure_running()?;
            let ready = nodes
                .get_opt(&self.node_name)
                .await
                .ok()
                .flatten()
                .is_some_and(|n| {
                    n.status.and_then(|s| s.conditions).is_some_and(|cs| {
                        cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    })
                });
            let accounts_made = accounts.get_opt("default").await.ok().flatten().is_some();
            if ready && accounts_made {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the node was not Ready within {READY_TIMEOUT:?} (ready: {ready}, default \
                 ServiceAccount: {accounts_made}); last lines of the kubelet's log:\n{}",
                self.node
                    .as_ref()
                    .map(|n| n.kubelet.log_tail(25))
                    .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Fails with the log's tail of whichever node process has exited.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Some(node) = &mut self.node {
            for process in [
                &mut node.containerd,
                &mut node.kubelet,
                &mut node.controller_manager,
                &mut node.scheduler,
                &mut node.kube_proxy,
                &mut node.coredns,
            ] {
                process.ensure_running()?;
            }
        }
        Ok(())
    }

    /// A new admin client.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.plane().client().await
    }

    /// The admin kubeconfig file (its server is the pod network's gateway).
    pub fn kubeconfig_path(&self) -> &Path {
        self.plane().kubeconfig_path()
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &kube::config::Kubeconfig {
        self.plane().kubeconfig()
    }

    /// The control plane's binaries (kubectl).
    pub fn assets(&self) -> &Assets {
        self.plane().assets()
    }

    /// The pod network.
    pub fn network(&self) -> PodNetwork {
        self.network
    }

    /// The node's name (this host's).
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Where the node's files and logs are (kubelet.log, containerd.log, …).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Process ids of the plane and the node's processes (for leak checks).
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = self.plane().pids();
        if let Some(n) = &self.node {
            pids.extend([
                n.containerd.pid(),
                n.kubelet.pid(),
                n.controller_manager.pid(),
                n.scheduler.pid(),
                n.kube_proxy.pid(),
                n.coredns.pid(),
            ]);
        }
        pids
    }

    fn kubectl(&self) -> Command {
        let mut cmd = Command::new(self.assets().bin("kubectl"));
        cmd.arg("--kubeconfig").arg(self.kubeconfig_path());
        cmd
    }

    /// Deletes every Pod with the controllers stopped (so none comes back)
    /// and waits until the kubelet has torn their sandboxes down: that is
    /// what removes their CNI rules, leases and mounts. Returns what had
    /// not gone within the drain's minute (Pods, then sandboxes, which it
    /// then kills by force); empty when the drain was clean.
    fn drain(&mut self, node: &mut NodeProcesses) -> Vec<String> {
        node.controller_manager.stop(Duration::from_secs(5));
        node.scheduler.stop(Duration::from_secs(5));
        self.release_pod_finalizers();
        let _ = self
            .kubectl()
            .args([
                "delete",
                "pods",
                "--all",
                "--all-namespaces",
                "--grace-period=1",
                "--wait=false",
            ])
            .output();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut left = self.left_behind();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(250));
            left = self.left_behind();
        }
        if !left.is_empty() {
            eprintln!("cluster: still there after 60s (sandboxes are killed by force): {left:?}");
            for task in left.iter().filter_map(|l| l.strip_prefix("sandbox/")) {
                let _ = self.ctr(&["tasks", "kill", "-s", "SIGKILL", task]);
            }
        }
        left
    }

    /// The Pods (`pod/<name>`) and sandboxes (`sandbox/<id>`) still there;
    /// a listing that fails counts as something left.
    fn left_behind(&self) -> Vec<String> {
        let pods = self
            .kubectl()
            .args(["get", "pods", "--all-namespaces", "-o", "name"])
            .output();
        let mut left: Vec<String> = match pods {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            _ => vec!["pods (the listing failed)".to_owned()],
        };
        match self.ctr(&["tasks", "ls", "-q"]) {
            Ok(tasks) => left.extend(
                tasks
                    .lines()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(|t| format!("sandbox/{t}")),
            ),
            Err(_) => left.push("sandboxes (the listing failed)".to_owned()),
        }
        left
    }

    /// Drops the finalizers of every Pod. The Pods of an unfinished Job
    /// carry the Job controller's tracking finalizer, which, with the
    /// controller-manager stopped, nobody else removes: such a Pod would
    /// stay Terminating and hold the drain to its deadline.
    fn release_pod_finalizers(&self) {
        let listed = self
            .kubectl()
            .args(["get", "pods", "--all-namespaces", "-o", FINALIZED_PODS])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for (namespace, name) in finalized_pods(&listed) {
            let _ = self
                .kubectl()
                .args([
                    "patch",
                    "pod",
                    name,
                    "--namespace",
                    namespace,
                    "--type=json",
                ])
                .arg(r#"--patch=[{"op":"remove","path":"/metadata/finalizers"}]"#)
                .output();
        }
    }
}

impl Cluster {
    /// Tears everything down (as dropping does) and hands back the host's
    /// lock, so the caller sees the host as the node left it before another
    /// node may start (`tests/e2e_existing.rs` compares it with before).
    pub fn stop(mut self) -> Stopped {
        let left = self.teardown();
        match self.lock.take() {
            Some(lock) => Stopped { lock, left },
            None => unreachable!("only stop takes the lock"),
        }
    }

    fn teardown(&mut self) -> Vec<String> {
        let mut left = Vec::new();
        if let Some(mut node) = self.node.take() {
            left = self.drain(&mut node);
            let grace = Duration::from_secs(10);
            node.kubelet.stop(grace);
            node.kube_proxy.stop(grace);
            let _ = Command::new(&node.kube_proxy_bin)
                .arg(format!("--config={}", node.kube_proxy_config.display()))
                .arg("--cleanup")
                .output();
            node.coredns.stop(grace);
            node.containerd.stop(grace);
            host::kill_shims(&self.socket);
        }
        self.plane.take();
        host::unmount_under(self.dir.path());
        self.host.take();
        left
    }
}

/// What [`Cluster::stop`] hands back.
pub struct Stopped {
    /// The host's lock, still held.
    pub lock: HostLock,
    /// The Pods and sandboxes that had not gone within the drain's minute
    /// (the sandboxes then killed by force); empty when the drain was clean.
    pub left: Vec<String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The kubectl output format that lists Pods with finalizers, a
/// `namespace/name` line each.
const FINALIZED_PODS: &str = "jsonpath={range .items[?(@.metadata.finalizers)]}\
    {.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}";

/// Pure: the `(namespace, name)` pairs of a [`FINALIZED_PODS`] listing.
fn finalized_pods(listed: &str) -> Vec<(&str, &str)> {
    listed
        .lines()
        .filter_map(|line| line.trim().split_once('/'))
        .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty())
        .collect()
}

/// This host's name, as the kubelet registers its Node (kept: the
/// apiserver dials it for logs and exec).
fn host_name() -> anyhow::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")?
        .trim()
        .to_lowercase();
    anyhow::ensure!(!name.is_empty(), "this host has no name");
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalized_pods_are_read_a_line_each() {
        for (listed, want) in [
            ("", vec![]),
            ("ns-a/job-x-1\n", vec![("ns-a", "job-x-1")]),
            ("a/p\nb/q\n\n", vec![("a", "p"), ("b", "q")]),
            ("no-slash\n/p\na/\n", vec![]),
        ] {
            assert_eq!(finalized_pods(listed), want, "{listed:?}");
        }
    }
}
