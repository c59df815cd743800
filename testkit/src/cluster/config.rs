//! The node's configuration files, as pure functions of where things are:
//! containerd's, the CNI network's, the kubelet's, kube-proxy's and
//! CoreDNS's. Each carries the settings this machine needs (see
//! [`super`]), and a unit test pins them.

use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::json;

/// The pod network: one bridge on this host, its gateway where the
/// apiserver, cluster DNS and the Pods' PostgreSQL listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodNetwork {
    /// The bridge's name.
    pub bridge: &'static str,
    /// The bridge's address, the Pods' gateway.
    pub gateway: Ipv4Addr,
    /// The prefix length of the pod subnet.
    pub prefix: u8,
}

impl PodNetwork {
    /// The one pod network of the e2e node.
    pub const E2E: PodNetwork = PodNetwork {
        bridge: "handoff0",
        gateway: Ipv4Addr::new(10, 244, 0, 1),
        prefix: 24,
    };

    /// The subnet, e.g. `10.244.0.0/24`.
    pub fn cidr(&self) -> String {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0);
        let network = Ipv4Addr::from(u32::from(self.gateway) & mask);
        format!("{network}/{}", self.prefix)
    }
}

/// Where each process of the node keeps its files.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    /// containerd's root (images, snapshots).
    pub containerd_root: &'a Path,
    /// containerd's state (sockets, mounts of running tasks).
    pub containerd_state: &'a Path,
    /// containerd's gRPC socket.
    pub containerd_socket: &'a Path,
    /// The CNI plugins.
    pub cni_bin: &'a Path,
    /// The CNI network configuration directory.
    pub cni_conf: &'a Path,
    /// host-local IPAM's leases.
    pub cni_ipam: &'a Path,
    /// runc.
    pub runc: &'a Path,
    /// The sandbox image's reference.
    pub pause_image: &'a str,
}

/// containerd 1.6's `config.toml` (version 2): its own root, state and
/// socket, so it never meets a system containerd, and the CRI plugin with
/// `restrict_oom_score_adj` (this VM's bounding set lacks CAP_SYS_RESOURCE:
/// without it every sandbox fails with "can't get final child's PID from
/// pipe: EOF").
pub fn containerd_toml(layout: &Layout<'_>) -> String {
    let Layout {
        containerd_root,
        containerd_state,
        containerd_socket,
        cni_bin,
        cni_conf,
        runc,
        pause_image,
        ..
    } = layout;
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"#,
        root = containerd_root.display(),
        state = containerd_state.display(),
        socket = containerd_socket.display(),
        runc = runc.display(),
        cni_bin = cni_bin.display(),
        cni_conf = cni_conf.display(),
    )
}

/// The CNI network: the bridge plugin on [`PodNetwork`] (gateway on the
/// bridge, masquerade out, hairpin so a Pod reaches itself through its
/// Service), host-local IPAM keeping its leases in our directory, and
/// portmap.
pub fn cni_conflist(network: &PodNetwork, ipam_dir: &Path) -> String {
    json!({
        "cniVersion": "1.0.0",
        "name": "handoff-e2e",
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.bridge,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": network.cidr(), "gateway": network.gateway.to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": ipam_dir.display().to_string(),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

/// What the kubelet's configuration depends on.
#[derive(Debug, Clone)]
pub struct KubeletSettings<'a> {
    /// containerd's socket.
    pub containerd_socket: &'a Path,
    /// The CA the apiserver's client certificate is signed by.
    pub client_ca: &'a Path,
    /// The cluster DNS server.
    pub dns: Ipv4Addr,
    /// The kubelet's API port (logs, exec).
    pub port: u16,
    /// Its healthz port.
    pub healthz_port: u16,
    /// Where the Pods' logs go.
    pub pod_logs: &'a Path,
}

/// The `KubeletConfiguration` (JSON is YAML): cgroup v1 allowed
/// (`failCgroupV1: false`; Kubernetes 1.37 still runs there, with a
/// warning), the cgroupfs driver (no systemd here), swap tolerated,
/// authentication by client certificate and authorization by the
/// apiserver, and eviction thresholds low enough that a full shared disk
/// does not evict the tests' Pods.
pub fn kubelet_config(settings: &KubeletSettings<'_>) -> String {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": format!("unix://{}", settings.containerd_socket.display()),
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": false,
        "failSwapOn": false,
        "port": settings.port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": settings.healthz_port,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": settings.client_ca.display().to_string()},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [settings.dns.to_string()],
        "clusterDomain": "cluster.local",
        "podLogsDir": settings.pod_logs.display().to_string(),
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    })
    .to_string()
}

/// kube-proxy's `KubeProxyConfiguration`: iptables mode, without touching
/// the conntrack sysctls (`maxPerCore: 0`) or `route_localnet`
/// (`localhostNodePorts: false`), so nothing of the host's settings
/// changes beyond the rules `kube-proxy --cleanup` removes.
pub fn kube_proxy_config(
    kubeconfig: &Path,
    network: &PodNetwork,
    metrics_port: u16,
    healthz_port: u16,
) -> String {
    json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig.display().to_string()},
        "mode": "iptables",
        "clusterCIDR": network.cidr(),
        "metricsBindAddress": format!("127.0.0.1:{metrics_port}"),
        "healthzBindAddress": format!("127.0.0.1:{healthz_port}"),
        "conntrack": {"maxPerCore": 0, "min": 0},
        "iptables": {"localhostNodePorts": false},
    })
    .to_string()
}

/// CoreDNS's Corefile: the cluster's names from the apiserver, answered on
/// the pod network's gateway only. Nothing is forwarded: the machine has no
/// upstream the Pods may use.
pub fn corefile(bind: Ipv4Addr, kubeconfig: &Path, context: &str) -> String {
    format!(
        ".:53 {{\n    bind {bind}\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {{\n        kubeconfig {} {context}\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n    cache 5\n}}\n",
        kubeconfig.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_pod_network_cidr_is_the_gateways_subnet() {
        let cases = [
            (Ipv4Addr::new(10, 244, 0, 1), 24, "10.244.0.0/24"),
            (Ipv4Addr::new(10, 244, 3, 7), 16, "10.244.0.0/16"),
            (Ipv4Addr::new(192, 168, 1, 129), 25, "192.168.1.128/25"),
            (Ipv4Addr::new(10, 1, 2, 3), 0, "0.0.0.0/0"),
        ];
        for (gateway, prefix, want) in cases {
            let network = PodNetwork {
                bridge: "b",
                gateway,
                prefix,
            };
            assert_eq!(network.cidr(), want, "{gateway}/{prefix}");
        }
    }

    #[test]
    fn containerd_has_its_own_places_and_restricts_oom_score_adj() {
        let (root, state, socket) = (
            PathBuf::from("/t/root"),
            PathBuf::from("/t/state"),
            PathBuf::from("/t/c.sock"),
        );
        let text = containerd_toml(&Layout {
            containerd_root: &root,
            containerd_state: &state,
            containerd_socket: &socket,
            cni_bin: Path::new("/usr/lib/cni"),
            cni_conf: Path::new("/t/net.d"),
            cni_ipam: Path::new("/t/ipam"),
            runc: Path::new("/usr/sbin/runc"),
            pause_image: "localhost/pause:e2e",
        });
        for want in [
            "root = \"/t/root\"",
            "state = \"/t/state\"",
            "address = \"/t/c.sock\"",
            "restrict_oom_score_adj = true",
            "sandbox_image = \"localhost/pause:e2e\"",
            "BinaryName = \"/usr/sbin/runc\"",
            "SystemdCgroup = false",
            "conf_dir = \"/t/net.d\"",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }

    #[test]
    fn the_cni_network_bridges_the_pod_subnet_through_the_gateway() {
        let list: serde_json::Value =
            serde_json::from_str(&cni_conflist(&PodNetwork::E2E, Path::new("/t/ipam")))
                .unwrap_or_default();
        let bridge = &list["plugins"][0];
        assert_eq!(bridge["bridge"], "handoff0");
        assert_eq!(bridge["isGateway"], true);
        assert_eq!(bridge["hairpinMode"], true);
        let range = &bridge["ipam"]["ranges"][0][0];
        assert_eq!(range["subnet"], "10.244.0.0/24");
        assert_eq!(range["gateway"], "10.244.0.1");
        assert_eq!(bridge["ipam"]["dataDir"], "/t/ipam");
    }

    #[test]
    fn the_kubelet_runs_on_this_machines_cgroup_v1_without_systemd() {
        let config: serde_json::Value = serde_json::from_str(&kubelet_config(&KubeletSettings {
            containerd_socket: Path::new("/t/c.sock"),
            client_ca: Path::new("/t/ca.crt"),
            dns: Ipv4Addr::new(10, 244, 0, 1),
            port: 10250,
            healthz_port: 10248,
            pod_logs: Path::new("/t/logs"),
        }))
        .unwrap_or_default();
        assert_eq!(config["failCgroupV1"], false);
        assert_eq!(config["cgroupDriver"], "cgroupfs");
        assert_eq!(config["failSwapOn"], false);
        assert_eq!(config["containerRuntimeEndpoint"], "unix:///t/c.sock");
        assert_eq!(config["clusterDNS"][0], "10.244.0.1");
        assert_eq!(config["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(config["authorization"]["mode"], "Webhook");
    }

    #[test]
    fn kube_proxy_leaves_the_hosts_sysctls_alone() {
        let config: serde_json::Value = serde_json::from_str(&kube_proxy_config(
            Path::new("/t/kubeconfig"),
            &PodNetwork::E2E,
            1,
            2,
        ))
        .unwrap_or_default();
        assert_eq!(config["mode"], "iptables");
        assert_eq!(config["clusterCIDR"], "10.244.0.0/24");
        assert_eq!(config["conntrack"]["maxPerCore"], 0);
        assert_eq!(config["iptables"]["localhostNodePorts"], false);
    }

    #[test]
    fn coredns_answers_on_the_gateway_from_the_apiserver() {
        let text = corefile(
            Ipv4Addr::new(10, 244, 0, 1),
            Path::new("/t/kubeconfig"),
            "handoff-dev",
        );
        assert!(text.contains("bind 10.244.0.1"), "{text}");
        assert!(
            text.contains("kubeconfig /t/kubeconfig handoff-dev"),
            "{text}"
        );
        assert!(!text.contains("forward"), "{text}");
    }
}
