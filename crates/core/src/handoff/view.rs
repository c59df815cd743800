//! The revision and time a handoff shows: one rule for every reader
//! (`write_handoff`'s answer, `get_handoff`, `list_handoffs` and its
//! order, the lifecycle hooks' freshness check).
//!
//! The controller counts revisions asynchronously: until it has counted
//! the stored spec, `status` still describes the content before it. An
//! apply's answer, and every read in that window, would otherwise say the
//! previous revision and the previous time although the content just
//! changed, and a hook comparing that time with its session's start would
//! judge an agent's fresh write older than the session.
//!
//! So the status speaks for the spec only when it counted this content:
//! `status.contentHash` equals [`crate::api::HandoffSpec::content_hash`] of the spec
//! ([`counted`]). Not `observedGeneration`: a generation the controller
//! has not seen yet but with the same content (another writer's identical
//! write, which changes only `createdBy`) is no new revision and no new
//! time, and the controller will count it exactly so. Otherwise — no
//! status yet, or another content — the revision is not known yet
//! ([`revision`] is `None`, as after a creation) and the time is when the
//! spec was last written ([`written_at`]: the newest managedFields entry
//! that owns `spec`, the apiserver's clock in whole seconds). The
//! controller stamps `status.updatedAt` with that same [`written_at`]
//! when it counts new content, so the time shown does not move when the
//! count lands: before and after, it is when that content was written.
//!
//! The list order is `(updated_at desc, key)` of this same time, so an
//! entry sits where its shown time says and a cursor (a shown time and a
//! key) stays stable across the count. The mirror-backed list reads rows
//! the controller wrote when it counted: in the window it still shows the
//! previous revision, with that revision's own body and time, in that
//! time's place; what it shows agrees with itself, and with the apiserver
//! once the count lands.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::managed_fields::{latest, object_writes, owned};
use crate::api::{Handoff, HandoffStatus};

/// The status, if it describes the stored spec's content (its
/// `contentHash` is the spec's).
pub fn counted(h: &Handoff) -> Option<&HandoffStatus> {
    h.status
        .as_ref()
        .filter(|s| s.content_hash.as_deref() == Some(h.spec.content_hash().as_str()))
}

/// The content revision of the stored spec, once the controller has
/// counted it.
pub fn revision(h: &Handoff) -> Option<i64> {
    counted(h).and_then(|s| s.revision)
}

/// When the stored content was written: the counted `status.updatedAt`,
/// else the last spec write ([`written_at`]).
pub fn updated_at(h: &Handoff) -> Option<Time> {
    counted(h)
        .and_then(|s| s.updated_at.clone())
        .or_else(|| written_at(h))
}

/// When the spec was last written: the newest `time` of a managedFields
/// entry (not of a subresource) that owns `spec`, else the creation time.
pub fn written_at(h: &Handoff) -> Option<Time> {
    latest(object_writes(&h.metadata).filter(|m| owned(m, &["f:spec"]).is_some()))
        .cloned()
        .or_else(|| h.metadata.creation_timestamp.clone())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::HandoffSpec;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("ts"))
    }

    fn spec(body: &str, writer: &str) -> HandoffSpec {
        HandoffSpec {
            created_by: Some(writer.into()),
            ..HandoffSpec::new("k", "p", body)
        }
    }

    /// A managedFields entry of `manager` at `secs`, owning `spec` or
    /// not, on the main resource or a subresource.
    fn entry(
        manager: &str,
        secs: i64,
        owns_spec: bool,
        subresource: Option<&str>,
    ) -> ManagedFieldsEntry {
        let fields = if owns_spec {
            serde_json::json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:body": {}}})
        } else {
            serde_json::json!({"f:metadata": {"f:labels": {}}})
        };
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(fields)),
            subresource: subresource.map(Into::into),
            time: Some(at(secs)),
            ..Default::default()
        }
    }

    /// A handoff holding `spec`, created at 1, whose status (if any)
    /// counted `counted_body` as `revision` at `counted_at`.
    fn stored(
        spec: HandoffSpec,
        status: Option<(&str, i64, i64)>,
        fields: Vec<ManagedFieldsEntry>,
    ) -> Handoff {
        let mut h = Handoff::new("k", spec);
        h.metadata.creation_timestamp = Some(at(1));
        h.metadata.managed_fields = Some(fields).filter(|f| !f.is_empty());
        h.status = status.map(|(body, revision, secs)| HandoffStatus {
            revision: Some(revision),
            updated_at: Some(at(secs)),
            content_hash: Some(self::spec(body, "anyone").content_hash()),
            ..HandoffStatus::default()
        });
        h
    }

    #[test]
    fn a_handoff_shows_the_count_of_its_own_content_or_none() {
        let bridge = |secs| entry("handoff-bridge", secs, true, None);
        let status_write = entry("handoff-controller", 90, false, Some("status"));
        let labels_only = entry("handoff-controller", 80, false, None);
        // (case, the stored handoff, revision shown, updated_at shown)
        let cases = [
            (
                "created, not counted yet: the apply's time",
                stored(spec("a", "alice"), None, vec![bridge(10)]),
                None,
                Some(10),
            ),
            (
                "counted: the status",
                stored(
                    spec("a", "alice"),
                    Some(("a", 1, 10)),
                    vec![bridge(10), status_write.clone()],
                ),
                Some(1),
                Some(10),
            ),
            (
                "new content, not counted yet: no revision, the new write's time",
                stored(
                    spec("b", "alice"),
                    Some(("a", 1, 10)),
                    vec![bridge(20), status_write.clone()],
                ),
                None,
                Some(20),
            ),
            (
                "same content from another writer, not counted yet: the count stands",
                stored(
                    spec("a", "bob"),
                    Some(("a", 1, 10)),
                    vec![bridge(30), status_write.clone()],
                ),
                Some(1),
                Some(10),
            ),
            (
                "a status without a hash says nothing of this content",
                {
                    let mut h = stored(spec("a", "alice"), Some(("a", 4, 10)), vec![bridge(40)]);
                    if let Some(s) = h.status.as_mut() {
                        s.content_hash = None;
                    }
                    h
                },
                None,
                Some(40),
            ),
            (
                "only writes that own spec date the content (not labels, not status)",
                stored(
                    spec("b", "alice"),
                    Some(("a", 1, 10)),
                    vec![bridge(20), labels_only, status_write],
                ),
                None,
                Some(20),
            ),
            (
                "no managedFields: the creation time",
                stored(spec("b", "alice"), Some(("a", 1, 10)), vec![]),
                None,
                Some(1),
            ),
            (
                "a writer other than the bridge owns spec too (kubectl)",
                stored(
                    spec("b", "alice"),
                    Some(("a", 1, 10)),
                    vec![bridge(20), entry("kubectl", 25, true, None)],
                ),
                None,
                Some(25),
            ),
        ];
        for (case, h, revision_shown, time_shown) in cases {
            assert_eq!(revision(&h), revision_shown, "{case}: revision");
            assert_eq!(
                updated_at(&h).map(|t| t.0.as_second()),
                time_shown,
                "{case}: updated_at"
            );
        }
    }
}
