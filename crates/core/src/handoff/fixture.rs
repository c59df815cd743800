//! What the tests of the Handoff decisions build on: a spec, a time, an
//! object with labels some of which the controller owns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use k8s_openapi::jiff::Timestamp;

use crate::api::naming::name_for_key;
use crate::api::{Handoff, HandoffSpec};
use crate::names::CONTROLLER_FIELD_MANAGER;

/// Key `k` of project `p`, `org/repo`, an issue, written by alice.
pub(super) fn spec(body: &str) -> HandoffSpec {
    HandoffSpec {
        repo: Some("org/repo".into()),
        kind: Some("issue".into()),
        created_by: Some("alice".into()),
        ..HandoffSpec::new("k", "p", body)
    }
}

/// `s` seconds after the epoch.
pub(super) fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).expect("ts")
}

/// The key's handoff holding `b`, carrying `labels`, the controller
/// owning the keys `owned` of them.
pub(super) fn object(labels: &[(&str, &str)], owned: &[&str]) -> Handoff {
    let mut h = Handoff::new(&name_for_key("k"), spec("b"));
    h.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    if !owned.is_empty() {
        let fields: serde_json::Map<String, serde_json::Value> = owned
            .iter()
            .map(|k| (format!("f:{k}"), serde_json::json!({})))
            .collect();
        h.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(CONTROLLER_FIELD_MANAGER.into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(
                serde_json::json!({"f:metadata": {"f:labels": fields}}),
            )),
            ..Default::default()
        }]);
    }
    h
}
