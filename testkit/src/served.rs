//! `handoff` processes started the way a cluster runs them — a separate
//! process per component — for the integration suites and the benchmarks:
//! the HTTP bridge ([`BridgeProcess`]), the controller
//! ([`ControllerProcess`]), the admission webhook ([`WebhookProcess`]) and
//! the console ([`ConsoleProcess`]).
//! Each is a [`Supervised`] child (they die with
//! us), log to a file tests can read, and are found by the address they
//! print when they start.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use handoff_local::ServerTls;
use handoff_local::process::Supervised;

/// How long a process may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A supervised `handoff` process and the address it printed.
struct Served {
    process: Supervised,
    address: String,
    log: tempfile::NamedTempFile,
}

impl Served {
    /// Starts `command` and waits until its log holds a line that
    /// `address_in` accepts.
    fn start(
        name: &str,
        command: Command,
        address_in: fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let log = tempfile::NamedTempFile::new()?;
        let mut process = Supervised::spawn(name, command, log.path())?;
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            if let Some(address) = complete_lines(&text).lines().find_map(address_in) {
                return Ok(Self {
                    process,
                    address,
                    log,
                });
            }
            process.ensure_running()?;
            anyhow::ensure!(
                started.elapsed() < START_TIMEOUT,
                "{name} printed no address within {START_TIMEOUT:?}:\n{}",
                process.log_tail(25)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

/// The lines of `text` that have ended: a process's unbuffered stderr
/// reaches its log in pieces (`eprintln!` writes each argument on its own),
/// so the last line may still be half written (`serving http` before
/// `://127.0.0.1:…`).
fn complete_lines(text: &str) -> &str {
    text.rsplit_once('\n').map_or("", |(ended, _)| ended)
}

/// The word after `marker` in `line`, up to the next whitespace or `/`
/// when `until_slash`.
fn after(line: &str, marker: &str, until_slash: bool) -> Option<String> {
    let rest = line.split_once(marker)?.1.split_whitespace().next()?;
    let word = if until_slash {
        rest.split('/').next()?
    } else {
        rest
    };
    (!word.is_empty()).then(|| word.to_owned())
}

/// The URL in the bridge's `handoff mcp: serving <url> …` line.
fn bridge_url(line: &str) -> Option<String> {
    after(line, "serving ", false)
}

/// `host:port` in the controller's `… metrics on http://<addr>/metrics` line.
fn controller_metrics(line: &str) -> Option<String> {
    after(line, "metrics on http://", true)
}

/// `host:port` in the bridge's `handoff mcp: metrics on http://<addr>/metrics` line.
fn bridge_metrics(line: &str) -> Option<String> {
    line.starts_with("handoff mcp: ")
        .then(|| after(line, "metrics on http://", true))
        .flatten()
}

/// `host:port` in the webhook's `handoff webhook: metrics on http://<addr>/metrics` line.
fn webhook_metrics(line: &str) -> Option<String> {
    line.starts_with("handoff webhook: ")
        .then(|| after(line, "metrics on http://", true))
        .flatten()
}

/// The URL in the webhook's `handoff webhook: serving <url>` line.
fn webhook_url(line: &str) -> Option<String> {
    line.starts_with("handoff webhook: ")
        .then(|| after(line, "serving ", false))
        .flatten()
}

/// A running `handoff webhook` on a free loopback port, serving a
/// certificate for `127.0.0.1` from a CA of its own (what cert-manager
/// issues in a cluster); killed on drop.
pub struct WebhookProcess {
    served: Served,
    tls: ServerTls,
    dir: tempfile::TempDir,
}

impl WebhookProcess {
    /// Starts `binary webhook --listen 127.0.0.1:0` with a fresh
    /// certificate, re-read every 100 ms, and waits for its URL.
    pub fn start(binary: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let tls = ServerTls::generate("handoff-test-webhook-ca", &["127.0.0.1"])?;
        write_pair(dir.path(), &tls)?;
        let mut command = Command::new(binary);
        command
            .args(["webhook", "--listen", "127.0.0.1:0"])
            .arg("--tls-cert-file")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-key-file")
            .arg(dir.path().join("tls.key"))
            .args(["--tls-reload-interval", "100ms"])
            .env("RUST_LOG", "info");
        let served = Served::start("handoff webhook", command, webhook_url)?;
        Ok(Self { served, tls, dir })
    }

    /// `https://127.0.0.1:<port>/validate`.
    pub fn url(&self) -> &str {
        &self.served.address
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        host_port(self.url())
    }

    /// The CA that signed the certificate served now.
    pub fn ca_pem(&self) -> &str {
        &self.tls.ca_cert
    }

    /// Points `configuration` (config/webhook's ValidatingWebhookConfiguration,
    /// e.g. as `kubectl kustomize config/default` built it) at this process:
    /// `clientConfig.url`, this CA as `caBundle` (cert-manager's and
    /// cainjector's part on a plane without them).
    pub fn point(&self, configuration: &mut serde_json::Value) -> anyhow::Result<()> {
        handoff_webhook::registration::point_at(configuration, self.url(), Some(self.ca_pem()))
    }

    /// Rotates the certificate in place, as cert-manager renews the mounted
    /// Secret: a new CA and serving certificate written over the files.
    pub fn rotate(&mut self) -> anyhow::Result<()> {
        let tls = ServerTls::generate("handoff-test-webhook-ca-2", &["127.0.0.1"])?;
        write_pair(self.dir.path(), &tls)?;
        self.tls = tls;
        Ok(())
    }

    /// Everything the webhook logged so far.
    pub fn log(&self) -> String {
        self.served.log()
    }
}

fn write_pair(dir: &Path, tls: &ServerTls) -> anyhow::Result<()> {
    // The key first: a reload that catches the new key with the old
    // certificate fails and is retried, as with a half-written Secret.
    std::fs::write(dir.join("tls.key"), &tls.key)?;
    std::fs::write(dir.join("tls.crt"), &tls.cert)?;
    Ok(())
}

/// A running `handoff webhook` managing its own certificate (the default
/// of config/default): Secret `handoff-webhook-tls` in `namespace`, the CA
/// injected into ValidatingWebhookConfiguration `configuration`, the
/// certificate also naming `127.0.0.1`; the Secret and the configuration
/// read every 200 ms. Killed on drop.
pub struct ManagedWebhookProcess(Served);

impl ManagedWebhookProcess {
    /// Starts `binary webhook --listen 127.0.0.1:0 --metrics-listen
    /// 127.0.0.1:0` in self-managed mode with `kubeconfig` as its identity,
    /// and `extra` flags (e.g. short lifetimes), and waits for its URL. It
    /// serves once it has a certificate.
    pub fn start(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        configuration: &str,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command
            .args(["webhook", "--listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .args(["--namespace", namespace])
            .args(["--webhook-configuration", configuration])
            .args(["--extra-san", "127.0.0.1", "--cert-sync-interval", "200ms"])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("POD_NAMESPACE")
            .env("RUST_LOG", "info");
        Served::start("handoff webhook", command, webhook_url).map(Self)
    }

    /// `host:port` of its /metrics (plain HTTP).
    pub fn metrics_addr(&self) -> Option<String> {
        self.0.log().lines().find_map(webhook_metrics)
    }

    /// `https://127.0.0.1:<port>/validate`.
    pub fn url(&self) -> &str {
        &self.0.address
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        host_port(self.url())
    }

    /// Everything the webhook logged so far.
    pub fn log(&self) -> String {
        self.0.log()
    }
}

/// `host:port` of an `https://host:port/path` URL.
fn host_port(url: &str) -> String {
    url.trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A running `handoff mcp --listen` on a free loopback port; killed on drop.
pub struct BridgeProcess(Served);

impl BridgeProcess {
    /// Starts `binary mcp --listen 127.0.0.1:0 --namespace <namespace> <extra>`
    /// with `kubeconfig` as its own identity and waits for its address. The
    /// mirror's URL comes only from `extra` (or `env`): the test runner's
    /// `HANDOFF_POSTGRES_URL` is not passed on.
    pub fn start(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_with_env(binary, kubeconfig, namespace, extra, &[])
    }

    /// [`BridgeProcess::start`] with extra environment variables (e.g. `RUST_LOG`).
    pub fn start_with_env(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::spawn(binary, kubeconfig, Some(namespace), extra, env)
    }

    /// A bridge without `--namespace`: each call in the namespace of the
    /// caller's ServiceAccount, or the one `/mcp/ns/<namespace>` names.
    pub fn start_for_every_namespace(
        binary: &Path,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        Self::spawn(binary, kubeconfig, None, extra, &[])
    }

    fn spawn(
        binary: &Path,
        kubeconfig: &Path,
        namespace: Option<&str>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command.args(["mcp", "--listen", "127.0.0.1:0"]);
        if let Some(namespace) = namespace {
            command.args(["--namespace", namespace]);
        }
        command
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("HANDOFF_POSTGRES_URL")
            .envs(env.iter().copied());
        Served::start("handoff mcp", command, bridge_url).map(Self)
    }

    /// `http://127.0.0.1:<port>/mcp` (`https://` when started with `--tls-cert`)
    pub fn url(&self) -> &str {
        &self.0.address
    }

    /// `host:port` of its /metrics when started with `--metrics-listen`
    /// (the bridge prints it before it serves).
    pub fn metrics_addr(&self) -> Option<String> {
        self.0.log().lines().find_map(bridge_metrics)
    }

    /// The process id (for memory readings).
    pub fn pid(&self) -> u32 {
        self.0.process.pid()
    }

    /// Everything the bridge logged so far.
    pub fn log(&self) -> String {
        self.0.log()
    }
}

/// A running `handoff controller` scoped to one namespace (its Lease lives
/// there too); stopped with SIGTERM on drop.
pub struct ControllerProcess(Served);

impl ControllerProcess {
    /// Starts `binary controller --namespace <ns> --lease-namespace <ns>
    /// --identity <identity> --metrics-listen 127.0.0.1:0 <extra>` with
    /// `kubeconfig` and waits for its metrics address. The mirror's URL
    /// comes only from `extra`: the test runner's `DATABASE_URL` /
    /// `HANDOFF_POSTGRES_URL` are not passed on.
    pub fn start(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        identity: &str,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_with_env(binary, kubeconfig, namespace, identity, extra, &[])
    }

    /// [`ControllerProcess::start`] with extra environment variables (e.g.
    /// the mirror's URL, `RUST_LOG`), set after the ones removed.
    pub fn start_with_env(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        identity: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command.args(["controller", "--namespace", namespace]);
        Self::spawn(command, kubeconfig, namespace, identity, extra, env)
    }

    /// [`ControllerProcess::start`] watching every namespace (its Lease in
    /// `lease_namespace`), e.g. to delete a namespace it serves.
    pub fn start_cluster_wide(
        binary: &Path,
        kubeconfig: &Path,
        lease_namespace: &str,
        identity: &str,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command.arg("controller");
        Self::spawn(command, kubeconfig, lease_namespace, identity, extra, &[])
    }

    fn spawn(
        mut command: Command,
        kubeconfig: &Path,
        lease_namespace: &str,
        identity: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        command
            .args(["--lease-namespace", lease_namespace, "--identity", identity])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("DATABASE_URL")
            .env_remove("HANDOFF_POSTGRES_URL")
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied());
        Served::start("handoff controller", command, controller_metrics).map(Self)
    }

    /// `host:port` of /metrics, /healthz and /readyz.
    pub fn metrics_addr(&self) -> &str {
        &self.0.address
    }

    /// The process id (for memory readings).
    pub fn pid(&self) -> u32 {
        self.0.process.pid()
    }

    /// Everything the controller logged so far.
    pub fn log(&self) -> String {
        self.0.log()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.0.process.exited().is_none()
    }

    /// SIGKILL: a crash, no graceful step-down; its Lease stays held until
    /// it expires.
    pub fn kill(mut self) {
        self.0.process.kill();
    }
}

/// The URL in the console's `handoff console listening on <url>` line.
fn console_url(line: &str) -> Option<String> {
    line.starts_with("handoff console listening on ")
        .then(|| after(line, "listening on ", false))
        .flatten()
}

/// The one-time link in the console's `handoff console: open <url>` line.
fn console_login(line: &str) -> Option<String> {
    line.starts_with("handoff console: open ")
        .then(|| after(line, "open ", false))
        .flatten()
}

/// A running `handoff console` on a free loopback port; killed on drop.
pub struct ConsoleProcess {
    served: Served,
    login: Option<String>,
}

impl ConsoleProcess {
    /// Starts `binary console <extra>` in laptop mode with `kubeconfig` as
    /// the person's and waits for its address and one-time link. The
    /// mirror's URL comes only from `extra`.
    pub fn laptop(binary: &Path, kubeconfig: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command.arg("console").args(extra);
        let served = Self::spawn(command, kubeconfig)?;
        let login = complete_lines(&served.log())
            .lines()
            .find_map(console_login)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "handoff console printed no one-time link:\n{}",
                    served.process.log_tail(25)
                )
            })?;
        Ok(Self {
            served,
            login: Some(login),
        })
    }

    /// Starts `binary console --behind-proxy --listen 127.0.0.1:0 <extra>`
    /// with `kubeconfig` as the console's own identity (it reads nothing
    /// with it: every read is the bearer's) and waits for its address.
    pub fn behind_proxy(binary: &Path, kubeconfig: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        command
            .args(["console", "--behind-proxy", "--listen", "127.0.0.1:0"])
            .args(extra);
        let served = Self::spawn(command, kubeconfig)?;
        Ok(Self {
            served,
            login: None,
        })
    }

    fn spawn(mut command: Command, kubeconfig: &Path) -> anyhow::Result<Served> {
        command
            .env("KUBECONFIG", kubeconfig)
            .env_remove("HANDOFF_POSTGRES_URL")
            .env("RUST_LOG", "info");
        Served::start("handoff console", command, console_url)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.served.address
    }

    /// The one-time sign-in link laptop mode printed
    /// (`http://127.0.0.1:<port>/login?token=…`).
    ///
    /// # Panics
    /// In proxy mode, which has no link.
    pub fn login_url(&self) -> &str {
        self.login
            .as_deref()
            .unwrap_or_else(|| panic!("a console behind a proxy has no one-time link"))
    }

    /// Everything the console logged so far.
    pub fn log(&self) -> String {
        self.served.log()
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.served.process.pid()
    }
}

#[cfg(test)]
mod tests {
    use super::{
        bridge_metrics, bridge_url, complete_lines, console_login, console_url, controller_metrics,
        webhook_url,
    };

    #[test]
    fn a_half_written_line_is_not_read() {
        let cases = [
            ("", ""),
            ("handoff mcp: serving http", ""),
            ("a\nhandoff mcp: serving http", "a"),
            ("a\nb\n", "a\nb"),
            ("a\n\n", "a\n"),
        ];
        for (text, ended) in cases {
            assert_eq!(complete_lines(text), ended, "{text:?}");
        }
        let half = "handoff mcp: serving http";
        assert_eq!(complete_lines(half).lines().find_map(bridge_url), None);
    }

    #[test]
    fn the_printed_addresses_are_parsed() {
        type Parser = fn(&str) -> Option<String>;
        let cases: [(Parser, &str, Option<&str>); 12] = [
            (
                console_url,
                "handoff console listening on http://127.0.0.1:8123",
                Some("http://127.0.0.1:8123"),
            ),
            (
                console_login,
                "handoff console: open http://127.0.0.1:8123/login?token=abc",
                Some("http://127.0.0.1:8123/login?token=abc"),
            ),
            (
                console_url,
                "handoff console: open http://127.0.0.1:8123/login?token=abc",
                None,
            ),
            (
                webhook_url,
                "handoff webhook: serving https://127.0.0.1:9443/validate",
                Some("https://127.0.0.1:9443/validate"),
            ),
            (
                webhook_url,
                "handoff mcp: serving http://127.0.0.1:1/mcp",
                None,
            ),
            (
                bridge_metrics,
                "handoff mcp: metrics on http://127.0.0.1:9464/metrics",
                Some("127.0.0.1:9464"),
            ),
            (
                bridge_metrics,
                "handoff controller: metrics on http://127.0.0.1:8080/metrics",
                None,
            ),
            (
                bridge_url,
                "handoff mcp: serving http://127.0.0.1:4242/mcp (namespace ns)",
                Some("http://127.0.0.1:4242/mcp"),
            ),
            (bridge_url, "{\"level\":\"INFO\"}", None),
            (
                controller_metrics,
                "handoff controller: metrics on http://127.0.0.1:8080/metrics",
                Some("127.0.0.1:8080"),
            ),
            (controller_metrics, "metrics on http://", None),
            (controller_metrics, "handoff controller: starting", None),
        ];
        for (parse, line, expected) in cases {
            assert_eq!(parse(line).as_deref(), expected, "{line}");
        }
    }
}
