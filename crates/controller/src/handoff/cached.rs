//! The Handoff loop's watch, made compact before the reflector stores it:
//! each event's object becomes the [`CachedHandoff`] the cache keeps
//! (decided in [`handoff_core::handoff::cached`]); an object its reconcile
//! will need whole is held for it first ([`hold_for_reconcile`]).

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::watcher;

use super::watched::Watched;
use handoff_core::api::Handoff;
use handoff_core::handoff::cached::CachedHandoff;
use handoff_core::handoff::plan::cached_plan;
use handoff_kube::cluster::NamespaceScope;

/// Holds the object of an applied event in `watched` when its reconcile
/// will fetch it (the cached copy is not enough: [`cached_plan`]) and the
/// loop serves its namespace; `mirror`: the mirror is on. A deleted
/// object's held copy is dropped.
pub(crate) fn hold_for_reconcile(
    watched: &Watched,
    scope: &NamespaceScope,
    mirror: bool,
    event: &watcher::Event<DeserializeGuard<Handoff>>,
) {
    match event {
        watcher::Event::Apply(DeserializeGuard(Ok(h)))
        | watcher::Event::InitApply(DeserializeGuard(Ok(h))) => {
            let served = h.namespace().is_some_and(|ns| scope.includes(&ns));
            if served && cached_plan(&CachedHandoff::of(h), mirror, false).is_none() {
                watched.hold(h);
            }
        }
        watcher::Event::Delete(DeserializeGuard(Ok(h))) => {
            if let Some(uid) = h.uid() {
                watched.forget(&uid);
            }
        }
        _ => {}
    }
}

/// A watch event of full handoffs as the cache keeps it (an object that
/// does not deserialize stays as it is, to be reported).
pub(crate) fn cached_event(
    event: watcher::Event<DeserializeGuard<Handoff>>,
) -> watcher::Event<DeserializeGuard<CachedHandoff>> {
    let cached =
        |guard: DeserializeGuard<Handoff>| DeserializeGuard(guard.0.map(|h| CachedHandoff::of(&h)));
    match event {
        watcher::Event::Apply(guard) => watcher::Event::Apply(cached(guard)),
        watcher::Event::Delete(guard) => watcher::Event::Delete(cached(guard)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(guard) => watcher::Event::InitApply(cached(guard)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use handoff_core::api::naming::name_for_key;
    use handoff_core::api::{HandoffPhase, HandoffSpec, HandoffStatus};

    /// Key `key`'s handoff (uid = key, resourceVersion 1), counted at its
    /// generation when `counted`.
    fn handoff(key: &str, counted: bool) -> Handoff {
        let mut h = Handoff::new(&name_for_key(key), HandoffSpec::new(key, "p", "body"));
        h.metadata.namespace = Some("ns".into());
        h.metadata.uid = Some(key.into());
        h.metadata.resource_version = Some("1".into());
        h.metadata.generation = Some(1);
        h.status = counted.then(|| HandoffStatus {
            revision: Some(1),
            updated_at: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            content_hash: Some("hash".into()),
            phase: Some(HandoffPhase::Current),
            observed_generation: Some(1),
            ..HandoffStatus::default()
        });
        h
    }

    #[test]
    fn only_what_a_served_reconcile_will_fetch_is_held_and_a_delete_drops_it() {
        let (none, _) = kube::runtime::reflector::store();
        let nowhere = NamespaceScope::Selected(none);
        let apply = |h| watcher::Event::Apply(DeserializeGuard(Ok(h)));
        // (event, mirror on, scope, key, held for its reconcile afterwards)
        let cases = [
            (
                apply(handoff("new", false)),
                true,
                NamespaceScope::All,
                "new",
                true,
            ),
            (
                apply(handoff("done", true)),
                false,
                NamespaceScope::All,
                "done",
                false,
            ),
            (
                apply(handoff("unmirrored", true)),
                true,
                NamespaceScope::All,
                "unmirrored",
                true,
            ),
            (
                apply(handoff("elsewhere", false)),
                true,
                nowhere,
                "elsewhere",
                false,
            ),
        ];
        for (event, mirror, scope, key, held) in cases {
            let watched = Watched::new(1 << 20);
            hold_for_reconcile(&watched, &scope, mirror, &event);
            assert_eq!(watched.take(key, "1").is_some(), held, "{key}");
        }
        let watched = Watched::new(1 << 20);
        let all = NamespaceScope::All;
        hold_for_reconcile(&watched, &all, true, &apply(handoff("gone", false)));
        let deleted = watcher::Event::Delete(DeserializeGuard(Ok(handoff("gone", false))));
        hold_for_reconcile(&watched, &all, true, &deleted);
        assert!(watched.take("gone", "1").is_none(), "dropped on delete");
    }
}
