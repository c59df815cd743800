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
