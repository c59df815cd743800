//! What a suite left stored, read back with the admin's client.

use handoff_core::api::Handoff;
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
