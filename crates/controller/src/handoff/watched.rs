//! The bodies the watch delivered, held for the reconcile that needs them,
//! so it does not GET what the apiserver just sent.
//!
//! Why: every new or changed handoff is counted and mirrored from its whole
//! object, and the cache keeps no body (see the module docs of
//! [`super`]: "Memory"). Fetching it again cost the apiserver one GET per
//! agent write — a third of the requests a write caused it, and one round
//! trip of every reconcile's time, in a burst the time that bounds how fast
//! the mirror catches up. The watch event that announced the change
//! carried the whole object; it is held here until its reconcile takes it.
//!
//! What is held, and for how long: only an object the cache says must be
//! fetched ([`cached_plan`] without backlog work), of a namespace the loop
//! serves, one per uid (a newer version replaces it; a delete drops it),
//! until its reconcile takes it. At most [`HELD_BYTES`] of bodies in all:
//! past that, nothing more is held and those reconciles GET as before (the
//! held ones are the oldest, reconciled first). A restart over counted,
//! mirrored objects holds nothing.
//!
//! Why it is as good as a GET: a reconcile takes the object only when its
//! resourceVersion is the one of the cached copy it reconciles, so it is
//! the object the cache describes; the status write carries that
//! resourceVersion, so a newer version makes it 409 and the reconcile
//! retries, exactly as after a GET that raced a write.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::ResourceExt;

use handoff_core::api::Handoff;

/// Most bytes of held objects (bodies and keys, and a fixed share per
/// object for its metadata): 32 MiB, e.g. 8,000 handoffs of 2 KiB, or 32
/// of the largest body the CRD allows.
pub(crate) const HELD_BYTES: usize = 32 << 20;

/// A fixed share per held object for what is not its body or key.
const OVERHEAD_BYTES: usize = 2048;

/// What a held object counts against [`HELD_BYTES`].
fn weight(h: &Handoff) -> usize {
    h.spec.body.len() + h.spec.handoff_key.len() + OVERHEAD_BYTES
}

/// Objects held by uid, and the bytes they weigh.
#[derive(Default)]
struct Held {
    by_uid: HashMap<String, Handoff>,
    bytes: usize,
}

/// The held objects (see the module docs).
pub(crate) struct Watched {
    held: Mutex<Held>,
    limit: usize,
}

impl Watched {
    /// Holding at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            held: Mutex::default(),
            limit,
        }
    }

    /// Holds `h` for its reconcile, in place of any older version of it,
    /// unless that would pass the limit (then its reconcile fetches it).
    pub(crate) fn hold(&self, h: &Handoff) {
        let Some(uid) = h.uid() else {
            return;
        };
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        let replaced = held.by_uid.remove(&uid).map_or(0, |old| weight(&old));
        held.bytes -= replaced;
        let size = weight(h);
        if held.bytes + size <= self.limit {
            held.bytes += size;
            held.by_uid.insert(uid, h.clone());
        }
    }

    /// The held object of `uid` if it is at `resource_version` (the
    /// version the reconcile works on); it is held no longer either way.
    pub(crate) fn take(&self, uid: &str, resource_version: &str) -> Option<Handoff> {
        let mut held = self.held.lock().ok()?;
        let h = held.by_uid.remove(uid)?;
        held.bytes -= weight(&h);
        (h.metadata.resource_version.as_deref() == Some(resource_version)).then_some(h)
    }

    /// Drops what is held of `uid` (the object was deleted).
    pub(crate) fn forget(&self, uid: &str) {
        if let Ok(mut held) = self.held.lock()
            && let Some(h) = held.by_uid.remove(uid)
        {
            held.bytes -= weight(&h);
        }
    }

    /// Holds nothing (a leadership starts: its watch delivers every
    /// object again).
    pub(crate) fn clear(&self) {
        if let Ok(mut held) = self.held.lock() {
            *held = Held::default();
        }
    }

    /// Objects and bytes held (tests).
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        let held = self.held.lock().expect("lock");
        (held.by_uid.len(), held.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::api::HandoffSpec;

    /// Object `uid` at `version`, of key `k`, with a body of `body_bytes`.
    fn handoff(uid: &str, version: &str, body_bytes: usize) -> Handoff {
        let body = "x".repeat(body_bytes);
        let mut h = Handoff::new("h", HandoffSpec::new("k", "p", &body));
        h.metadata.uid = Some(uid.into());
        h.metadata.resource_version = Some(version.into());
        h
    }

    enum Step {
        Hold(&'static str, &'static str, usize),
        /// Take (uid, version): whether it is handed out.
        Take(&'static str, &'static str, bool),
        Forget(&'static str),
        Clear,
    }

    #[test]
    fn one_version_per_object_within_the_limit_until_taken() {
        use Step::*;
        let unit = OVERHEAD_BYTES + 1;
        // (step, objects held after it)
        let cases = [
            (Hold("a", "1", 0), 1),
            (Hold("a", "2", 0), 1),
            (Take("a", "1", false), 0),
            (Hold("a", "3", 0), 1),
            (Take("a", "3", true), 0),
            (Take("a", "3", false), 0),
            (Hold("a", "4", 0), 1),
            (Hold("b", "1", 0), 2),
            (Hold("c", "1", 0), 2),
            (Forget("a"), 1),
            (Hold("c", "1", 0), 2),
            (Hold("d", "1", 1 << 20), 2),
            (Take("d", "1", false), 2),
            (Take("b", "1", true), 1),
            (Clear, 0),
            (Take("c", "1", false), 0),
        ];
        let watched = Watched::new(2 * unit);
        for (i, (step, held)) in cases.into_iter().enumerate() {
            match step {
                Hold(uid, version, bytes) => watched.hold(&handoff(uid, version, bytes)),
                Take(uid, version, want) => assert_eq!(
                    watched.take(uid, version).is_some(),
                    want,
                    "step {i}: take {uid}@{version}"
                ),
                Forget(uid) => watched.forget(uid),
                Clear => watched.clear(),
            }
            assert_eq!(watched.size(), (held, held * unit), "step {i}");
        }
    }
}
