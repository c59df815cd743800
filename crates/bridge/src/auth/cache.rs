//! A bounded TTL cache keyed by token hashes (the resolver's identities
//! and rejected tokens).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// SHA-256 of a bearer token: caches and reviews in progress are keyed by
/// it, never by the token.
pub(super) type TokenHash = [u8; 32];

/// A map with a size bound and an age bound: entries older than `ttl` are
/// misses, and a full map drops its oldest entries. Every entry lives as
/// long, so insertion order is expiry order: eviction pops the front of a
/// queue (constant time even when a flood of distinct keys fills it).
pub(super) struct TtlCache<V> {
    entries: HashMap<TokenHash, (Instant, V)>,
    /// Insertion times and keys, oldest first; an element whose time is not
    /// its key's current one is stale and skipped.
    order: VecDeque<(Instant, TokenHash)>,
    capacity: usize,
    ttl: Duration,
}

impl<V: Clone> TtlCache<V> {
    pub(super) fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    pub(super) fn get(&mut self, key: &TokenHash) -> Option<V> {
        match self.entries.get(key) {
            Some((at, v)) if at.elapsed() < self.ttl => Some(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    pub(super) fn insert(&mut self, key: TokenHash, value: V) {
        let now = Instant::now();
        self.entries.insert(key, (now, value));
        self.order.push_back((now, key));
        while let Some(&(at, oldest)) = self.order.front() {
            let current = self.entries.get(&oldest).is_some_and(|(t, _)| *t == at);
            if !current {
                self.order.pop_front();
            } else if self.entries.len() > self.capacity || at.elapsed() >= self.ttl {
                self.entries.remove(&oldest);
                self.order.pop_front();
            } else {
                break;
            }
        }
        if self.order.len() > 2 * self.capacity {
            let entries = &self.entries;
            self.order
                .retain(|(at, key)| entries.get(key).is_some_and(|(t, _)| t == at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_is_bounded_and_expires() {
        let mut cache = TtlCache::new(2, Duration::from_secs(60));
        for i in 0..5u8 {
            cache.insert([i; 32], i);
        }
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.get(&[4; 32]), Some(4));
        assert_eq!(cache.get(&[0; 32]), None, "the oldest was evicted");

        let mut expiring = TtlCache::new(8, Duration::ZERO);
        expiring.insert([1; 32], 1);
        assert_eq!(expiring.get(&[1; 32]), None);
        assert!(expiring.entries.is_empty());
    }

    #[test]
    fn a_flood_of_keys_keeps_the_cache_and_its_queue_bounded() {
        let mut cache = TtlCache::new(16, Duration::from_secs(60));
        for i in 0..10_000u32 {
            let mut key = [0; 32];
            key[..4].copy_from_slice(&i.to_le_bytes());
            cache.insert(key, ());
            cache.insert([7; 32], ());
        }
        assert_eq!(cache.entries.len(), 16);
        assert!(cache.order.len() <= 32, "queue: {}", cache.order.len());
        assert_eq!(cache.get(&[7; 32]), Some(()), "the newest insert stays");
    }
}
