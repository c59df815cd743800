//! What a suite left stored, read back with the admin's client.

use handoff_core::api::{Handoff, HandoffSpec};
use handoff_testkit::TestEnv;
use kube::api::Api;

/// The keys of the handoffs stored in `namespace`, sorted.
pub(crate) async fn stored_keys(env: &TestEnv, namespace: &str) -> Vec<String> {
    let mut keys: Vec<String> = Api::<Handoff>::namespaced(env.client().await, namespace)
        .list(&Default::default())
        .await
        .expect("list handoffs")
        .items
        .into_iter()
        .map(|h| h.spec.handoff_key)
        .collect();
    keys.sort();
    keys
}

/// A handoff of project `shop` (repo `org/a`, kind `issue`) by `writer`.
pub(crate) fn shop(key: &str, body: &str) -> HandoffSpec {
    HandoffSpec {
        handoff_key: key.into(),
        project: "shop".into(),
        repo: Some("org/a".into()),
        kind: Some("issue".into()),
        body: body.into(),
        created_by: Some("writer".into()),
    }
}
