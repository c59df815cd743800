//! The names the Handoff loop writes on objects — its conditions, the
//! reason of an unbound name — and how much of a key a note quotes. A leaf:
//! the loop's plan, its Events and grooming read them from here.

/// Characters of a key quoted in an Event's note (keys may be 1 KiB; the
/// whole note may not).
pub(crate) const NOTE_KEY_CHARS: usize = 200;

/// The condition that reports the mirror row.
pub const MIRRORED: &str = "Mirrored";

/// The condition that reports the quality lint of the body.
pub const LINTED: &str = "Linted";

/// The condition that reports, False, an object whose name is not derived
/// from its key (set on such objects only: name and key never change).
pub const KEY_BOUND: &str = "KeyBound";

/// The reason of a False [`KEY_BOUND`] and of its Warning Event.
pub const NAME_NOT_DERIVED: &str = "NameNotDerivedFromKey";
