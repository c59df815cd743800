//! What the controller scenarios share: handoffs written as an admin
//! (with kube, as `kubectl apply` would: no `spec.createdBy`, the name
//! derived from the key, which the webhook requires), the Lease that says
//! which controller Pod leads, and the mirror's rows of a namespace.

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::spec::{Fields, spec};
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
        spec(key).repo("acme/api").kind("issue").body(body),
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

#[cfg(test)]
mod tests {
    use super::*;

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
