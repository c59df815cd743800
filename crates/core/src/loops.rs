//! What every reconcile loop decides the same way, without I/O: how a
//! failure is categorized ([`Category`], [`Categorized`]) and how long its
//! object waits before a retry ([`delay`]), and how an Event's note stays
//! within what the Events API accepts ([`bounded_note`], [`quoted`]). The
//! loops' shared I/O — guarded watches, the backoff's per-object state,
//! the metrics, progress — is `handoff_kube::loops`.

use std::time::Duration;

/// Longest pause between retries of a failing object.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How a reconcile failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// The object or the request is wrong: retrying cannot help until
    /// something changes.
    Invalid,
    /// The apiserver or PostgreSQL is unavailable, a conflict, a timeout:
    /// retrying can.
    Transient,
}

impl Category {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "invalid",
            Self::Transient => "transient",
        }
    }
}

/// An error that knows its [`Category`].
pub trait Categorized {
    /// Invalid or transient.
    fn category(&self) -> Category;
}

/// Pause before retrying an object after its `failures`-th consecutive
/// failure (1-based): 1 s, 2 s, 4 s, … at most [`MAX_BACKOFF`].
pub fn delay(failures: u32, category: Category) -> Duration {
    match category {
        Category::Invalid => MAX_BACKOFF,
        Category::Transient => {
            Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(MAX_BACKOFF)
        }
    }
}

/// Most bytes of an Event's note (the Events API refuses longer ones).
const MAX_NOTE_BYTES: usize = 1024;

/// `note` cut to [`MAX_NOTE_BYTES`] (on a character boundary, marked `…`).
pub fn bounded_note(mut note: String) -> String {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES - '…'.len_utf8();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push('…');
    }
    note
}

/// A key or name as a note quotes it: at most `chars` characters (`…`
/// marks a cut), so the rest of the note still fits.
pub fn quoted(value: &str, chars: usize) -> String {
    if value.chars().count() <= chars {
        return format!("{value:?}");
    }
    let head: String = value.chars().take(chars).collect();
    format!("{head:?}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_ceiling_and_invalid_waits_longest() {
        let cases = [
            (1, Category::Transient, 1),
            (2, Category::Transient, 2),
            (3, Category::Transient, 4),
            (6, Category::Transient, 32),
            (7, Category::Transient, 60),
            (40, Category::Transient, 60),
            (1, Category::Invalid, 60),
        ];
        for (failures, category, secs) in cases {
            assert_eq!(
                delay(failures, category),
                Duration::from_secs(secs),
                "{failures} {category:?}"
            );
        }
    }

    #[test]
    fn quoted_values_are_cut_to_a_number_of_characters() {
        assert_eq!(quoted("acme/api#42", 20), "\"acme/api#42\"");
        assert_eq!(quoted(&"é".repeat(30), 3), "\"ééé\"…");
        assert_eq!(bounded_note("short".into()), "short");
        let cut = bounded_note("x".repeat(2000));
        assert_eq!(cut.len(), MAX_NOTE_BYTES);
        assert!(cut.ends_with('…'));
    }
}
