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
