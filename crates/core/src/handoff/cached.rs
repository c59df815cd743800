//! What the Handoff loop's watch cache keeps of a handoff: a purpose-built
//! [`CachedHandoff`] holding only what the loop reads before it decides to
//! fetch the object — its identity, its key, whether its name is derived
//! from its key (and, if not, whether that is reported), whether it is
//! counted at its generation, how its `Mirrored` condition stands and the
//! label apply it needs, worked out from the full object as the watch
//! delivers it. No body, no annotations, no managedFields, no condition
//! messages: the cache is most of the controller's memory and grows with
//! the number of handoffs (see the module docs of
//! `handoff_controller::handoff`, "Memory"). The watch events are mapped
//! onto it there (kube's runtime is not in this crate).

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::serde::Deserialize;
use kube::Resource;

use super::metadata::metadata_plan;
use super::{KEY_BOUND, MIRRORED, canonical};
use crate::api::{Handoff, HandoffPhase};

/// How the `Mirrored` condition of a cached handoff stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(crate = "k8s_openapi::serde")]
pub(crate) enum Mirrored {
    /// No `Mirrored` condition.
    Absent,
    /// True for the object's generation: its row is current.
    Current,
    /// False, or True for an older generation.
    Behind,
}

/// A handoff as the watch cache keeps it (see the module docs). kube's
/// runtime asks its objects to deserialize; this one never is (it is made
/// by [`CachedHandoff::of`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(crate = "k8s_openapi::serde")]
pub struct CachedHandoff {
    /// Name, namespace, uid, resourceVersion, generation and
    /// deletionTimestamp only.
    metadata: ObjectMeta,
    /// `spec.handoffKey` (the mirror's key: the backlog, the delete).
    pub key: String,
    /// Its name is the one derived from its key: the key's handoff
    /// ([`canonical`]).
    pub canonical: bool,
    /// Its `KeyBound` condition is False (a non-canonical object reported).
    pub(crate) unbound_reported: bool,
    /// Counted at its generation (revision, time, hash and phase set).
    pub(crate) counted: bool,
    /// Its `Mirrored` condition.
    pub(crate) mirrored: Mirrored,
    /// The label apply it needs ([`metadata_plan`]), `None` for almost all.
    pub(crate) labels: Option<serde_json::Value>,
}

impl CachedHandoff {
    /// What the cache keeps of `h`.
    pub fn of(h: &Handoff) -> Self {
        let meta = &h.metadata;
        let generation = meta.generation;
        let status = h.status.as_ref();
        let counted = status.is_some_and(|status| {
            status.observed_generation == generation
                && generation.is_some()
                && status.revision.is_some()
                && status.updated_at.is_some()
                && status.content_hash.is_some()
                && status.phase == Some(HandoffPhase::Current)
        });
        let condition = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == MIRRORED));
        let mirrored = match condition {
            None => Mirrored::Absent,
            Some(c) if c.status == "True" && c.observed_generation == generation => {
                Mirrored::Current
            }
            Some(_) => Mirrored::Behind,
        };
        let unbound_reported = status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == KEY_BOUND && c.status == "False")
        });
        Self {
            metadata: ObjectMeta {
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                generation,
                deletion_timestamp: meta.deletion_timestamp.clone(),
                ..ObjectMeta::default()
            },
            key: h.spec.handoff_key.clone(),
            canonical: canonical(h),
            unbound_reported,
            counted,
            mirrored,
            labels: metadata_plan(h),
        }
    }

    /// Whether the object is being deleted.
    pub(crate) fn terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// A `Handoff` to the apiserver and to kube's runtime (the reflector, the
/// controller's object references, Events).
impl Resource for CachedHandoff {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Handoff::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Handoff::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Handoff::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Handoff::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::naming::name_for_key;
    use crate::handoff::fixture::object;
    use crate::names::{BRIDGE_FIELD_MANAGER, CONTROLLER_FIELD_MANAGER};

    /// kubectl's client-side apply record.
    const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

    #[test]
    fn the_cache_keeps_what_the_loop_reads_and_nothing_else() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        use kube::{Resource, ResourceExt};
        let entry = |manager: &str, subresource: Option<&str>| ManagedFieldsEntry {
            manager: Some(manager.into()),
            subresource: subresource.map(Into::into),
            ..Default::default()
        };
        for (labels, owned) in [
            (vec![], vec![]),
            (vec![("project", "other")], vec![]),
            (
                vec![("project", "old"), ("kind", "issue")],
                vec!["project", "kind"],
            ),
        ] {
            let mut h = object(&labels, &owned);
            h.metadata.namespace = Some("ns".into());
            h.metadata.uid = Some("u".into());
            h.metadata.resource_version = Some("7".into());
            h.metadata.generation = Some(3);
            let mut fields = h.metadata.managed_fields.take().unwrap_or_default();
            fields.extend([
                entry(BRIDGE_FIELD_MANAGER, None),
                entry(CONTROLLER_FIELD_MANAGER, Some("status")),
            ]);
            h.metadata.managed_fields = Some(fields);
            h.metadata.annotations = Some(
                [
                    (LAST_APPLIED.to_owned(), "{…}".to_owned()),
                    ("keep".into(), "me".into()),
                ]
                .into(),
            );
            let cached = CachedHandoff::of(&h);
            assert_eq!(cached.labels, metadata_plan(&h), "{labels:?} {owned:?}");
            assert_eq!(cached.key, "k", "the delete and the backlog read the key");
            assert_eq!(
                (
                    cached.name_any(),
                    cached.namespace(),
                    cached.uid(),
                    cached.resource_version(),
                    cached.meta().generation,
                ),
                (
                    name_for_key("k"),
                    Some("ns".to_owned()),
                    Some("u".to_owned()),
                    Some("7".to_owned()),
                    Some(3)
                )
            );
            assert!(cached.labels().is_empty(), "no labels kept: {labels:?}");
            assert!(cached.annotations().is_empty(), "no annotations kept");
            assert!(cached.managed_fields().is_empty(), "no managedFields kept");
        }
    }
}
