//! The console in the cluster: `config/console` applied beside the
//! installation as built (the same image, the mirror's reader Secret
//! filled in as an operator would), its Pod running under the namespace's
//! restricted Pod Security Standard with its probes passing, and reached
//! from the host through its Service's ClusterIP (kube-proxy) behind the
//! stand-in for an authenticating proxy
//! ([`handoff_testkit::bearer_proxy::BearerProxy`]), which sets a
//! ServiceAccount's bearer token as oauth2-proxy sets a person's and passes
//! the browser's Host on (here the Service's name, one config/console
//! allows). Every read is the token's own:
//! - a reader (bound to the built-in `view`, which aggregates
//!   `handoff-view`) sees the project's handoffs;
//! - without a token the console answers its sign-in page (401), no key;
//! - a token without rights in the namespace shows no handoff.

use std::sync::OnceLock;
use std::time::Duration;

use handoff_testkit::bearer_proxy::BearerProxy;
use handoff_testkit::http::{Answer, addr_of, exchange};
use handoff_testkit::wait::eventually;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use serde_json::json;

use crate::harness::{SYSTEM, UNDISTURBED, e2e, kubectl, kubectl_stdin, must, namespace};
use crate::images::HANDOFF;
use crate::install::{apply_as_installed, diagnose, installed, pods_of};
use crate::writes::create_handoff;

/// The Host the stand-in proxy passes on: the console Service's name, as
/// config/console's `--allowed-host` lists it (a real proxy passes the
/// public name, which an operator adds).
const HOST: &str = "handoff-console.handoff-system.svc";

/// config/console applied once per test binary, after the installation.
fn console_installed() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(install_console);
}

fn install_console() {
    installed();
    // The mirror's DSN for the console's history and search: the same
    // database the controller writes, as the Pods reach it.
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "handoff-postgres-reader", "namespace": SYSTEM},
        "stringData": {"dsn": e2e().postgres_url_for_pods}});
    must(
        kubectl_stdin(&["apply", "--server-side", "-f", "-"], &secret.to_string()),
        "the console's DSN Secret",
    );
    apply_as_installed("config/console", "config/console");
    let rolled = kubectl(&[
        "-n",
        SYSTEM,
        "rollout",
        "status",
        "deployment/handoff-console",
        "--timeout=60s",
    ]);
    if !rolled.status.success() {
        panic!(
            "deployment/handoff-console did not roll out: {}\n{}",
            String::from_utf8_lossy(&rolled.stderr),
            diagnose()
        );
    }
}

/// `http://<ClusterIP>:<port>` of the console's Service.
async fn console_service() -> String {
    let services: Api<Service> = Api::namespaced(e2e().env.client().await, SYSTEM);
    let service = services
        .get("handoff-console")
        .await
        .unwrap_or_else(|e| panic!("the console's Service: {e}"));
    let spec = service.spec.unwrap_or_default();
    let ip = spec.cluster_ip.unwrap_or_default();
    let port = spec.ports.unwrap_or_default().first().map_or(0, |p| p.port);
    format!("http://{ip}:{port}")
}

/// `GET path` through `proxy` with the Host a browser of the console sends.
async fn get(proxy: &BearerProxy, path: &str) -> Answer {
    let addr = addr_of(proxy.url()).unwrap_or_else(|e| panic!("{e:#}"));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {HOST}\r\nAccept: text/html\r\nConnection: close\r\n\r\n"
    );
    tokio::time::timeout(Duration::from_secs(30), exchange(&addr, request.as_bytes()))
        .await
        .unwrap_or_else(|_| panic!("GET {path}: no answer within 30 s"))
        .unwrap_or_else(|e| panic!("GET {path}: {e:#}"))
}

/// A ServiceAccount `name` in `namespace`, bound to ClusterRole `role`
/// there when given; its token.
fn account(namespace: &str, name: &str, role: Option<&str>) -> String {
    let mut items = vec![json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace}})];
    if let Some(role) = role {
        items.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    must(
        kubectl_stdin(&["apply", "--server-side", "-f", "-"], &list.to_string()),
        &format!("ServiceAccount {namespace}/{name}"),
    );
    must(
        kubectl(&["-n", namespace, "create", "token", name, "--duration=1h"]),
        &format!("a token of {name}"),
    )
    .trim()
    .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_pod_behind_a_proxy_shows_each_token_what_its_rbac_lets_it_read() {
    let _undisturbed = UNDISTURBED.read().await;
    console_installed();
    for pod in pods_of("handoff-console").await {
        let spec = pod.spec.unwrap_or_default();
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some(HANDOFF));
        let security = container.security_context.clone().unwrap_or_default();
        assert_eq!(security.read_only_root_filesystem, Some(true));
        let statuses = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        assert!(
            statuses.iter().all(|s| s.ready && s.restart_count == 0),
            "the console is ready (its /healthz probes pass), never restarted: {statuses:?}"
        );
    }

    let ns = namespace("console").await;
    let keys = ["acme/api#11", "acme/api#12", "acme/web#3"];
    for key in keys {
        create_handoff(&ns, key, &format!("state: {key} in review")).await;
    }
    let reader = account(&ns, "reader", Some("view"));
    let stranger = account(&ns, "stranger", None);
    let upstream = console_service().await;
    let project = handoff_console::routes::project(&ns, "shop", None, None, None);

    // The reader: the project page lists every handoff (the console reads
    // as the token: a watch-cache lag is the only wait).
    let as_reader = BearerProxy::start(&upstream, &reader)
        .await
        .unwrap_or_else(|e| panic!("the stand-in proxy: {e:#}"));
    eventually(
        "the reader's project page lists the handoffs",
        Duration::from_secs(30),
        || async {
            let page = get(&as_reader, &project).await;
            let missing: Vec<&str> = keys
                .iter()
                .copied()
                .filter(|k| !page.body.contains(k))
                .collect();
            (page.status == 200 && missing.is_empty())
                .then_some(())
                .ok_or(format!("{} missing {missing:?}", page.status))
        },
    )
    .await;

    // No token: the sign-in page, nothing else.
    let anonymous = BearerProxy::start_without_token(&upstream)
        .await
        .unwrap_or_else(|e| panic!("the stand-in proxy: {e:#}"));
    let page = get(&anonymous, &project).await;
    assert_eq!(page.status, 401, "without a token: {}", page.body);
    assert!(
        keys.iter().all(|k| !page.body.contains(k)),
        "the sign-in page shows no handoff: {}",
        page.body
    );

    // A token without rights in the namespace: no handoff.
    let as_stranger = BearerProxy::start(&upstream, &stranger)
        .await
        .unwrap_or_else(|e| panic!("the stand-in proxy: {e:#}"));
    let page = get(&as_stranger, &project).await;
    assert_ne!(
        page.status, 401,
        "a valid token is signed in: {}",
        page.body
    );
    assert!(
        keys.iter().all(|k| !page.body.contains(k)),
        "a token without rights sees no handoff ({}): {}",
        page.status,
        page.body
    );
}
