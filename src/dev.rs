//! `handoff dev`: the embedded default for a laptop with no cluster.
//!
//! Starts the local control plane (and PostgreSQL when its binaries are
//! installed), installs the CRDs and the agent ClusterRoles, starts the
//! admission webhook in this process on a loopback port (a serving
//! certificate from a CA made for this run) and registers config/webhook's
//! ValidatingWebhookConfiguration pointed at it, so a kubectl twin is
//! refused here as in a cluster; starts the
//! controller (with the PostgreSQL mirror when PostgreSQL runs; its metrics
//! on a loopback port) and the MCP bridge on a loopback port (listing from
//! the mirror when there is one), writes `<dir>/kubeconfig`, `<dir>/env` and
//! ready-to-use MCP client configs, prints how to use them, and runs in the
//! foreground until Ctrl-C or SIGTERM, then stops everything (the processes
//! also die with this one if it is killed).
//!
//! Everything it needs to come back lives in the data directory
//! (`handoff_local::home`): a restart reuses the etcd data, certificates,
//! dev tokens, ports and PostgreSQL data, so handoffs, the kubeconfig and
//! the MCP client configs keep working; `--fresh` starts over.
//!
//! Agents authenticate to the bridge with static dev tokens (the apiserver's
//! `--token-auth-file`): `dev:implement` in group `handoff:writers` (bound
//! to `handoff-writer`) and `dev:refine` in `handoff:groomers` (bound to
//! `handoff-groomer`), random on the first start and kept after it.
//!
//! The person running `handoff dev` is the plane's admin, `dev:admin` (group
//! `system:masters`), with a static token of its own: `<dir>/kubeconfig`
//! carries that token rather than a client certificate, because the SRE's
//! `handoff history | diff | search` forward the kubeconfig's bearer token
//! to the bridge (`HANDOFF_BRIDGE_URL` in `<dir>/env`), which reviews that
//! identity's access before it reads the mirror; a certificate cannot be
//! forwarded.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use handoff_bridge::auth::TokenResolver;
use handoff_core::names::LOCAL_FIELD_MANAGER;
use handoff_kube::telemetry::BridgeMetrics;
use handoff_local::home::{DataVersions, DevHome, DevPorts, DevState, compatible};
use handoff_local::{
    Assets, ControlPlane, PlaneOptions, Postgres, StaticToken, Versions, install_crds, postgres,
};

/// The line `handoff dev` prints once everything is up (scripts wait for it).
pub const READY_LINE: &str = "handoff dev: ready";

/// The agent ClusterRoles, as committed for GitOps.
const AGENT_ROLES: &str = include_str!("../config/rbac/agent_roles.yaml");

/// The person running `handoff dev`: the plane's admin, with a static token
/// (kept in the state under this name) so that the kubeconfig's bearer
/// token can be forwarded to the bridge.
const DEV_ADMIN: &str = "admin";

/// A development identity: who it is, the group bound to its ClusterRole,
/// and the profile its MCP client config sends.
struct DevAgent {
    profile: &'static str,
    group: &'static str,
    cluster_role: &'static str,
}

const DEV_AGENTS: [DevAgent; 2] = [
    DevAgent {
        profile: "implement",
        group: "handoff:writers",
        cluster_role: "handoff-writer",
    },
    DevAgent {
        profile: "refine",
        group: "handoff:groomers",
        cluster_role: "handoff-groomer",
    },
];

/// Arguments of `handoff dev`.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Where handoff dev keeps its state across restarts: etcd data,
    /// certificates, dev tokens, PostgreSQL data, the kubeconfig and the MCP
    /// client configs.
    #[arg(
        long = "data-dir",
        visible_alias = "dir",
        env = "HANDOFF_DEV_DATA_DIR",
        default_value = ".local/dev",
        value_name = "DIR"
    )]
    pub data_dir: PathBuf,
    /// Start over: wipe the data directory first (every handoff of the local
    /// cluster is lost).
    #[arg(long)]
    pub fresh: bool,
}

/// Runs the local system until Ctrl-C; its state stays in the data
/// directory for the next run.
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let home = DevHome::open(&args.data_dir, args.fresh)?;
    let dir = home.dir().to_owned();
    let versions = Versions::pinned();
    let running = DataVersions {
        kubernetes: versions.kubernetes.clone(),
        etcd: versions.etcd.clone(),
    };
    let previous = home.load()?;
    if let Some(previous) = &previous {
        compatible(&previous.versions, &running, &dir).map_err(anyhow::Error::msg)?;
        eprintln!(
            "handoff dev: reusing {} (start over with --fresh)",
            dir.display()
        );
    }
    let assets = Assets::locate()?;
    let kept_ports = previous.as_ref().map(|p| p.ports).unwrap_or_default();
    let tokens: Vec<StaticToken> = DEV_AGENTS
        .iter()
        .map(|a| {
            let kept = previous
                .as_ref()
                .and_then(|p| p.tokens.get(a.profile).cloned());
            Ok(StaticToken {
                token: kept.map_or_else(random_token, Ok)?,
                user: format!("dev:{}", a.profile),
                groups: vec![a.group.into()],
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let admin_token = previous
        .as_ref()
        .and_then(|p| p.tokens.get(DEV_ADMIN).cloned())
        .map_or_else(random_token, Ok)?;
    let mut tokens = tokens;
    tokens.push(StaticToken {
        token: admin_token.clone(),
        user: format!("dev:{DEV_ADMIN}"),
        groups: vec!["system:masters".into()],
    });
    eprintln!(
        "handoff dev: starting etcd {} and kube-apiserver {} …",
        versions.etcd, versions.kubernetes
    );
    let options = PlaneOptions {
        static_tokens: tokens.clone(),
        keep: Some(home.control_plane()),
        preferred_ports: Some((kept_ports.etcd, kept_ports.apiserver)),
        ..PlaneOptions::default()
    };
    let plane = ControlPlane::start_with(assets.clone(), options).await?;
    let client = plane.client().await?;
    install_crds(&client).await?;
    install_agent_rbac(&client).await?;
    let shutdown = CancellationToken::new();
    let webhook_url = start_webhook(&client, &dir, shutdown.clone()).await?;

    let pg = if postgres::available() {
        eprintln!("handoff dev: starting PostgreSQL …");
        let kept = home.postgres();
        Some(tokio::task::block_in_place(|| {
            Postgres::start_kept(&kept, kept_ports.postgres)
        })?)
    } else {
        eprintln!("handoff dev: PostgreSQL binaries not found; running without the mirror");
        None
    };

    let database_url = pg.as_ref().map(Postgres::url);
    let (controller, metrics_url, metrics_port) = start_controller(
        client.clone(),
        database_url.clone(),
        kept_ports.metrics,
        shutdown.clone(),
    )
    .await?;
    let mirror = database_url
        .as_deref()
        .map(|url| handoff_mirror::Mirror::new(url, false))
        .transpose()?
        .map(Arc::new);
    let (bridge_url, bridge_port) =
        start_bridge(&plane, mirror, kept_ports.bridge, shutdown.clone()).await?;

    let (etcd_port, apiserver_port) = plane.ports();
    let ports = DevPorts {
        apiserver: apiserver_port,
        etcd: etcd_port,
        bridge: bridge_port,
        metrics: metrics_port,
        postgres: pg.as_ref().map_or(0, Postgres::port),
    };
    if previous.is_some() {
        for moved in moved_ports(&kept_ports, &ports) {
            eprintln!("handoff dev: {moved}; the kubeconfig and MCP configs were rewritten");
        }
    }
    home.save(&DevState {
        versions: running,
        ports,
        tokens: DEV_AGENTS
            .iter()
            .map(|a| a.profile)
            .chain([DEV_ADMIN])
            .zip(&tokens)
            .map(|(name, t)| (name.to_owned(), t.token.clone()))
            .collect(),
    })?;

    let kubeconfig = dir.join("kubeconfig");
    write_private(
        &kubeconfig,
        &serde_json::to_string_pretty(&with_token(plane.kubeconfig(), &admin_token))?,
    )?;
    let env_file = dir.join("env");
    std::fs::write(
        &env_file,
        env_script(
            &kubeconfig,
            &assets.dir,
            &bridge_url,
            pg.as_ref().map(Postgres::url).as_deref(),
        ),
    )?;
    for (agent, token) in DEV_AGENTS.iter().zip(&tokens) {
        let path = dir.join(format!("mcp-{}.json", agent.profile));
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&mcp_client_config(
                &bridge_url,
                &token.token,
                agent.profile,
            ))?,
        )?;
    }

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{READY_LINE} (Kubernetes {}, etcd {})",
        versions.kubernetes, versions.etcd
    )?;
    writeln!(out, "  kubeconfig: {}", kubeconfig.display())?;
    writeln!(out, "  mcp:        {bridge_url}")?;
    writeln!(out, "  controller: {metrics_url}")?;
    writeln!(out, "  webhook:    {webhook_url}")?;
    writeln!(out, "  data:       {}", dir.display())?;
    writeln!(out, "  logs:       {}", plane.dir().display())?;
    if let Some(pg) = &pg {
        writeln!(out, "  postgres:   {}", pg.url())?;
        writeln!(out, "  pg data:    {}", pg.dir().display())?;
    }
    writeln!(
        out,
        "\nIn another shell:\n  source {}\n  kubectl get handoffs",
        env_file.display()
    )?;
    let mirror = if pg.is_some() {
        " --postgres-url \"$DATABASE_URL\""
    } else {
        ""
    };
    writeln!(
        out,
        "\nThe console, as this plane's admin (docs/console.md):\n  source {} && cargo run -- console --open --namespace default{mirror}",
        env_file.display()
    )?;
    if pg.is_some() {
        writeln!(
            out,
            "\nThe history, as you (dev:{DEV_ADMIN}, this plane's admin: the kubeconfig's token, \
             through the bridge, which reviews your access):\n  source {} && handoff history KEY",
            env_file.display()
        )?;
    }
    writeln!(
        out,
        "\nMCP client configs (Claude Code: claude --mcp-config FILE, or copy one to .mcp.json):\n  {}  (profile implement)\n  {}  (profile refine)",
        dir.join("mcp-implement.json").display(),
        dir.join("mcp-refine.json").display()
    )?;
    writeln!(
        out,
        "\nYour handoffs, tokens and ports survive a restart; `handoff dev --fresh` starts over.\nPress Ctrl-C to stop."
    )?;
    out.flush()?;
    drop(out);

    handoff_kube::telemetry::shutdown_signal().await;
    eprintln!("handoff dev: stopping …");
    shutdown.cancel();
    match controller.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => eprintln!("handoff dev: the controller stopped with an error: {err:#}"),
        Err(err) => eprintln!("handoff dev: the controller task failed: {err}"),
    }
    drop(pg);
    plane.stop();
    eprintln!("handoff dev: stopped; the data stays in {}", dir.display());
    Ok(())
}

/// Pure: which ports of the previous run could not be had again (a port
/// of 0 was never used).
fn moved_ports(before: &DevPorts, now: &DevPorts) -> Vec<String> {
    [
        ("kube-apiserver", before.apiserver, now.apiserver),
        ("etcd", before.etcd, now.etcd),
        ("the MCP bridge", before.bridge, now.bridge),
        ("the controller metrics", before.metrics, now.metrics),
        ("PostgreSQL", before.postgres, now.postgres),
    ]
    .into_iter()
    .filter(|(_, old, new)| *old != 0 && old != new)
    .map(|(what, old, new)| format!("port {old} of {what} was taken, it now uses {new}"))
    .collect()
}

/// Applies the agent ClusterRoles and binds each dev group to its role.
async fn install_agent_rbac(client: &Client) -> anyhow::Result<()> {
    let params = PatchParams::apply(LOCAL_FIELD_MANAGER).force();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for role in serde_saphyr::from_str_multiple::<ClusterRole, Vec<_>>(AGENT_ROLES)? {
        roles
            .patch(&role.name_any(), &params, &Patch::Apply(&role))
            .await?;
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for agent in &DEV_AGENTS {
        let name = format!("handoff-dev-{}", agent.profile);
        let binding = ClusterRoleBinding {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: agent.cluster_role.into(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Group".into(),
                name: agent.group.into(),
                ..Default::default()
            }]),
        };
        bindings
            .patch(&name, &params, &Patch::Apply(&binding))
            .await?;
    }
    Ok(())
}

/// Serves the admission webhook in this process on a free loopback port
/// with a certificate for 127.0.0.1 from a CA made for this run (its files
/// in `<dir>/webhook/`), and registers config/webhook's configuration
/// pointed at it (replacing the previous run's); returns its URL.
async fn start_webhook(
    client: &Client,
    dir: &Path,
    shutdown: CancellationToken,
) -> anyhow::Result<String> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let tls = handoff_local::ServerTls::generate("handoff-dev-webhook-ca", &["127.0.0.1"])?;
    let tls_dir = dir.join("webhook");
    std::fs::create_dir_all(&tls_dir)?;
    let (cert_path, key_path) = (tls_dir.join("tls.crt"), tls_dir.join("tls.key"));
    write_private(&key_path, &tls.key)?;
    write_private(&cert_path, &tls.cert)?;
    let cert = handoff_kube::tls::ReloadingCert::load(&cert_path, &key_path)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("https://{}/validate", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(err) = handoff_webhook::serve(
            listener,
            cert.served(),
            handoff_webhook::WebhookMetrics::new(),
            shutdown,
        )
        .await
        {
            eprintln!("handoff dev: the admission webhook stopped: {err}");
        }
    });
    let mut configuration = handoff_webhook::registration::configuration()?;
    handoff_webhook::registration::point_at(&mut configuration, &url, Some(&tls.ca_cert))?;
    let configuration: ValidatingWebhookConfiguration = serde_json::from_value(configuration)?;
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(
        &configuration.name_any(),
        &PatchParams::apply(LOCAL_FIELD_MANAGER).force(),
        &Patch::Apply(&configuration),
    )
    .await?;
    Ok(url)
}

/// Writes `text` to `path`, readable by this user only.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// Starts the controller in this process (lease `handoff-controller` in
/// `default`, the mirror when `database_url` is set) with its metrics on a
/// loopback port (`preferred` when free); returns its task, the metrics URL
/// and port.
async fn start_controller(
    client: Client,
    database_url: Option<String>,
    preferred: u16,
    shutdown: CancellationToken,
) -> anyhow::Result<(tokio::task::JoinHandle<anyhow::Result<()>>, String, u16)> {
    use handoff_controller::{self as controller, ControllerMetrics, ControllerOptions};
    use handoff_core::time::SystemClock;
    // The flags' defaults: the Lease `handoff-controller` in `default`.
    let options = ControllerOptions {
        namespace_selector: handoff_core::names::UNCLAIMED_NAMESPACES.into(),
        lease_namespace: Some("default".into()),
        identity: Some("handoff-dev".into()),
        ..ControllerOptions::defaults()
    };
    let options = match &database_url {
        Some(url) => options.with_mirror(url),
        None => options,
    };
    let metrics = ControllerMetrics::new();
    let listener = bind_loopback(preferred).await?;
    let port = listener.local_addr()?.port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    metrics.serve(listener, shutdown.clone());
    let task = tokio::spawn(controller::run(
        client,
        options,
        Arc::new(SystemClock),
        metrics,
        shutdown,
    ));
    Ok((task, url, port))
}

/// A listener on 127.0.0.1:`preferred`, or on a free port when it is taken.
async fn bind_loopback(preferred: u16) -> std::io::Result<tokio::net::TcpListener> {
    match tokio::net::TcpListener::bind(("127.0.0.1", preferred)).await {
        Ok(listener) => Ok(listener),
        Err(_) => tokio::net::TcpListener::bind(("127.0.0.1", 0)).await,
    }
}

/// Starts the HTTP bridge on a loopback port (`preferred` when free);
/// returns its URL and port.
async fn start_bridge(
    plane: &ControlPlane,
    mirror: Option<Arc<handoff_mirror::Mirror>>,
    preferred: u16,
    shutdown: CancellationToken,
) -> anyhow::Result<(String, u16)> {
    let config = kube::Config::from_custom_kubeconfig(
        plane.kubeconfig().clone(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let bridge = Client::try_from(config.clone())?;
    let metrics = BridgeMetrics::new();
    let settings = handoff_bridge::auth::ResolverSettings {
        capacity: 64,
        ttl: Duration::from_secs(60),
        rejected_capacity: 1024,
        rejected_ttl: Duration::from_secs(10),
        concurrent_reviews: handoff_bridge::DEFAULT_CONCURRENT_REVIEWS,
    };
    let resolver = Arc::new(TokenResolver::new(
        config,
        bridge.clone(),
        Some("default"),
        settings,
        metrics.clone(),
    )?);
    let listener = bind_loopback(preferred).await?;
    let port = listener.local_addr()?.port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let options = handoff_bridge::http::HttpOptions {
        allowed_hosts: handoff_bridge::allowed_hosts(&[]),
        budgets: Arc::new(handoff_kube::settings::Budgets::new(
            bridge.clone(),
            handoff_kube::settings::READ_TIMEOUT,
        )),
        offers: handoff_bridge::call::OfferSettings {
            acting: Some(bridge.clone()),
            active_selector: handoff_core::offers::DEFAULT_ACTIVE_SELECTOR.into(),
        },
        mirror,
        limits: handoff_bridge::limits::Limits::default(),
        tls: None,
    };
    tokio::spawn(async move {
        if let Err(err) =
            handoff_bridge::http::serve(listener, resolver, metrics, options, shutdown).await
        {
            tracing::error!(error = %err, "the dev bridge stopped");
        }
    });
    Ok((url, port))
}

/// An MCP client configuration (Claude Code's `.mcp.json` shape).
fn mcp_client_config(url: &str, token: &str, profile: &str) -> serde_json::Value {
    serde_json::json!({"mcpServers": {"handoff": {
        "type": "http",
        "url": url,
        "headers": {"Authorization": format!("Bearer {token}"), "X-Handoff-Profile": profile},
    }}})
}

/// 32 hex characters from the kernel's randomness.
fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Pure: `admin` with every user authenticating by the bearer `token`
/// instead of a client certificate (the same cluster and context).
fn with_token(admin: &kube::config::Kubeconfig, token: &str) -> kube::config::Kubeconfig {
    let mut kubeconfig = admin.clone();
    for user in &mut kubeconfig.auth_infos {
        user.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_owned().into()),
            ..kube::config::AuthInfo::default()
        });
    }
    kubeconfig
}

/// A shell snippet that points `kubectl` at the local control plane and
/// `handoff history | diff | search` at the bridge (`DATABASE_URL` is for
/// the console and other tools; the SRE commands do not read it).
fn env_script(
    kubeconfig: &Path,
    bin_dir: &Path,
    bridge_url: &str,
    database_url: Option<&str>,
) -> String {
    let mut script = format!(
        "export KUBECONFIG='{}'\nexport PATH='{}':\"$PATH\"\nexport HANDOFF_BRIDGE_URL='{bridge_url}'\n",
        kubeconfig.display(),
        bin_dir.display()
    );
    if let Some(url) = database_url {
        script.push_str(&format!("export DATABASE_URL='{url}'\n"));
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_script_exports_kubeconfig_path_bridge_and_database() {
        let bridge = "http://127.0.0.1:7070/mcp";
        let cases = [
            (
                Some("postgres://x"),
                "export KUBECONFIG='/a/kubeconfig'\nexport PATH='/bin/dir':\"$PATH\"\n\
                 export HANDOFF_BRIDGE_URL='http://127.0.0.1:7070/mcp'\n\
                 export DATABASE_URL='postgres://x'\n",
            ),
            (
                None,
                "export KUBECONFIG='/a/kubeconfig'\nexport PATH='/bin/dir':\"$PATH\"\n\
                 export HANDOFF_BRIDGE_URL='http://127.0.0.1:7070/mcp'\n",
            ),
        ];
        for (database, want) in cases {
            let s = env_script(
                Path::new("/a/kubeconfig"),
                Path::new("/bin/dir"),
                bridge,
                database,
            );
            assert_eq!(s, want);
            // The SRE commands' mirror variable stays unset: with it and the
            // bridge both set they would refuse to choose.
            assert!(!s.contains("HANDOFF_POSTGRES_URL"), "{s}");
        }
    }

    /// The written kubeconfig authenticates with the admin's token, which
    /// the SRE commands forward to the bridge; no certificate is left.
    #[test]
    fn the_kubeconfig_carries_the_admin_token() {
        let admin: kube::config::Kubeconfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "admin"}}],
            "users": [{"name": "admin", "user": {
                "client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}],
        }))
        .expect("kubeconfig");
        let written = serde_json::to_value(with_token(&admin, "s3cret")).expect("json");
        assert_eq!(
            written["users"],
            serde_json::json!([{"name": "admin", "user": {"token": "s3cret"}}])
        );
        assert_eq!(
            written["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:1"
        );
        assert_eq!(written["current-context"], "c");
    }

    #[test]
    fn client_config_carries_token_and_profile() {
        let c = mcp_client_config("http://127.0.0.1:1/mcp", "t0k", "refine");
        let server = &c["mcpServers"]["handoff"];
        assert_eq!(server["headers"]["Authorization"], "Bearer t0k");
        assert_eq!(server["headers"]["X-Handoff-Profile"], "refine");
        assert_eq!(server["url"], "http://127.0.0.1:1/mcp");
    }

    #[test]
    fn the_embedded_roles_parse() {
        let roles =
            serde_saphyr::from_str_multiple::<ClusterRole, Vec<_>>(AGENT_ROLES).expect("roles");
        let names: Vec<_> = roles.iter().map(|r| r.name_any()).collect();
        assert_eq!(names, ["handoff-writer", "handoff-groomer"]);
    }

    #[test]
    fn moved_ports_name_what_moved() {
        let before = DevPorts {
            apiserver: 1,
            etcd: 2,
            bridge: 3,
            metrics: 4,
            postgres: 0,
        };
        let mut now = before;
        assert_eq!(moved_ports(&before, &now), Vec::<String>::new());
        now.bridge = 30;
        now.postgres = 50;
        assert_eq!(
            moved_ports(&before, &now),
            ["port 3 of the MCP bridge was taken, it now uses 30"]
        );
    }

    #[test]
    fn tokens_are_random_hex() {
        let a = random_token().expect("token");
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_token().expect("token"));
    }
}
