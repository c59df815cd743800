//! `handoff dev`: the embedded default for a laptop with no cluster.
//!
//! Starts the local control plane (and PostgreSQL when its binaries are
//! installed), installs the CRDs and the agent ClusterRoles, starts the
//! controller (with the PostgreSQL mirror when PostgreSQL runs; its metrics
//! on a loopback port) and the MCP bridge on a loopback port (listing from
//! the mirror when there is one), writes `<dir>/kubeconfig`, `<dir>/env` and
//! ready-to-use MCP client configs, prints how to use them, and runs in the
//! foreground until Ctrl-C or SIGTERM, then stops everything (the processes
//! also die with this one if it is killed).
//!
//! Agents authenticate to the bridge with static dev tokens (the apiserver's
//! `--token-auth-file`): `dev:implement` in group `handoff:writers` (bound
//! to `handoff-writer`) and `dev:refine` in `handoff:groomers` (bound to
//! `handoff-groomer`), fresh random tokens on every start.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::local::{
    Assets, ControlPlane, PlaneOptions, Postgres, StaticToken, Versions, install_crds, postgres,
};
use crate::mcp::auth::TokenResolver;
use crate::names::{CONTROLLER_FIELD_MANAGER, LOCAL_FIELD_MANAGER};
use crate::telemetry::BridgeMetrics;

/// The line `handoff dev` prints once everything is up (scripts wait for it).
pub const READY_LINE: &str = "handoff dev: ready";

/// The agent ClusterRoles, as committed for GitOps.
const AGENT_ROLES: &str = include_str!("../config/rbac/agent_roles.yaml");

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

/// Runs the local system until Ctrl-C.
pub async fn run(dir: PathBuf) -> anyhow::Result<()> {
    std::fs::create_dir_all(&dir)?;
    let dir = std::path::absolute(&dir)?;
    let versions = Versions::pinned();
    let assets = Assets::locate()?;
    let tokens: Vec<StaticToken> = DEV_AGENTS
        .iter()
        .map(|a| {
            Ok(StaticToken {
                token: random_token()?,
                user: format!("dev:{}", a.profile),
                groups: vec![a.group.into()],
            })
        })
        .collect::<anyhow::Result<_>>()?;
    eprintln!(
        "handoff dev: starting etcd {} and kube-apiserver {} …",
        versions.etcd, versions.kubernetes
    );
    let options = PlaneOptions {
        parent: Some(dir.clone()),
        static_tokens: tokens.clone(),
    };
    let plane = ControlPlane::start_with(assets.clone(), options).await?;
    let client = plane.client().await?;
    install_crds(&client).await?;
    install_agent_rbac(&client).await?;

    let pg = if postgres::available() {
        eprintln!("handoff dev: starting PostgreSQL …");
        Some(tokio::task::block_in_place(|| Postgres::start_in(&dir))?)
    } else {
        eprintln!("handoff dev: PostgreSQL binaries not found; running without the mirror");
        None
    };

    let shutdown = CancellationToken::new();
    let database_url = pg.as_ref().map(Postgres::url);
    let (controller, metrics_url) =
        start_controller(client.clone(), database_url.clone(), shutdown.clone()).await?;
    let mirror = database_url
        .as_deref()
        .map(|url| crate::mirror::Mirror::new(url, false))
        .transpose()?
        .map(Arc::new);
    let bridge_url = start_bridge(&plane, mirror, shutdown.clone()).await?;

    let kubeconfig = dir.join("kubeconfig");
    std::fs::copy(plane.kubeconfig_path(), &kubeconfig)?;
    let env_file = dir.join("env");
    std::fs::write(
        &env_file,
        env_script(
            &kubeconfig,
            &assets.dir,
            pg.as_ref().map(Postgres::url).as_deref(),
        ),
    )?;
    let mut written = vec![kubeconfig.clone(), env_file.clone()];
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
        written.push(path);
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
    writeln!(
        out,
        "\nMCP client configs (Claude Code: copy one to .mcp.json):\n  {}  (profile implement)\n  {}  (profile refine)",
        dir.join("mcp-implement.json").display(),
        dir.join("mcp-refine.json").display()
    )?;
    writeln!(out, "\nPress Ctrl-C to stop.")?;
    out.flush()?;
    drop(out);

    crate::telemetry::shutdown_signal().await;
    eprintln!("handoff dev: stopping …");
    shutdown.cancel();
    match controller.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => eprintln!("handoff dev: the controller stopped with an error: {err:#}"),
        Err(err) => eprintln!("handoff dev: the controller task failed: {err}"),
    }
    drop(pg);
    plane.stop();
    for path in written {
        let _ = std::fs::remove_file(path);
    }
    eprintln!("handoff dev: stopped");
    Ok(())
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

/// Starts the controller in this process (lease `handoff-controller` in
/// `default`, the mirror when `database_url` is set) with its metrics on a
/// free loopback port; returns its task and the metrics URL.
async fn start_controller(
    client: Client,
    database_url: Option<String>,
    shutdown: CancellationToken,
) -> anyhow::Result<(tokio::task::JoinHandle<anyhow::Result<()>>, String)> {
    use crate::controller::{self, ControllerMetrics, ControllerOptions};
    use crate::time::SystemClock;
    let options = ControllerOptions {
        namespace: None,
        lease: controller::leader::LeaseConfig {
            name: CONTROLLER_FIELD_MANAGER.into(),
            namespace: "default".into(),
            identity: "handoff-dev".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        },
        concurrency: 8,
        postgres_url: database_url,
        resync_interval: Duration::from_secs(300),
        groom_interval: Duration::from_secs(60),
        ttl: Arc::new(crate::schedule::ttl::DefaultTtl(None)),
        active_agent_selector: crate::offers::decision::DEFAULT_ACTIVE_SELECTOR.into(),
        history: crate::mirror::Retention::default(),
    };
    let metrics = ControllerMetrics::new();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}/metrics", listener.local_addr()?);
    let (served, ready, live, stop) = (
        metrics.clone(),
        metrics.clone(),
        metrics.clone(),
        shutdown.clone(),
    );
    tokio::spawn(crate::telemetry::serve_endpoints(
        listener,
        Arc::new(move || served.encode()),
        Arc::new(move || ready.is_ready()),
        Arc::new(move || live.live()),
        async move { stop.cancelled().await },
    ));
    let task = tokio::spawn(controller::run(
        client,
        options,
        Arc::new(SystemClock),
        metrics,
        shutdown,
    ));
    Ok((task, url))
}

/// Starts the HTTP bridge on a free loopback port; returns its URL.
async fn start_bridge(
    plane: &ControlPlane,
    mirror: Option<Arc<crate::mirror::Mirror>>,
    shutdown: CancellationToken,
) -> anyhow::Result<String> {
    let config = kube::Config::from_custom_kubeconfig(
        plane.kubeconfig().clone(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let bridge = Client::try_from(config.clone())?;
    let metrics = BridgeMetrics::new();
    let settings = crate::mcp::auth::ResolverSettings {
        capacity: 64,
        ttl: Duration::from_secs(60),
        rejected_capacity: 1024,
        rejected_ttl: Duration::from_secs(10),
        concurrent_reviews: crate::mcp::DEFAULT_CONCURRENT_REVIEWS,
    };
    let resolver = Arc::new(TokenResolver::new(
        config,
        bridge.clone(),
        "default",
        settings,
        metrics.clone(),
    )?);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let options = crate::mcp::http::HttpOptions {
        allowed_hosts: crate::mcp::allowed_hosts(&[]),
        offers: crate::mcp::call::OfferSettings {
            reader: Some(bridge.clone()),
            active_selector: crate::offers::decision::DEFAULT_ACTIVE_SELECTOR.into(),
        },
        mirror,
        limits: crate::mcp::limits::Limits::default(),
        tls: None,
    };
    tokio::spawn(async move {
        if let Err(err) =
            crate::mcp::http::serve(listener, resolver, metrics, options, shutdown).await
        {
            tracing::error!(error = %err, "the dev bridge stopped");
        }
    });
    Ok(url)
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

/// A shell snippet that points `kubectl` at the local control plane.
fn env_script(kubeconfig: &Path, bin_dir: &Path, database_url: Option<&str>) -> String {
    let mut script = format!(
        "export KUBECONFIG='{}'\nexport PATH='{}':\"$PATH\"\n",
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
    fn env_script_exports_kubeconfig_path_and_database() {
        let s = env_script(
            Path::new("/a/kubeconfig"),
            Path::new("/bin/dir"),
            Some("postgres://x"),
        );
        assert!(s.contains("export KUBECONFIG='/a/kubeconfig'"));
        assert!(s.contains("export PATH='/bin/dir':\"$PATH\""));
        assert!(s.contains("export DATABASE_URL='postgres://x'"));
        assert!(!env_script(Path::new("/k"), Path::new("/b"), None).contains("DATABASE_URL"));
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
    fn tokens_are_random_hex() {
        let a = random_token().expect("token");
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_token().expect("token"));
    }
}
