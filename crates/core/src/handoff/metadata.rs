//! The labels the controller applies to a handoff: the `project` / `repo`
//! / `kind` labels its spec implies, where the object lacks them or the
//! controller already owns them (managedFields), so it never fights a
//! writer's own labels.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::managed_fields::{object_writes_by, owned_keys};
use crate::api::Handoff;
use crate::api::naming::labels_for;
use crate::names::CONTROLLER_FIELD_MANAGER;

/// The metadata the controller applies to `h` (the labels it may set), or
/// `None` when `h` already carries exactly that. A label is the
/// controller's to set when the object lacks it or the controller already
/// owns it; a label another writer set is left alone even when it
/// disagrees with the spec.
pub(crate) fn metadata_plan(h: &Handoff) -> Option<serde_json::Value> {
    let current = h.metadata.labels.clone().unwrap_or_default();
    let owned = owned_labels(h);
    let desired = labels_for(
        &h.spec.project,
        h.spec.repo.as_deref(),
        h.spec.kind.as_deref(),
    );
    let labels: BTreeMap<String, String> = desired
        .into_iter()
        .filter(|(k, _)| !current.contains_key(k) || owned.contains(k))
        .collect();
    let owned_now: BTreeMap<String, String> = owned
        .iter()
        .filter_map(|k| current.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    if labels == owned_now {
        return None;
    }
    let metadata = serde_json::json!({ "name": h.name_any(), "labels": labels });
    Some(serde_json::json!({
        "apiVersion": "handoff.dev/v1alpha1",
        "kind": "Handoff",
        "metadata": metadata,
    }))
}

/// The label keys the controller's field manager owns on `h` (from the
/// managedFields of its server-side applies).
fn owned_labels(h: &Handoff) -> Vec<String> {
    object_writes_by(&h.metadata, CONTROLLER_FIELD_MANAGER)
        .flat_map(|m| owned_keys(m, &["f:metadata", "f:labels"]))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::HandoffSpec;
    use crate::api::naming::name_for_key;
    use crate::handoff::fixture::{object, spec};
    use crate::names::BRIDGE_FIELD_MANAGER;

    #[test]
    fn labels_are_added_only_where_missing_or_owned() {
        let plan = metadata_plan(&object(&[], &[])).expect("labels missing");
        assert_eq!(
            plan["metadata"]["labels"],
            serde_json::json!({"project": "p", "kind": "issue"})
        );

        let writer_set = object(&[("project", "other"), ("kind", "issue")], &[]);
        let plan = metadata_plan(&writer_set);
        assert!(plan.is_none(), "a writer's labels are left alone: {plan:?}");

        let ours = object(&[("project", "p"), ("kind", "issue")], &["project", "kind"]);
        assert!(metadata_plan(&ours).is_none(), "already applied");

        let stale = object(
            &[("project", "old"), ("kind", "issue")],
            &["project", "kind"],
        );
        let plan = metadata_plan(&stale).expect("our label follows the spec");
        assert_eq!(plan["metadata"]["labels"]["project"], "p");
    }

    #[test]
    fn a_writer_that_applies_the_labels_gets_no_metadata_write() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        // What the bridge (`store::desired`) and the scaling bench apply:
        // the spec and its labels, under the writer's own field manager.
        for (manager, spec) in [
            (BRIDGE_FIELD_MANAGER, spec("b")),
            (
                "bench-writer",
                HandoffSpec {
                    repo: None,
                    kind: None,
                    ..spec("b")
                },
            ),
        ] {
            let labels = labels_for(&spec.project, spec.repo.as_deref(), spec.kind.as_deref());
            let fields: serde_json::Map<String, serde_json::Value> = labels
                .keys()
                .map(|k| (format!("f:{k}"), serde_json::json!({})))
                .collect();
            let mut h = Handoff::new(&name_for_key("k"), spec);
            h.metadata.labels = Some(labels);
            h.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(
                    serde_json::json!({"f:metadata": {"f:labels": fields}, "f:spec": {}}),
                )),
                ..Default::default()
            }]);
            assert_eq!(metadata_plan(&h), None, "{manager}");
            // The same object without its labels (kubectl by hand) gets them.
            h.metadata.labels = None;
            assert!(metadata_plan(&h).is_some(), "{manager} without labels");
        }
    }
}
