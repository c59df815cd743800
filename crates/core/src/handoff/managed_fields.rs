//! The one walker over an object's managedFields (the apiserver's record
//! of which field manager wrote which fields, and when). Three decisions
//! read it: when the spec was last written ([`super::view::written_at`]),
//! when the bridge last applied ([`super::outcome::applied_at`]) and which
//! labels the controller owns ([`super::metadata`]). Each is a filter over
//! the same few steps here, so they agree on what a write to the object
//! itself is and on how fieldsV1 is read.
//!
//! A write to a subresource (`status`) is not a write to the object: the
//! apiserver records it with `subresource` set, and it never carries the
//! spec or the labels.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};

/// The entries of writes to the object itself, not to a subresource.
pub(crate) fn object_writes(meta: &ObjectMeta) -> impl Iterator<Item = &ManagedFieldsEntry> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
}

/// [`object_writes`] by the field manager `manager`.
pub(crate) fn object_writes_by<'a>(
    meta: &'a ObjectMeta,
    manager: &'a str,
) -> impl Iterator<Item = &'a ManagedFieldsEntry> {
    object_writes(meta).filter(move |m| m.manager.as_deref() == Some(manager))
}

/// What `m` owns under `path` (`["f:metadata", "f:labels"]`) as fieldsV1
/// records it; `None` when it owns nothing there.
pub(crate) fn owned<'a>(m: &'a ManagedFieldsEntry, path: &[&str]) -> Option<&'a serde_json::Value> {
    let mut set = &m.fields_v1.as_ref()?.0;
    for step in path {
        set = set.get(step)?;
    }
    Some(set)
}

/// The names of the fields `m` owns directly under `path`, without their
/// `f:` prefix: under `["f:metadata", "f:labels"]`, the label keys.
pub(crate) fn owned_keys<'a>(
    m: &'a ManagedFieldsEntry,
    path: &[&str],
) -> impl Iterator<Item = &'a str> {
    owned(m, path)
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flat_map(|set| set.keys().filter_map(|k| k.strip_prefix("f:")))
}

/// The newest `time` of `entries`.
pub(crate) fn latest<'a>(
    entries: impl Iterator<Item = &'a ManagedFieldsEntry>,
) -> Option<&'a Time> {
    entries
        .filter_map(|m| m.time.as_ref())
        .max_by(|a, b| a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn entry(
        manager: &str,
        subresource: Option<&str>,
        fields: serde_json::Value,
        secs: Option<i64>,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(fields)),
            subresource: subresource.map(Into::into),
            time: secs.map(|s| Time(Timestamp::from_second(s).expect("ts"))),
            ..Default::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            managed_fields: Some(entries),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn writes_to_a_subresource_are_not_writes_to_the_object() {
        let json = serde_json::json!({});
        let m = meta(vec![
            entry("bridge", None, json.clone(), Some(1)),
            entry("controller", Some("status"), json.clone(), Some(2)),
            entry("controller", Some(""), json.clone(), Some(3)),
            entry("controller", None, json, Some(4)),
        ]);
        // (manager or every one, the times of the object's writes)
        let cases: [(Option<&str>, Vec<i64>); 4] = [
            (None, vec![1, 3, 4]),
            (Some("bridge"), vec![1]),
            (Some("controller"), vec![3, 4]),
            (Some("kubectl"), vec![]),
        ];
        let times = |it: &mut dyn Iterator<Item = &ManagedFieldsEntry>| {
            it.filter_map(|e| e.time.as_ref().map(|t| t.0.as_second()))
                .collect::<Vec<_>>()
        };
        for (manager, want) in cases {
            let got = match manager {
                None => times(&mut object_writes(&m)),
                Some(manager) => times(&mut object_writes_by(&m, manager)),
            };
            assert_eq!(got, want, "{manager:?}");
        }
        assert_eq!(object_writes(&ObjectMeta::default()).count(), 0, "none");
    }

    #[test]
    fn fields_v1_is_read_along_a_path() {
        let fields = serde_json::json!({
            "f:metadata": {"f:labels": {"f:project": {}, "f:kind": {}, ".": {}}},
            "f:spec": {"f:body": {}},
        });
        let m = entry("x", None, fields, None);
        let none = ManagedFieldsEntry::default();
        // (entry, path, owns something there, the keys directly under it)
        let cases: [(&ManagedFieldsEntry, &[&str], bool, Vec<&str>); 6] = [
            (&m, &[], true, vec!["metadata", "spec"]),
            (&m, &["f:spec"], true, vec!["body"]),
            (
                &m,
                &["f:metadata", "f:labels"],
                true,
                vec!["kind", "project"],
            ),
            (&m, &["f:status"], false, vec![]),
            (&m, &["f:spec", "f:body", "f:x"], false, vec![]),
            (&none, &["f:spec"], false, vec![]),
        ];
        for (entry, path, owns, keys) in cases {
            assert_eq!(owned(entry, path).is_some(), owns, "{path:?}");
            let mut got: Vec<&str> = owned_keys(entry, path).collect();
            got.sort_unstable();
            assert_eq!(got, keys, "{path:?}");
        }
    }

    #[test]
    fn the_latest_write_is_the_newest_time() {
        let json = serde_json::json!({});
        // (the entries' times, the newest)
        let cases: [(Vec<Option<i64>>, Option<i64>); 4] = [
            (vec![], None),
            (vec![None], None),
            (vec![Some(5), None, Some(9), Some(7)], Some(9)),
            (vec![Some(-3), Some(-1)], Some(-1)),
        ];
        for (times, want) in cases {
            let m = meta(
                times
                    .iter()
                    .map(|t| entry("x", None, json.clone(), *t))
                    .collect(),
            );
            assert_eq!(
                latest(object_writes(&m)).map(|t| t.0.as_second()),
                want,
                "{times:?}"
            );
        }
    }
}
