//! The MCP-to-apiserver bridge (`handoff mcp`): ten tools over stdio or
//! streamable HTTP — the contract's four, `get_handoff`, `write_handoff`,
//! `list_handoffs` and `delete_handoff`, onto `Handoff` objects; the offer
//! tools `offer_handoff`, `list_offers` and `reject_offer` onto
//! `HandoffOffer`s; and `search_handoffs`, `list_revisions` and
//! `diff_handoff`, which read the PostgreSQL mirror (search also scans the
//! apiserver without it).
//!
//! The bridge is thin and stateless: it keeps no handoff state, acts with
//! the caller's own credentials (over HTTP the agent's bearer token is
//! passed through; over stdio the process's kubeconfig or in-cluster
//! identity), and lets the apiserver's RBAC and the CRD's schema be the
//! authority. Profiles ([`profiles`]) decide which tools an agent sees.
//! The one exception is the offer flow: after the caller's token has
//! created (or read) an offer, the bridge's own identity — a Role in the
//! namespace it serves — writes the offer's phase and its Events and checks
//! the agent's Jobs, so agents need no right to move offers
//! (docs/security.md).
//!
//! - [`tools`]: one module per tool (arguments, validation, handler, result,
//!   text) and the table `tools/list` and `tools/call` read; beside them the
//!   leaves every tool imports: the contract (a tool, its call context,
//!   errors, RBAC mapping), the definition's shape, the shared views.
//! - [`call`]: the one dispatch (profile gate, timeout, handler) and the
//!   services it hands each call.
//! - [`profiles`]: which profiles see which tools (pure).
//! - [`resources`]: handoffs as resources `handoff://{handoff_key}` (pure).
//! - [`prompts`]: the prompt `continue`: preamble and handoff (pure).
//! - [`auth`]: callers, token passthrough, SelfSubjectReview, caches,
//!   the namespace of a call.
//! - [`headers`]: `handoff mcp-headers`, the request headers for clients
//!   that ask a command for them.
//! - [`server`]: the rmcp `ServerHandler`.
//! - [`http`]: the streamable HTTP transport: request limits, authentication.
//! - [`fair`]: each caller's fair share of the requests in flight.
//! - [`limits`]: the HTTP limits (flags, defaults).
//! - [`listener`]: HTTP/1.1 connections, plain or TLS, with their timeouts
//!   (the console serves its pages through it too).
//! - [`stdio`]: the stdio transport, answering malformed lines.
//! - [`jsonrpc`]: which frames rmcp reads, and the one answer to the rest (pure).

pub mod auth;
pub mod call;
pub mod fair;
pub mod headers;
pub mod http;
pub(crate) mod jsonrpc;
pub mod limits;
pub mod listener;
pub mod profiles;
pub(crate) mod prompts;
pub(crate) mod resources;
pub(crate) mod server;
pub mod stdio;
pub mod tools;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use self::auth::{Caller, ResolverSettings, TokenResolver};
use self::call::OfferSettings;
use self::limits::Limits;
use self::profiles::Profile;
use self::server::HandoffServer;
use handoff_core::time::{parse_duration, positive_duration};
use handoff_kube::telemetry::{BridgeMetrics, serve_metrics};
use handoff_mirror::dsn::PostgresArgs;

/// Default `--max-concurrent-reviews`.
pub const DEFAULT_CONCURRENT_REVIEWS: usize = 4;

/// Arguments of `handoff mcp`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "listen"])))]
pub struct McpArgs {
    /// Serve one agent over stdin/stdout, with this process's kubeconfig or
    /// in-cluster identity.
    #[arg(long)]
    pub stdio: bool,
    /// Serve streamable HTTP at http://ADDR/mcp, or https:// with
    /// --tls-cert (callers send bearer tokens).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Serve HTTPS with this PEM certificate chain (re-read when it changes).
    #[arg(
        long,
        env = "HANDOFF_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        env = "HANDOFF_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// How often the TLS files are checked for a renewed certificate.
    #[arg(long, env = "HANDOFF_TLS_RELOAD_INTERVAL", default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub tls_reload_interval: Duration,
    /// Request and connection limits of --listen.
    #[command(flatten)]
    pub limits: Limits,
    /// The agent profile (stdio). Over HTTP the caller's ServiceAccount label
    /// `handoff.dev/profile` or the `X-Handoff-Profile` header names it.
    #[arg(long, env = "HANDOFF_PROFILE", default_value = "")]
    pub profile: String,
    /// Namespace of the handoffs. Over stdio the default is the
    /// kubeconfig's (or the pod's). Over HTTP, set it to serve that one
    /// namespace only; unset, each call uses the namespace of the caller's
    /// ServiceAccount, or the one its path names (`/mcp/ns/<namespace>`),
    /// and RBAC decides there (one bridge for many teams).
    #[arg(long, env = "HANDOFF_NAMESPACE")]
    pub namespace: Option<String>,
    /// A Host header value to accept besides loopback (repeatable), e.g. the
    /// Service name `handoff-bridge.handoff-system.svc`.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// Serve /metrics, /healthz and /readyz on this address.
    #[arg(long, env = "HANDOFF_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Label selector of the Jobs that make a destination agent active
    /// (offers to it are refused, pending ones superseded); `{to}` and
    /// `{project}` are replaced.
    #[arg(long, env = "HANDOFF_ACTIVE_AGENT_SELECTOR", default_value = handoff_core::offers::DEFAULT_ACTIVE_SELECTOR)]
    pub active_agent_selector: String,
    /// Most callers whose client and identity are cached.
    #[arg(long, default_value_t = 1024)]
    pub token_cache_size: usize,
    /// How long a cached caller identity is trusted, in seconds.
    #[arg(long, default_value_t = 60)]
    pub token_cache_ttl: u64,
    /// Most rejected tokens remembered (by hash), each answered 401 without
    /// asking the apiserver again.
    #[arg(
        long,
        env = "HANDOFF_REJECTED_TOKEN_CACHE_SIZE",
        default_value_t = 8192
    )]
    pub rejected_token_cache_size: usize,
    /// How long a rejected token is remembered.
    #[arg(long, env = "HANDOFF_REJECTED_TOKEN_TTL", default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub rejected_token_ttl: Duration,
    /// Most identity reviews (SelfSubjectReviews of new tokens) in progress
    /// at once; requests with further new tokens wait their turn. Known
    /// callers never wait.
    #[arg(long, env = "HANDOFF_MAX_CONCURRENT_REVIEWS", default_value_t = DEFAULT_CONCURRENT_REVIEWS, value_parser = limits::at_least_one)]
    pub max_concurrent_reviews: usize,
    /// Answer `list_handoffs` and `get_handoff{revision}` from the PostgreSQL
    /// mirror the controller keeps (each call first checks the caller's
    /// RBAC with a SelfSubjectAccessReview). Off when unset.
    #[command(flatten)]
    pub postgres: PostgresArgs,
}

/// Where the bridge reads the mirror's URL from (after `--postgres-url`
/// and `--postgres-url-file`). Not `DATABASE_URL`, which the controller
/// also reads: a stdio bridge runs in an agent's environment, where
/// `DATABASE_URL` usually names the application's own database.
pub const POSTGRES_URL_VARS: [&str; 1] = ["HANDOFF_POSTGRES_URL"];

/// Runs `handoff mcp`.
pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    // The mirror's URL first: a wrong one stops the process before it
    // talks to anyone.
    let mirror = args
        .postgres
        .resolve(&POSTGRES_URL_VARS, |name| std::env::var(name).ok())?
        .map(|url| handoff_mirror::Mirror::new(&url, false)?.with_pool(args.postgres.pool()))
        .transpose()?
        .map(Arc::new);
    if let Some(mirror) = &mirror {
        tracing::info!(postgres = %mirror.describe(), "listing from the PostgreSQL mirror");
    }
    let config = handoff_kube::proxy::infer().await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let metrics = BridgeMetrics::new();
    let shutdown = CancellationToken::new();
    if let Some(addr) = args.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "handoff mcp: metrics on http://{}/metrics",
            listener.local_addr()?
        );
        let stop = shutdown.clone();
        tokio::spawn(serve_metrics(listener, metrics.clone(), async move {
            stop.cancelled().await
        }));
    }
    if args.stdio {
        let profile = Profile::new(&args.profile);
        if tools::for_profile(&profile).next().is_none() {
            tracing::warn!(profile = %profile.as_str(), "this profile sees no handoff tool (set --profile or HANDOFF_PROFILE)");
        }
        let client = kube::Client::try_from(auth::with_timeouts(config))?;
        let caller = Arc::new(Caller::new(client, &namespace, profile));
        let offers = OfferSettings {
            acting: None,
            active_selector: args.active_agent_selector.clone(),
        };
        let service = HandoffServer::for_caller(caller, metrics, offers)
            .with_mirror(mirror)
            .serve(stdio::guarded_stdio())
            .await?;
        service.waiting().await?;
        shutdown.cancel();
        return Ok(());
    }
    let addr = args
        .listen
        .ok_or_else(|| anyhow::anyhow!("--listen ADDR or --stdio is required"))?;
    args.limits.validate().map_err(anyhow::Error::msg)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(handoff_kube::tls::reloading_acceptor(
            cert,
            key,
            args.tls_reload_interval,
            &shutdown,
        )?),
        _ => None,
    };
    let bridge = kube::Client::try_from(config.clone())?;
    let acting = bridge.clone();
    let settings = ResolverSettings {
        capacity: args.token_cache_size,
        ttl: Duration::from_secs(args.token_cache_ttl),
        rejected_capacity: args.rejected_token_cache_size,
        rejected_ttl: args.rejected_token_ttl,
        concurrent_reviews: args.max_concurrent_reviews,
    };
    let resolver = Arc::new(TokenResolver::new(
        config,
        bridge,
        args.namespace.as_deref(),
        settings,
        metrics.clone(),
    )?);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let serves = match &args.namespace {
        Some(namespace) => format!("namespace {namespace}"),
        None => "each caller's namespace; /mcp/ns/<namespace> names one".to_owned(),
    };
    eprintln!(
        "handoff mcp: serving {scheme}://{}/mcp ({serves})",
        listener.local_addr()?
    );
    let stop = shutdown.clone();
    tokio::spawn(async move {
        handoff_kube::telemetry::shutdown_signal().await;
        stop.cancel();
    });
    let options = http::HttpOptions {
        allowed_hosts: allowed_hosts(&args.allowed_hosts),
        budgets: Arc::new(
            handoff_kube::settings::Budgets::new(
                acting.clone(),
                handoff_kube::settings::READ_TIMEOUT,
            )
            .counted(metrics.settings_reads().clone()),
        ),
        offers: OfferSettings {
            acting: Some(acting),
            active_selector: args.active_agent_selector.clone(),
        },
        mirror,
        limits: args.limits.clone(),
        tls,
    };
    http::serve(listener, resolver, metrics, options, shutdown).await?;
    Ok(())
}

/// Loopback plus the configured hosts.
pub fn allowed_hosts(extra: &[String]) -> Vec<String> {
    http::LOOPBACK_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .chain(extra.iter().cloned())
        .collect()
}
