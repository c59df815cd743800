//! What the browser suites stand on: a namespace of the shared control
//! plane with handoffs written the way agents write them (a real
//! `handoff mcp` over HTTP, with a writer ServiceAccount's token), a
//! controller mirroring them into the shared PostgreSQL (revisions, diff,
//! search), and the real `handoff console` reading it — on a laptop as the
//! plane's admin, or behind the stand-in proxy as a ServiceAccount.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::time::SystemClock;
use handoff_testkit::bearer_proxy::BearerProxy;
use handoff_testkit::browser::Browser;
use handoff_testkit::controller::{InProcess, Running};
use handoff_testkit::http::{addr_of, exchange, mcp_post, tool_call};
use handoff_testkit::spec::{Fields, spec};
use handoff_testkit::{BridgeProcess, ConsoleProcess, TestEnv};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::common::{agent_token, apply_agent_roles, apply_config};

/// The project every suite writes into.
pub(crate) const PROJECT: &str = "shop";

/// How long a page may take to show what an agent just wrote.
pub(crate) const LIVE: Duration = Duration::from_secs(20);

/// A namespace with a bridge, a mirroring controller and the mirror's URL.
pub(crate) struct World {
    pub(crate) env: &'static TestEnv,
    pub(crate) ns: String,
    pub(crate) postgres: String,
    bridge: BridgeProcess,
    writer: String,
    _controller: Running,
}

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_handoff"))
}

impl World {
    /// A new namespace named after `prefix`, its bridge and its controller.
    pub(crate) async fn new(prefix: &str) -> Self {
        let env = handoff_testkit::shared();
        let ns = env.namespace(prefix).await;
        apply_agent_roles(env);
        // The read-only ClusterRole people are bound to.
        apply_config(env, "config/rbac/view.yaml");
        let postgres = tokio::task::spawn_blocking(handoff_testkit::shared_postgres_url)
            .await
            .expect("the shared PostgreSQL");
        let controller = InProcess::new(&ns, "console-tests", Arc::new(SystemClock))
            .mirror(&postgres)
            .prompt()
            .start(env.client().await);
        let bridge = BridgeProcess::start(binary(), env.kubeconfig_path(), &ns, &[])
            .unwrap_or_else(|e| panic!("the bridge did not start: {e:#}"));
        let writer =
            agent_token(env, &ns, "agent", Some("implement"), Some("handoff-writer")).await;
        Self {
            env,
            ns,
            postgres,
            bridge,
            writer,
            _controller: controller,
        }
    }

    /// Calls `tool` on the bridge as the writer agent; the tool's result
    /// (fails the test when the call is refused).
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Value {
        let addr = addr_of(self.bridge.url()).expect("the bridge's address");
        let request = mcp_post(&addr, Some(&self.writer), &tool_call(tool, args.clone()));
        let answer = exchange(&addr, &request)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e:#}"));
        assert_eq!(answer.status, 200, "{tool} {args}: {answer:?}");
        let body = answer
            .body
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(&answer.body);
        let result: Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {}", answer.body));
        assert_eq!(
            result["result"]["isError"],
            json!(false),
            "{tool} {args}: {result}"
        );
        result["result"].clone()
    }

    /// Writes handoff `key` of [`PROJECT`] through the bridge.
    pub(crate) async fn write(&self, key: &str, body: &str) {
        self.call(
            "write_handoff",
            json!({"handoff_key": key, "project": PROJECT, "body": body,
                   "repo": "github.com/example/shop"}),
        )
        .await;
    }

    /// Writes revision `revision` of handoff `key` and waits until the
    /// controller has counted it (writes closer together may be counted
    /// as one).
    pub(crate) async fn revise(&self, key: &str, revision: i64, body: &str) {
        self.write(key, body).await;
        let api: Api<Handoff> = Api::namespaced(self.env.client().await, &self.ns);
        handoff_testkit::spec::counted(&api, key, revision).await;
    }

    /// Stores handoff `key` with `body` as it is, straight through the
    /// apiserver (no bridge, so none of its checks): what a hostile writer
    /// with RBAC on the objects could leave.
    pub(crate) async fn store_raw(&self, key: &str, body: &str) -> String {
        let name = name_for_key(key);
        let handoff = Handoff::new(&name, spec(key).project(PROJECT).body(body).by("mallory"));
        let api: Api<Handoff> = Api::namespaced(self.env.client().await, &self.ns);
        // A create (JSON), not an apply: an apply patch is YAML, which
        // cannot carry the corpus's control characters.
        api.create(&PostParams::default(), &handoff)
            .await
            .unwrap_or_else(|e| panic!("storing {key}: {e}"));
        name
    }

    /// Offers `key` to `to` through the bridge.
    pub(crate) async fn offer(&self, key: &str, to: &str) {
        self.call(
            "offer_handoff",
            json!({"project": PROJECT, "to": to, "handoff_key": key, "session": "s1",
                   "artifact": "", "body": "story 1: wire the CLI"}),
        )
        .await;
    }

    /// `handoff console` on a laptop, as the plane's admin, looking in this
    /// namespace, reading history from the mirror.
    pub(crate) fn laptop(&self) -> ConsoleProcess {
        ConsoleProcess::laptop(
            binary(),
            self.env.kubeconfig_path(),
            &["--namespace", &self.ns, "--postgres-url", &self.postgres],
        )
        .unwrap_or_else(|e| panic!("handoff console (laptop) did not start: {e:#}"))
    }

    /// `handoff console --behind-proxy`, accepting the stand-in proxy's
    /// Host (127.0.0.1 on any port).
    pub(crate) fn behind_proxy(&self) -> ConsoleProcess {
        ConsoleProcess::behind_proxy(
            binary(),
            self.env.kubeconfig_path(),
            &[
                "--namespace",
                &self.ns,
                "--postgres-url",
                &self.postgres,
                "--allowed-host",
                "127.0.0.1",
            ],
        )
        .unwrap_or_else(|e| panic!("handoff console (behind a proxy) did not start: {e:#}"))
    }

    /// A person: a token of ServiceAccount `name`, bound to the
    /// `handoff-view` ClusterRole in this namespace when `viewer`.
    pub(crate) async fn person(&self, name: &str, viewer: bool) -> String {
        let role = viewer.then_some("handoff-view");
        agent_token(self.env, &self.ns, name, None, role).await
    }

    /// A stand-in proxy in front of `console` that signs every request in
    /// with `token`.
    pub(crate) async fn proxy(console: &ConsoleProcess, token: &str) -> BearerProxy {
        BearerProxy::start(console.url(), token)
            .await
            .unwrap_or_else(|e| panic!("the stand-in proxy did not start: {e:#}"))
    }

    /// The URL of `path` on `console`.
    pub(crate) fn at(console: &ConsoleProcess, path: &str) -> String {
        format!("{}{path}", console.url())
    }
}

/// A browser signed in to a laptop console with its one-time link.
pub(crate) async fn signed_in(console: &ConsoleProcess) -> Browser {
    let browser = started(&[]).await;
    browser
        .goto(console.login_url())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    browser
}

/// A browser with `extra` flags, or the failure that says how to install one.
pub(crate) async fn started(extra: &[&str]) -> Browser {
    Browser::start_with(extra)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Panics with `what` and the error, for the browser's calls.
pub(crate) trait Must<T> {
    fn must(self, what: &str) -> T;
}

impl<T> Must<T> for anyhow::Result<T> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|e| panic!("{what}: {e:#}"))
    }
}

/// Opens `url` until the first element matching `css` shows `needle`: for
/// what arrives by itself but not live (the mirror's copy of a write).
pub(crate) async fn reload_until(browser: &Browser, url: &str, css: &str, needle: &str) {
    let what = format!("{url} to show {needle:?} in {css:?}");
    handoff_testkit::wait::eventually(&what, LIVE, || async {
        browser.goto(url).await.map_err(|e| format!("{e:#}"))?;
        match browser.text(css).await {
            Ok(text) if text.contains(needle) => Ok(()),
            Ok(text) => Err(text),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await;
}
