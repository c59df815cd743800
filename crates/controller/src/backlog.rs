//! The mirror's backlog: the keys whose mirror work (a row upsert, a
//! history append, a delete) this process started and has not finished.
//! It is part of the Handoff loop's state ([`crate::handoff::state`]):
//! the loop reads it to decide whether a key's row is owed
//! ([`crate::handoff`]); the metrics only report it
//! (`mirror_pending_rows`, `mirror_lag_seconds`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A key: namespace and handoff key.
pub(crate) type Key = (String, String);

/// The keys behind, each since when (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    pending: Mutex<HashMap<Key, Instant>>,
}

impl Backlog {
    /// Mirror work for `key` started (kept from its first start).
    pub(crate) fn behind(&self, key: &Key) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.entry(key.clone()).or_insert_with(Instant::now);
        }
    }

    /// The mirror holds what `key` owed.
    pub(crate) fn caught_up(&self, key: &Key) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(key);
        }
    }

    /// Whether the mirror owes `key` work this process started.
    pub(crate) fn owes(&self, key: &Key) -> bool {
        self.pending.lock().is_ok_and(|p| p.contains_key(key))
    }

    /// How many keys are behind, and the age of the oldest (zero when none).
    pub(crate) fn lag(&self) -> (usize, Duration) {
        self.pending.lock().map_or((0, Duration::ZERO), |pending| {
            let oldest = pending.values().map(Instant::elapsed).max();
            (pending.len(), oldest.unwrap_or_default())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_owed_from_its_first_start_until_caught_up() {
        let backlog = Backlog::default();
        let a = ("ns".to_owned(), "a".to_owned());
        let b = ("ns".to_owned(), "b".to_owned());
        assert_eq!(backlog.lag(), (0, Duration::ZERO));
        backlog.behind(&a);
        backlog.behind(&a);
        backlog.behind(&b);
        assert!(backlog.owes(&a) && backlog.owes(&b));
        assert_eq!(backlog.lag().0, 2, "one entry per key");
        backlog.caught_up(&a);
        assert!(!backlog.owes(&a));
        assert!(backlog.owes(&b));
        backlog.caught_up(&b);
        assert_eq!(backlog.lag(), (0, Duration::ZERO));
    }
}
