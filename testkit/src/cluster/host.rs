//! What the node changes on the host, each undone by a guard: the pod
//! network's bridge, `net.ipv4.ip_forward`, the mounts under the node's
//! directory, and the preconditions checked before anything changes (root,
//! the runtime's packages).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::config::PodNetwork;

/// Fails with what to do unless this process is root: containerd, the
/// kubelet and the bridge need it.
pub(super) fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    anyhow::ensure!(
        euid == 0,
        "the e2e node needs root (containerd, the kubelet and the pod network's \
         bridge change the host): run `make test-e2e` as root"
    );
    Ok(())
}

/// The runtime's programs, found where Debian's packages put them; fails
/// naming each one missing and the command that installs it.
#[derive(Debug, Clone)]
pub(super) struct Runtime {
    pub(super) containerd: PathBuf,
    pub(super) ctr: PathBuf,
    pub(super) runc: PathBuf,
    pub(super) cni_bin: PathBuf,
}

impl Runtime {
    pub(super) fn locate() -> anyhow::Result<Self> {
        let on_path = |name: &str| -> Option<PathBuf> {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain(["/usr/sbin".into(), "/usr/bin".into(), "/sbin".into()])
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        };
        let cni_bin = ["/usr/lib/cni", "/opt/cni/bin"]
            .into_iter()
            .map(PathBuf::from)
            .find(|d| d.join("bridge").is_file() && d.join("host-local").is_file());
        let found = (
            on_path("containerd"),
            on_path("ctr"),
            on_path("runc"),
            cni_bin,
            on_path("ip"),
            on_path("iptables"),
        );
        match found {
            (Some(containerd), Some(ctr), Some(runc), Some(cni_bin), Some(_), Some(_)) => {
                Ok(Self {
                    containerd,
                    ctr,
                    runc,
                    cni_bin,
                })
            }
            (containerd, ctr, runc, cni, ip, iptables) => {
                let missing: Vec<&str> = [
                    (containerd.is_none(), "containerd"),
                    (ctr.is_none(), "ctr (containerd)"),
                    (runc.is_none(), "runc"),
                    (
                        cni.is_none(),
                        "the CNI plugins (containernetworking-plugins)",
                    ),
                    (ip.is_none(), "ip (iproute2)"),
                    (iptables.is_none(), "iptables"),
                ]
                .into_iter()
                .filter_map(|(gone, name)| gone.then_some(name))
                .collect();
                anyhow::bail!(
                    "the e2e node's runtime is missing {}: run `make e2e-assets` as root \
                     (it installs containerd, runc and containernetworking-plugins with apt)",
                    missing.join(", ")
                )
            }
        }
    }
}

/// Runs `program args…`, failing with its output.
pub(super) fn run(program: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", program.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} {} failed ({}): {}{}",
        program.display(),
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> anyhow::Result<String> {
    run(Path::new("ip"), args)
}

/// The pod network's bridge, with the gateway address, deleted on drop
/// (after the Pods: their veths leave with their network namespaces).
pub(super) struct Bridge {
    name: &'static str,
}

impl Bridge {
    /// Creates the bridge (replacing one a killed run left behind) and
    /// brings it up with the gateway address, before the apiserver binds it.
    pub(super) fn create(network: &PodNetwork) -> anyhow::Result<Self> {
        let name = network.bridge;
        if ip(&["link", "show", name]).is_ok() {
            ip(&["link", "delete", name])?;
        }
        ip(&["link", "add", name, "type", "bridge"])?;
        let bridge = Self { name };
        let address = format!("{}/{}", network.gateway, network.prefix);
        ip(&["addr", "add", &address, "dev", name])?;
        ip(&["link", "set", name, "up"])?;
        Ok(bridge)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = ip(&["link", "delete", self.name]);
    }
}

/// A sysctl set for the node's life and restored on drop.
pub(super) struct Sysctl {
    path: PathBuf,
    before: String,
}

impl Sysctl {
    /// Sets `name` (dotted, e.g. `net.ipv4.ip_forward`) to `value`.
    pub(super) fn set(name: &str, value: &str) -> anyhow::Result<Self> {
        let path = Path::new("/proc/sys").join(name.replace('.', "/"));
        let before = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"))?
            .trim()
            .to_owned();
        std::fs::write(&path, value).map_err(|e| anyhow::anyhow!("cannot set {name}: {e}"))?;
        Ok(Self { path, before })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.before);
    }
}

/// An exclusive lock on the host's one e2e node: the bridge, the kubelet's
/// cgroups and kube-proxy's chains are the host's, so two nodes at once
/// would tear each other down. Released when dropped (or the process dies).
pub struct HostLock {
    _file: File,
}

impl HostLock {
    /// Waits until no other node runs on this host, then holds it.
    pub fn acquire() -> anyhow::Result<Self> {
        use std::os::fd::AsRawFd;
        let path = Path::new("/run/handoff-e2e-node.lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        // SAFETY: flock on a descriptor we own; blocks until the other
        // node of this host (another test binary) is gone.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        anyhow::ensure!(
            locked == 0,
            "cannot lock {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        Ok(Self { _file: file })
    }
}

/// Pure: the mount points of `mountinfo` (the text of
/// `/proc/self/mountinfo`) under `dir`, deepest first, so each can be
/// unmounted before its parent.
pub(super) fn mounts_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape_mount_path(field: &str) -> PathBuf {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    PathBuf::from(out)
}

/// Detaches every mount under `dir` (the kubelet's volumes, containerd's
/// snapshots and shm): what the node mounted must not outlive it.
pub(super) fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    for point in mounts_under(&info, dir) {
        let Ok(c_path) = std::ffi::CString::new(point.as_os_str().as_encoded_bytes()) else {
            continue;
        };
        // SAFETY: a valid NUL-terminated path; MNT_DETACH never blocks.
        unsafe {
            libc::umount2(c_path.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// Pure: whether a process's command line (NUL-separated) is a containerd
/// shim of the containerd at `socket`.
pub(super) fn is_shim_of(cmdline: &[u8], socket: &Path) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let is_shim = args
        .first()
        .is_some_and(|a| a.ends_with(b"containerd-shim-runc-v2"));
    let socket = socket.as_os_str().as_encoded_bytes();
    is_shim
        && args
            .windows(2)
            .any(|w| w[0] == b"-address" && w[1] == socket)
}

/// SIGKILLs the shims of the containerd at `socket`: they daemonize out of
/// its process group, so stopping containerd leaves them running.
pub(super) fn kill_shims(socket: &Path) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| is_shim_of(&c, socket)) {
            // SAFETY: kill has no memory preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// The chains the kubelet makes in iptables and ip6tables, by table: its
/// canaries, the hint kube-proxy reads, and the firewall that drops
/// non-local traffic to 127.0.0.0/8 (jumped to from INPUT and OUTPUT).
const KUBELET_CHAINS: [(&str, &str); 4] = [
    ("filter", "KUBE-FIREWALL"),
    ("filter", "KUBE-KUBELET-CANARY"),
    ("nat", "KUBE-KUBELET-CANARY"),
    ("mangle", "KUBE-KUBELET-CANARY"),
];

/// kube-proxy's `--cleanup` removes its own chains but not the kubelet's:
/// this removes those the host did not have before the node started.
pub(super) struct KubeletChains {
    absent: Vec<(&'static str, &'static str, &'static str)>,
}

impl KubeletChains {
    /// Notes which of the kubelet's chains are absent now.
    pub(super) fn snapshot() -> Self {
        let mut absent = Vec::new();
        for program in ["iptables", "ip6tables"] {
            for (table, chain) in KUBELET_CHAINS
                .into_iter()
                .chain([("mangle", "KUBE-IPTABLES-HINT")])
            {
                if run(Path::new(program), &["-t", table, "-S", chain]).is_err() {
                    absent.push((program, table, chain));
                }
            }
        }
        Self { absent }
    }
}

/// Pure: the commands that remove `chain` of `table` (first the jumps to
/// it, then its rules, then the chain).
pub(super) fn removal_of(table: &str, chain: &str) -> Vec<Vec<String>> {
    let mut steps: Vec<Vec<String>> = Vec::new();
    if chain == "KUBE-FIREWALL" {
        for from in ["INPUT", "OUTPUT"] {
            steps.push(vec![
                "-t".into(),
                table.into(),
                "-D".into(),
                from.into(),
                "-j".into(),
                chain.into(),
            ]);
        }
    }
    steps.push(vec!["-t".into(), table.into(), "-F".into(), chain.into()]);
    steps.push(vec!["-t".into(), table.into(), "-X".into(), chain.into()]);
    steps
}

impl Drop for KubeletChains {
    fn drop(&mut self) {
        for (program, table, chain) in &self.absent {
            for step in removal_of(table, chain) {
                let args: Vec<&str> = step.iter().map(String::as_str).collect();
                let _ = run(Path::new(program), &args);
            }
        }
    }
}

/// Directories the kubelet makes at fixed places whatever its root
/// (`/var/lib/kubelet/device-plugins`, `/var/log/containers`): removed on
/// drop when the host did not have them before.
pub(super) struct FixedDirs {
    made: Vec<PathBuf>,
}

impl FixedDirs {
    /// Notes which of `dirs` are absent now.
    pub(super) fn snapshot(dirs: &[&str]) -> Self {
        let made = dirs
            .iter()
            .map(PathBuf::from)
            .filter(|d| !d.exists())
            .collect();
        Self { made }
    }
}

impl Drop for FixedDirs {
    fn drop(&mut self) {
        for dir in &self.made {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_firewall_is_unhooked_before_it_is_removed() {
        let steps = removal_of("filter", "KUBE-FIREWALL");
        let flat: Vec<String> = steps.iter().map(|s| s.join(" ")).collect();
        assert_eq!(
            flat,
            [
                "-t filter -D INPUT -j KUBE-FIREWALL",
                "-t filter -D OUTPUT -j KUBE-FIREWALL",
                "-t filter -F KUBE-FIREWALL",
                "-t filter -X KUBE-FIREWALL",
            ]
        );
        let canary: Vec<String> = removal_of("nat", "KUBE-KUBELET-CANARY")
            .iter()
            .map(|s| s.join(" "))
            .collect();
        assert_eq!(
            canary,
            [
                "-t nat -F KUBE-KUBELET-CANARY",
                "-t nat -X KUBE-KUBELET-CANARY"
            ]
        );
    }

    #[test]
    fn mounts_under_a_directory_come_deepest_first() {
        let info = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
90 22 0:50 / /tmp/n/kubelet/pods/a/volumes/x rw - tmpfs tmpfs rw
91 22 0:51 / /tmp/n/containerd/state/io.containerd.runtime.v2.task/k8s.io/b/rootfs rw - overlay overlay rw
92 22 0:52 / /tmp/n/kubelet rw - tmpfs tmpfs rw
93 22 0:53 / /tmp/nother rw - tmpfs tmpfs rw
94 22 0:54 / /tmp/n/with\\040space rw - tmpfs tmpfs rw
";
        let found = mounts_under(info, Path::new("/tmp/n"));
        assert_eq!(
            found,
            vec![
                PathBuf::from(
                    "/tmp/n/containerd/state/io.containerd.runtime.v2.task/k8s.io/b/rootfs"
                ),
                PathBuf::from("/tmp/n/kubelet/pods/a/volumes/x"),
                PathBuf::from("/tmp/n/kubelet"),
                PathBuf::from("/tmp/n/with space"),
            ]
        );
    }

    #[test]
    fn shims_are_told_apart_by_their_containerds_socket() {
        let socket = Path::new("/tmp/n/containerd.sock");
        let cases: [(&[u8], bool); 4] = [
            (
                b"/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0abc\0-address\0/tmp/n/containerd.sock\0",
                true,
            ),
            (
                b"/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0abc\0-address\0/run/containerd/containerd.sock\0",
                false,
            ),
            (b"/usr/bin/containerd\0--config\0/tmp/n/containerd.sock\0", false),
            (b"", false),
        ];
        for (cmdline, want) in cases {
            assert_eq!(
                is_shim_of(cmdline, socket),
                want,
                "{}",
                String::from_utf8_lossy(cmdline)
            );
        }
    }
}
