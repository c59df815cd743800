//! etcd + kube-apiserver, started the way controller-runtime's envtest does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::assets::Assets;
use super::home::Place;
use super::pki::Pki;
use super::process::{Supervised, port_or_free};
use handoff_core::names::LOCAL_FIELD_MANAGER;

/// How long etcd and the apiserver get to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// How to start a [`ControlPlane`].
#[derive(Debug, Clone, Default)]
pub struct PlaneOptions {
    /// Where the temporary directory goes (default: the system temp dir).
    pub parent: Option<PathBuf>,
    /// Static bearer tokens the apiserver accepts (`--token-auth-file`), for
    /// development identities without ServiceAccounts.
    pub static_tokens: Vec<StaticToken>,
    /// A directory kept across runs instead of a temporary one (`handoff
    /// dev`): its certificates and etcd data are reused when present, and
    /// nothing is removed on stop.
    pub keep: Option<PathBuf>,
    /// Ports to use when they are free (a kept plane's previous ports), as
    /// `(etcd, apiserver)`.
    pub preferred_ports: Option<(u16, u16)>,
    /// etcd's `--quota-backend-bytes` (its database's size limit, beyond
    /// which it refuses writes); `None` keeps etcd's default of 2 GiB, which
    /// tests and `handoff dev` never approach. The scaling benchmark sizes
    /// it for its largest stage (`handoff_testkit::bench`).
    pub etcd_quota_bytes: Option<u64>,
    /// For a plane with a node beside it (`handoff_testkit::cluster`): the
    /// address the apiserver binds and advertises (the pod network's
    /// gateway, so Pods reach it and the `kubernetes` Service points
    /// there), with the ServiceAccount admission plugin on (Pods get
    /// tokens) and the admin certificate as the kubelet client (logs,
    /// exec). `None`: loopback only, no ServiceAccount admission, as envtest.
    pub node_address: Option<std::net::Ipv4Addr>,
}

/// One line of the apiserver's static token file.
#[derive(Debug, Clone)]
pub struct StaticToken {
    /// The bearer token.
    pub token: String,
    /// The user name it authenticates as.
    pub user: String,
    /// Groups of that user.
    pub groups: Vec<String>,
}

impl StaticToken {
    fn csv_line(&self) -> String {
        format!(
            "{},{},{},\"{}\"\n",
            self.token,
            self.user,
            self.user,
            self.groups.join(",")
        )
    }
}

/// A running etcd + kube-apiserver in a temporary directory. Dropping it stops
/// both (apiserver first) and removes the directory (unless it is kept).
pub struct ControlPlane {
    // Field order is drop order: the apiserver goes before etcd, and the
    // directory (data, certificates, logs) last.
    apiserver: Supervised,
    etcd: Supervised,
    kubeconfig: Kubeconfig,
    kubeconfig_path: PathBuf,
    assets: Assets,
    ports: Ports,
    dir: Place,
}

/// What a restarted process needs to come back where it was.
struct Ports {
    etcd: u16,
    api: u16,
    token_file: Option<PathBuf>,
    etcd_quota_bytes: Option<u64>,
    node_address: Option<std::net::Ipv4Addr>,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver in a new temporary directory, waits
    /// until the apiserver is ready and the `default` namespace exists, and
    /// writes an admin kubeconfig.
    pub async fn start(assets: Assets) -> anyhow::Result<Self> {
        Self::start_with(assets, PlaneOptions::default()).await
    }

    /// [`ControlPlane::start`] with options (a `parent` directory keeps a
    /// killed `handoff dev`'s state in its own dir).
    pub async fn start_with(assets: Assets, options: PlaneOptions) -> anyhow::Result<Self> {
        let dir = match &options.keep {
            Some(kept) => {
                std::fs::create_dir_all(kept)?;
                Place::Kept(kept.clone())
            }
            None => {
                let parent = options.parent.clone().unwrap_or_else(std::env::temp_dir);
                Place::Temporary(
                    tempfile::Builder::new()
                        .prefix("handoff-envtest-")
                        .tempdir_in(parent)?,
                )
            }
        };
        let root = dir.path();
        let certs = root.join("certs");
        let pki = match Pki::load(&certs)? {
            Some(pki) => pki,
            None => {
                let pki = Pki::generate(options.node_address)?;
                pki.save(&certs)?;
                pki
            }
        };

        let (etcd_preferred, api_preferred) = options.preferred_ports.unwrap_or_default();
        let etcd_port = port_or_free(etcd_preferred)?;
        let etcd = start_etcd(&assets, root, etcd_port, options.etcd_quota_bytes)?;
        let api_port = port_or_free(api_preferred)?;
        let token_file = (!options.static_tokens.is_empty())
            .then(|| -> anyhow::Result<PathBuf> {
                let path = certs.join("tokens.csv");
                std::fs::write(
                    &path,
                    options
                        .static_tokens
                        .iter()
                        .map(StaticToken::csv_line)
                        .collect::<String>(),
                )?;
                Ok(path)
            })
            .transpose()?;
        let apiserver = start_apiserver(
            &assets,
            root,
            &certs,
            etcd_port,
            api_port,
            token_file.as_deref(),
            options.node_address,
        )?;

        let kubeconfig = admin_kubeconfig(&pki, &api_host(options.node_address), api_port)?;
        let kubeconfig_path = root.join("kubeconfig");
        std::fs::write(&kubeconfig_path, serde_saphyr::to_string(&kubeconfig)?)?;

        let ports = Ports {
            etcd: etcd_port,
            api: api_port,
            token_file,
            etcd_quota_bytes: options.etcd_quota_bytes,
            node_address: options.node_address,
        };
        let mut plane = Self {
            apiserver,
            etcd,
            kubeconfig,
            kubeconfig_path,
            assets,
            ports,
            dir,
        };
        plane.wait_ready().await?;
        Ok(plane)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let client = self.client().await?;
        let deadline = Instant::now() + START_TIMEOUT;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        loop {
            self.etcd.ensure_running()?;
            self.apiserver.ensure_running()?;
            let ready = client
                .request_text(http_get("/readyz")?)
                .await
                .is_ok_and(|body| body.trim() == "ok");
            if ready && namespaces.get_opt("default").await.ok().flatten().is_some() {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "kube-apiserver was not ready within {START_TIMEOUT:?}; last lines of its log:\n{}",
                self.apiserver.log_tail(25)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A new client with admin rights. Make one per tokio runtime (a client's
    /// connection pool lives on the runtime that created it).
    pub async fn client(&self) -> anyhow::Result<Client> {
        client_from(&self.kubeconfig).await
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The binaries this plane runs.
    pub fn assets(&self) -> &Assets {
        &self.assets
    }

    /// The directory holding data, certificates and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `(etcd, apiserver)` ports.
    pub fn ports(&self) -> (u16, u16) {
        (self.ports.etcd, self.ports.api)
    }

    /// Stops kube-apiserver, keeping etcd and every byte of data (fault injection).
    pub fn stop_apiserver(&mut self) {
        self.apiserver.stop(Duration::from_secs(10));
    }

    /// Starts kube-apiserver again on the same port and waits until it is ready.
    pub async fn start_apiserver(&mut self) -> anyhow::Result<()> {
        let root = self.dir.path();
        let token_file = self.ports.token_file.as_deref();
        self.apiserver = start_apiserver(
            &self.assets,
            root,
            &root.join("certs"),
            self.ports.etcd,
            self.ports.api,
            token_file,
            self.ports.node_address,
        )?;
        self.wait_ready().await
    }

    /// Stops etcd, keeping its data (fault injection).
    pub fn stop_etcd(&mut self) {
        self.etcd.stop(Duration::from_secs(10));
    }

    /// Starts etcd again on the same port and data, and waits until the
    /// apiserver is ready again.
    pub async fn start_etcd(&mut self) -> anyhow::Result<()> {
        self.etcd = start_etcd(
            &self.assets,
            self.dir.path(),
            self.ports.etcd,
            self.ports.etcd_quota_bytes,
        )?;
        self.wait_ready().await
    }

    /// Process ids of etcd and kube-apiserver (for leak checks).
    pub fn pids(&self) -> Vec<u32> {
        vec![self.etcd.pid(), self.apiserver.pid()]
    }

    /// Stops both processes and removes the directory (same as dropping it).
    pub fn stop(self) {
        drop(self);
    }
}

fn start_etcd(
    assets: &Assets,
    root: &Path,
    port: u16,
    quota_bytes: Option<u64>,
) -> anyhow::Result<Supervised> {
    let url = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(assets.bin("etcd"));
    cmd.arg(format!("--data-dir={}", root.join("etcd").display()))
        .arg(format!("--listen-client-urls={url}"))
        .arg(format!("--advertise-client-urls={url}"))
        .arg("--listen-peer-urls=http://127.0.0.1:0")
        .arg("--unsafe-no-fsync=true")
        .arg("--log-level=warn");
    if let Some(bytes) = quota_bytes {
        cmd.arg(format!("--quota-backend-bytes={bytes}"));
    }
    Supervised::spawn("etcd", cmd, &root.join("etcd.log"))
}

fn start_apiserver(
    assets: &Assets,
    root: &Path,
    certs: &Path,
    etcd_port: u16,
    port: u16,
    token_file: Option<&Path>,
    node_address: Option<std::net::Ipv4Addr>,
) -> anyhow::Result<Supervised> {
    let cert = |f: &str| certs.join(f).display().to_string();
    let bind = api_host(node_address);
    let mut cmd = Command::new(assets.bin("kube-apiserver"));
    cmd.arg(format!("--etcd-servers=http://127.0.0.1:{etcd_port}"))
        .arg(format!("--cert-dir={}", certs.display()))
        .arg(format!("--tls-cert-file={}", cert("apiserver.crt")))
        .arg(format!("--tls-private-key-file={}", cert("apiserver.key")))
        .arg(format!("--client-ca-file={}", cert("ca.crt")))
        .arg(format!("--secure-port={port}"))
        .arg(format!("--bind-address={bind}"))
        .arg("--service-cluster-ip-range=10.0.0.0/24")
        .arg("--allow-privileged=true")
        .arg("--authorization-mode=RBAC")
        .arg(format!("--service-account-issuer=https://{bind}:{port}"))
        .arg(format!("--service-account-key-file={}", cert("sa.pub")))
        .arg(format!(
            "--service-account-signing-key-file={}",
            cert("sa.key")
        ))
        .arg("--v=1");
    if let Some(file) = token_file {
        cmd.arg(format!("--token-auth-file={}", file.display()));
    }
    match node_address {
        // Pods get ServiceAccount tokens; the apiserver reaches the kubelet
        // (logs, exec) as admin.
        Some(address) => cmd
            .arg(format!("--advertise-address={address}"))
            .arg(format!(
                "--kubelet-client-certificate={}",
                cert("admin.crt")
            ))
            .arg(format!("--kubelet-client-key={}", cert("admin.key"))),
        // No controller-manager makes ServiceAccounts, so Pods could not be
        // admitted with the plugin on (envtest disables it too).
        None => cmd.arg("--disable-admission-plugins=ServiceAccount"),
    };
    Supervised::spawn("kube-apiserver", cmd, &root.join("kube-apiserver.log"))
}

/// Where the apiserver listens: the node's address, else loopback.
fn api_host(node_address: Option<std::net::Ipv4Addr>) -> String {
    node_address.map_or_else(|| "127.0.0.1".to_owned(), |a| a.to_string())
}

/// An admin kubeconfig (client certificate in `system:masters`).
fn admin_kubeconfig(pki: &Pki, host: &str, port: u16) -> anyhow::Result<Kubeconfig> {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "handoff-dev", "cluster": {
            "server": format!("https://{host}:{port}"),
            "certificate-authority-data": B64.encode(&pki.ca_cert),
        }}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": B64.encode(&pki.admin_cert),
            "client-key-data": B64.encode(&pki.admin_key),
        }}],
        "contexts": [{"name": "handoff-dev", "context": {"cluster": "handoff-dev", "user": "admin"}}],
        "current-context": "handoff-dev",
    });
    Ok(serde_json::from_value(doc)?)
}

/// A client for a kubeconfig's current context.
pub async fn client_from(kubeconfig: &Kubeconfig) -> anyhow::Result<Client> {
    let config =
        Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

fn http_get(path: &str) -> anyhow::Result<http::Request<Vec<u8>>> {
    Ok(http::Request::get(path).body(Vec::new())?)
}

/// Applies every CRD of [`handoff_core::api::crds`] (server-side) and waits until
/// each is `Established` and its resource is served.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(LOCAL_FIELD_MANAGER).force();
    for crd in handoff_core::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for crd in handoff_core::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            let established = api
                .get(&name)
                .await?
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            let path = format!(
                "/apis/{}/{}/{}",
                crd.spec.group, crd.spec.versions[0].name, crd.spec.names.plural
            );
            let served = established
                && client
                    .request_text(http_get(&format!("{path}?limit=1"))?)
                    .await
                    .is_ok();
            if served {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "CRD {name} was not established within 30s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
