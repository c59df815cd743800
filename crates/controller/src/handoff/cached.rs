//! The Handoff loop's watch, made compact before the reflector stores it:
//! each event's object becomes the [`CachedHandoff`] the cache keeps
//! (decided in [`handoff_core::handoff::cached`]).

use kube::core::DeserializeGuard;
use kube::runtime::watcher;

use handoff_core::api::Handoff;
use handoff_core::handoff::cached::CachedHandoff;

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
