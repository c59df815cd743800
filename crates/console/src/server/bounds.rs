//! The bounds of open live streams: in all and per person. A stream holds
//! a [`Permit`] for as long as it is open; dropping it gives the place back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How many streams are open, in all and per person.
#[derive(Default)]
struct Open {
    total: usize,
    by_person: HashMap<String, usize>,
}

/// The bounds of open streams.
pub(super) struct Bounds {
    total: usize,
    per_person: usize,
    open: Arc<Mutex<Open>>,
}

/// One open stream's place; given back when the stream is dropped.
pub(super) struct Permit {
    open: Arc<Mutex<Open>>,
    person: String,
}

impl Bounds {
    pub(super) fn new(total: usize, per_person: usize) -> Self {
        Self {
            total,
            per_person,
            open: Arc::default(),
        }
    }

    /// A place for one more stream of `person`, if within both bounds.
    pub(super) fn admit(&self, person: &str) -> Option<Permit> {
        let mut open = self.open.lock().ok()?;
        let mine = open.by_person.get(person).copied().unwrap_or(0);
        if open.total >= self.total || mine >= self.per_person {
            return None;
        }
        open.total += 1;
        open.by_person.insert(person.to_owned(), mine + 1);
        Some(Permit {
            open: self.open.clone(),
            person: person.to_owned(),
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Ok(mut open) = self.open.lock() else {
            return;
        };
        open.total = open.total.saturating_sub(1);
        if let Some(mine) = open.by_person.get_mut(&self.person) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.by_person.remove(&self.person);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_bounded_per_person_and_in_all() {
        let bounds = Bounds::new(3, 2);
        let a1 = bounds.admit("a").expect("a's first");
        let a2 = bounds.admit("a").expect("a's second");
        assert!(bounds.admit("a").is_none(), "a's third is past a's bound");
        let b1 = bounds.admit("b").expect("b's first");
        assert!(bounds.admit("c").is_none(), "past the bound of all");
        drop(a1);
        let c1 = bounds.admit("c").expect("a place was given back");
        drop((a2, b1, c1));
        let open = bounds.open.lock().expect("lock");
        assert_eq!(open.total, 0);
        assert!(open.by_person.is_empty());
    }
}
