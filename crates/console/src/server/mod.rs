//! `handoff console`: the server of the pages. One code path, two front
//! doors ([`door`]): on a laptop, the person's kubeconfig behind a one-time
//! link and a session cookie ([`secret`]); in the cluster, the bearer token
//! an authenticating proxy forwards. Either way every read is made as the
//! person (their kube client, or a client carrying their token), so RBAC
//! decides what a page shows.
//!
//! - [`guard`]: Host, Origin, CSRF and the security headers (pure);
//! - [`door`]: who is asking, as a [`crate::model::Viewer`] and a caller;
//! - [`router`]: the routes, the middleware, the answers;
//! - [`pages`], [`actions`], [`live`]: the handlers (reads, the confirmed
//!   actions and export, Server-Sent Events);
//! - [`browser`]: opening the link without putting the secret in a
//!   command line.
//!
//! Connections are served by the bridge's listener
//! (`handoff_bridge::listener::serve`): its connection limit, header and
//! idle timeouts and graceful shutdown.

mod actions;
mod browser;
mod door;
mod guard;
mod live;
mod pages;
mod router;
mod secret;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tokio_util::sync::CancellationToken;

use handoff_bridge::auth::{ResolverSettings, TokenResolver, with_timeouts};
use handoff_bridge::call::{OfferSettings, Services};
use handoff_bridge::limits::Limits;
use handoff_core::time::positive_duration;
use handoff_kube::telemetry::BridgeMetrics;
use handoff_mirror::dsn::PostgresArgs;

use self::door::Front;
use self::guard::{CsrfKey, Hosts};

/// Where the console listens on a laptop unless told: loopback, a free port.
const LAPTOP_LISTEN: &str = "127.0.0.1:0";

/// Arguments of `handoff console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Serve behind an authenticating proxy that forwards
    /// `Authorization: Bearer <token>` (e.g. oauth2-proxy): every page is
    /// read as the bearer of that token. Without it the console runs on a
    /// laptop as the kubeconfig's user, behind a one-time sign-in link.
    #[arg(long)]
    pub behind_proxy: bool,
    /// Address to listen on. On a laptop a loopback address (default
    /// 127.0.0.1 and a free port); behind a proxy required, e.g.
    /// 0.0.0.0:8080.
    #[arg(long, env = "HANDOFF_CONSOLE_LISTEN", value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// A Host header value to accept besides loopback with the bound port
    /// (repeatable; behind a proxy): `name` for any port or `name:port`,
    /// e.g. the address people open, `console.example.com`.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "behind_proxy")]
    pub allowed_hosts: Vec<String>,
    /// A namespace the front page looks in (repeatable); on a laptop the
    /// kubeconfig context's namespace too. Only those where the person may
    /// list handoffs are shown.
    #[arg(
        long = "namespace",
        value_name = "NAMESPACE",
        env = "HANDOFF_CONSOLE_NAMESPACES",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,
    /// Open the link in the browser (through a file only you can read, so
    /// the secret is in no command line); by default it is printed.
    #[arg(long, conflicts_with = "behind_proxy")]
    pub open: bool,
    /// Most live-update streams (Server-Sent Events) open at once.
    #[arg(long, default_value_t = 256, value_parser = handoff_bridge::limits::at_least_one)]
    pub max_live_streams: usize,
    /// Most live-update streams of one person open at once (a browser tab
    /// showing a list or a handoff holds one).
    #[arg(long, default_value_t = 16, value_parser = handoff_bridge::limits::at_least_one)]
    pub max_live_streams_per_person: usize,
    /// Most connections open at once; further ones wait in the listen
    /// backlog. Each open live page holds one.
    #[arg(long, default_value_t = 1024, value_parser = handoff_bridge::limits::at_least_one)]
    pub max_connections: usize,
    /// Longest a page may take to start its answer; then 503.
    #[arg(long, default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
    /// Longest a connection may wait for a read or a write to make progress;
    /// live streams send a keep-alive every quarter of it.
    #[arg(long, default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub idle_timeout: Duration,
    /// Label selector of the Jobs that make a destination agent active (as
    /// `handoff mcp`'s).
    #[arg(long, env = "HANDOFF_ACTIVE_AGENT_SELECTOR", default_value = handoff_core::offers::DEFAULT_ACTIVE_SELECTOR)]
    pub active_agent_selector: String,
    /// Read revisions, diffs and search from the PostgreSQL mirror (each
    /// read first checks the person's RBAC). Off when unset.
    #[command(flatten)]
    pub postgres: PostgresArgs,
}

/// Refuses a listen address that does not fit the mode: a laptop console
/// serves this machine only.
fn listen_address(args: &ConsoleArgs) -> anyhow::Result<SocketAddr> {
    match (args.behind_proxy, args.listen) {
        (true, Some(addr)) => Ok(addr),
        (true, None) => Err(anyhow::anyhow!(
            "--listen: behind a proxy the address is required (rule: the proxy must know where the console is), e.g. --listen 0.0.0.0:8080"
        )),
        (false, Some(addr)) if !addr.ip().is_loopback() => Err(anyhow::anyhow!(
            "--listen {addr}: on a laptop the console listens on a loopback address only (rule: a link on your machine must not be reachable from others); use 127.0.0.1:PORT, or --behind-proxy for a shared console"
        )),
        (false, Some(addr)) => Ok(addr),
        (false, None) => Ok(LAPTOP_LISTEN
            .parse()
            .unwrap_or_else(|_| unreachable!("a literal socket address"))),
    }
}

/// The limits of the bridge's listener the console sets.
fn limits(args: &ConsoleArgs) -> anyhow::Result<Limits> {
    let limits = Limits {
        max_connections: args.max_connections,
        request_timeout: args.request_timeout,
        idle_timeout: args.idle_timeout,
        ..Limits::default()
    };
    anyhow::ensure!(
        limits.idle_timeout >= limits.request_timeout,
        "--idle-timeout ({:?}) must be at least --request-timeout ({:?}): a connection waits without reads or writes while a page is read",
        limits.idle_timeout,
        limits.request_timeout
    );
    Ok(limits)
}

/// The namespaces the front page looks in: the flags', then the
/// context's, each once.
fn candidates(flags: &[String], context: Option<&str>) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for namespace in flags.iter().map(String::as_str).chain(context) {
        let namespace = namespace.trim();
        if !namespace.is_empty() && !all.iter().any(|n| n == namespace) {
            all.push(namespace.to_owned());
        }
    }
    all
}

/// Runs `handoff console` until Ctrl-C or SIGTERM.
pub async fn run(args: ConsoleArgs) -> anyhow::Result<()> {
    let addr = listen_address(&args)?;
    let limits = limits(&args)?;
    let mirror = args
        .postgres
        .resolve(&handoff_bridge::POSTGRES_URL_VARS, |name| {
            std::env::var(name).ok()
        })?
        .map(|url| handoff_mirror::Mirror::new(&url, false)?.with_pool(args.postgres.pool()))
        .transpose()?
        .map(Arc::new);
    let config = handoff_kube::proxy::infer().await?;
    let own = kube::Client::try_from(with_timeouts(config.clone()))?;
    let (front, context, acting, link) = if args.behind_proxy {
        let settings = ResolverSettings {
            capacity: 1024,
            ttl: Duration::from_secs(60),
            rejected_capacity: 8192,
            rejected_ttl: Duration::from_secs(10),
            concurrent_reviews: handoff_bridge::DEFAULT_CONCURRENT_REVIEWS,
        };
        let resolver =
            TokenResolver::new(config, own.clone(), None, settings, BridgeMetrics::new())?;
        (
            Front::proxy(Arc::new(resolver)),
            None,
            Some(own.clone()),
            None,
        )
    } else {
        let context = config.default_namespace.clone();
        let (secret, front) = Front::laptop(own.clone())?;
        (front, Some(context), None, Some(secret))
    };
    let services = Services {
        mirror,
        offers: OfferSettings {
            acting,
            active_selector: args.active_agent_selector.clone(),
        },
        budgets: Arc::new(handoff_kube::settings::Budgets::new(
            own,
            handoff_kube::settings::READ_TIMEOUT,
        )),
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Arc::new(router::App {
        front,
        hosts: Hosts {
            port: bound.port(),
            extra: args.allowed_hosts.clone(),
        },
        csrf: CsrfKey::generate()?,
        services,
        candidates: candidates(&args.namespaces, context.as_deref()),
        live: live::Bounds::new(args.max_live_streams, args.max_live_streams_per_person),
        keep_alive: args.idle_timeout / 4,
    });
    let shown = if bound.ip().is_unspecified() {
        format!("http://127.0.0.1:{}", bound.port())
    } else {
        format!("http://{bound}")
    };
    if let Some(secret) = link {
        let url = format!("{shown}{}?token={secret}", crate::routes::LOGIN);
        eprintln!("handoff console: open {url}");
        if args.open {
            browser::open(&url)?;
        }
    }
    eprintln!("handoff console listening on {shown}");
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        handoff_kube::telemetry::shutdown_signal().await;
        stop.cancel();
    });
    let router = router::router(app, &limits);
    handoff_bridge::listener::serve(listener, router, None, &limits, shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ConsoleArgs,
    }

    fn parse(flags: &[&str]) -> Result<ConsoleArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("console").chain(flags.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn listen_addresses() {
        let cases: [(&[&str], Result<&str, &str>); 6] = [
            (&[], Ok("127.0.0.1:0")),
            (&["--listen", "127.0.0.1:8080"], Ok("127.0.0.1:8080")),
            (&["--listen", "[::1]:8080"], Ok("[::1]:8080")),
            (&["--listen", "0.0.0.0:8080"], Err("loopback address only")),
            (&["--behind-proxy"], Err("the address is required")),
            (
                &["--behind-proxy", "--listen", "0.0.0.0:8080"],
                Ok("0.0.0.0:8080"),
            ),
        ];
        for (flags, want) in cases {
            let args = parse(flags).expect("flags parse");
            let got = listen_address(&args).map(|a| a.to_string());
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{flags:?}"),
                (Err(err), Err(want)) => {
                    let err = err.to_string();
                    assert!(err.contains(want) && err.starts_with("--listen"), "{err}");
                }
                (got, want) => panic!("{flags:?}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn flags_of_the_other_mode_are_refused() {
        assert!(parse(&["--allowed-host", "c.example"]).is_err());
        assert!(parse(&["--behind-proxy", "--open"]).is_err());
        assert!(parse(&["--max-live-streams", "0"]).is_err());
    }

    #[test]
    fn idle_timeout_covers_a_request() {
        let args = parse(&["--idle-timeout", "5s", "--request-timeout", "10s"]).expect("parse");
        let err = limits(&args).expect_err("refused").to_string();
        assert!(err.starts_with("--idle-timeout"), "{err}");
        let args = parse(&["--idle-timeout", "8s", "--request-timeout", "4s"]).expect("parse");
        assert_eq!(
            limits(&args).expect("valid").idle_timeout,
            Duration::from_secs(8)
        );
    }

    #[test]
    fn candidate_namespaces() {
        let cases: [(&[&str], Option<&str>, &[&str]); 4] = [
            (&[], None, &[]),
            (&[], Some("default"), &["default"]),
            (&["a", "b", "a"], Some("b"), &["a", "b"]),
            (&[" ", "c"], Some(""), &["c"]),
        ];
        for (flags, context, want) in cases {
            let flags: Vec<String> = flags.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(candidates(&flags, context), want, "{flags:?} {context:?}");
        }
    }
}
