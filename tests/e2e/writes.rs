//! What the controller scenarios share: handoffs written as an admin
//! (with kube, as `kubectl apply` would: no `spec.createdBy`, the name
//! derived from the key, which the webhook requires), the Lease that says
//! which controller Pod leads, the mirror's rows of a namespace, and a
//! plain HTTP GET of a Pod's port from the host.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

use crate::harness::{SYSTEM, e2e};

/// The controller's Lease (config/manager: `--lease-namespace`, the
/// Pod's namespace; its holder is the Pod's name).
pub(crate) const LEASE: &str = "handoff-controller";

/// The mirror's tables with a namespace column.
pub(crate) const MIRROR_TABLES: [&str; 2] = ["handoffs", "handoff_revisions"];

/// Pure: the Handoff of `key` in project `shop`, as an admin applies it.
pub(crate) fn handoff(key: &str, body: &str) -> Handoff {
    Handoff::new(
        &name_for_key(key),
        HandoffSpec {
            handoff_key: key.into(),
            project: "shop".into(),
            repo: Some("acme/api".into()),
            kind: Some("issue".into()),
            body: body.into(),
            created_by: None,
        },
    )
}

/// Creates the Handoff of `key` in `namespace`.
pub(crate) async fn create_handoff(namespace: &str, key: &str, body: &str) -> Handoff {
    let api: Api<Handoff> = Api::namespaced(e2e().env.client().await, namespace);
    api.create(&PostParams::default(), &handoff(key, body))
        .await
        .unwrap_or_else(|e| panic!("create the handoff {key}: {e}"))
}

/// The Lease's `(holderIdentity, leaseTransitions)`, if it has a holder.
pub(crate) async fn lease_holder() -> Result<(String, i32), String> {
    let leases: Api<Lease> = Api::namespaced(e2e().env.client().await, SYSTEM);
    let lease = leases.get(LEASE).await.map_err(|e| e.to_string())?;
    let spec = lease.spec.unwrap_or_default();
    match spec.holder_identity.filter(|h| !h.is_empty()) {
        Some(holder) => Ok((holder, spec.lease_transitions.unwrap_or(0))),
        None => Err("the Lease has no holder".into()),
    }
}

/// The Pod `name` of the installation.
pub(crate) async fn pod(name: &str) -> Result<Pod, String> {
    let pods: Api<Pod> = Api::namespaced(e2e().env.client().await, SYSTEM);
    pods.get(name).await.map_err(|e| format!("pod {name}: {e}"))
}

/// Pure: the first container's `(containerd id, restartCount, ready)`.
pub(crate) fn first_container(pod: &Pod) -> Option<(String, i32, bool)> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    let id = status.container_id.as_deref()?;
    let id = id.strip_prefix("containerd://").unwrap_or(id);
    Some((id.to_owned(), status.restart_count, status.ready))
}

/// The number of rows of `table` for `namespace`.
pub(crate) async fn rows_in(
    db: &tokio_postgres::Client,
    table: &str,
    namespace: &str,
) -> Result<i64, String> {
    let sql = format!("SELECT count(*) FROM {table} WHERE namespace = $1");
    db.query_one(&sql, &[&namespace])
        .await
        .map(|row| row.get(0))
        .map_err(|e| format!("count the {table} rows: {e}"))
}

/// A connection to the mirror's PostgreSQL.
pub(crate) async fn mirror_db() -> tokio_postgres::Client {
    handoff_testkit::connect_postgres(&e2e().postgres_url)
        .await
        .unwrap_or_else(|e| panic!("connect to the mirror's PostgreSQL: {e:#}"))
}

/// Pure: the status code of an HTTP/1.x response.
pub(crate) fn status_code(response: &str) -> Option<u16> {
    let line = response.lines().next()?;
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/1."))?;
    parts.next()?.parse().ok()
}

/// `GET path` of `ip:port` (HTTP/1.0, so the server closes): the status
/// code and the whole response, or why there is none.
pub(crate) fn http_get(ip: &str, port: u16, path: &str) -> Result<(u16, String), String> {
    let timeout = Duration::from_secs(5);
    let address = format!("{ip}:{port}");
    let socket = address
        .parse()
        .map_err(|e| format!("address {address}: {e}"))?;
    let mut stream = TcpStream::connect_timeout(&socket, timeout)
        .map_err(|e| format!("connect {address}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n").as_bytes())
        .map_err(|e| format!("send to {address}: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("read from {address}: {e}"))?;
    match status_code(&response) {
        Some(code) => Ok((code, response)),
        None => Err(format!("not an HTTP response: {response:?}")),
    }
}

/// Pure: the state letter (`T`: stopped) and the parent pid of a
/// `/proc/<pid>/stat` line.
pub(crate) fn proc_stat(stat: &str) -> Option<(char, i32)> {
    // The command name is in parentheses and may hold spaces.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_code_is_the_second_word_of_an_http_1_status_line() {
        for (response, want) in [
            ("HTTP/1.1 200 OK\r\n\r\nok", Some(200)),
            (
                "HTTP/1.0 503 Service Unavailable\r\ncontent-length: 3\r\n\r\nno",
                Some(503),
            ),
            ("HTTP/2 200\r\n", None),
            ("SSH-2.0-OpenSSH\r\n", None),
            ("HTTP/1.1 abc\r\n", None),
            ("", None),
        ] {
            assert_eq!(status_code(response), want, "{response:?}");
        }
    }

    #[test]
    fn the_process_state_and_parent_follow_the_command_name() {
        for (stat, want) in [
            ("4242 (postgres) T 1 4242 4242 0 -1", Some(('T', 1))),
            ("7 (a (b) c) S 42 7", Some(('S', 42))),
            ("7 (postgres) R", None),
            ("7 (postgres)", None),
            ("", None),
        ] {
            assert_eq!(proc_stat(stat), want, "{stat:?}");
        }
    }

    #[test]
    fn an_admins_handoff_is_named_for_its_key_and_claims_no_author() {
        let h = handoff("acme/api#42", "body");
        assert_eq!(
            h.metadata.name.as_deref(),
            Some("acme-api-42-b22690f09108a5f8"),
            "the name examples/handoff.yaml gives this key"
        );
        assert_eq!(h.spec.created_by, None);
        assert_eq!(h.spec.project, "shop");
    }

    #[test]
    fn the_first_container_is_read_without_the_runtime_prefix() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "status": {"containerStatuses": [{"name": "controller", "image": "i", "imageID": "",
                "containerID": "containerd://abc123", "restartCount": 2, "ready": true}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first_container(&pod), Some(("abc123".into(), 2, true)));
        assert_eq!(first_container(&Pod::default()), None, "not started yet");
    }
}
