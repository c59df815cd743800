//! What every paged tool (`list_handoffs`, `list_offers`, `search_handoffs`,
//! `list_revisions`) shares: the page size (`limit`, 1–200, default 50) and
//! one cursor codec. A cursor is opaque to the caller: the base64url (no
//! padding) of the JSON of the tool's position type, so each tool says only
//! what its position is, never how it is written.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use serde::Serialize;
use serde::de::DeserializeOwned;

use handoff_core::api::validation::{self, FieldError};

/// Default page of the paged tools.
pub const DEFAULT_LIST_LIMIT: u32 = 50;
/// Largest page of the paged tools.
pub(crate) const MAX_LIST_LIMIT: u32 = 200;

/// The page size asked for, checked.
pub(crate) fn limit(limit: Option<u32>) -> Result<usize, FieldError> {
    match limit {
        None => Ok(DEFAULT_LIST_LIMIT as usize),
        Some(n) if (1..=MAX_LIST_LIMIT).contains(&n) => Ok(n as usize),
        Some(n) => Err(FieldError {
            field: "limit",
            rule: format!("a page size from 1 to {MAX_LIST_LIMIT}"),
            problem: format!("got {n}"),
        }),
    }
}

/// The cursor of `position`.
pub(crate) fn encode<P: Serialize>(position: &P) -> String {
    B64URL.encode(serde_json::to_vec(position).unwrap_or_default())
}

/// Why a cursor does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undecodable {
    /// Not a cursor's text (a hidden character, a character outside
    /// base64url, too long): [`validation::cursor_problem`]'s problem.
    NotACursor(String),
    /// Base64url, but not the JSON of the position.
    NotAPosition,
}

impl Undecodable {
    /// The problem, as a [`FieldError`] says it.
    pub(crate) fn problem(&self) -> &str {
        match self {
            Self::NotACursor(problem) => problem,
            Self::NotAPosition => "it does not decode to a position",
        }
    }
}

/// The position a cursor holds (surrounding whitespace ignored); its text
/// is checked first ([`validation::cursor_problem`]), so nothing but a
/// cursor's shape is decoded.
pub(crate) fn decode<P: DeserializeOwned>(cursor: &str) -> Result<P, Undecodable> {
    if let Some(problem) = validation::cursor_problem(cursor) {
        return Err(Undecodable::NotACursor(problem));
    }
    let bytes = B64URL
        .decode(cursor.trim())
        .map_err(|_| Undecodable::NotAPosition)?;
    serde_json::from_slice(&bytes).map_err(|_| Undecodable::NotAPosition)
}

/// The refusal of a cursor: `rule` says whose cursor it must be.
pub(crate) fn invalid(rule: &str, problem: &str) -> FieldError {
    FieldError {
        field: "cursor",
        rule: rule.to_owned(),
        problem: problem.to_owned(),
    }
}

/// The cursor argument, when one is given (an empty one is none).
pub(crate) fn given(cursor: Option<&str>) -> Option<&str> {
    cursor.filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Position {
        at: Option<String>,
        key: String,
    }

    #[test]
    fn positions_round_trip_and_what_is_not_one_is_named() {
        let position = Position {
            at: Some("2026-12-01T00:00:00Z".into()),
            key: "a/b c".into(),
        };
        let cursor = encode(&position);
        assert!(
            cursor
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{cursor}"
        );
        assert_eq!(decode::<Position>(&format!(" {cursor} ")), Ok(position));
        // (cursor, words of why it does not decode)
        let cases = [
            ("%%%", "'%' at byte 0, which is not base64url"),
            ("bm90\0IGpzb24", "U+0000 (NUL) at byte 4"),
            ("bm90IGpzb24", "it does not decode to a position"),
            ("bm90I", "it does not decode to a position"),
            (&*encode(&42), "it does not decode to a position"),
        ];
        for (cursor, why) in cases {
            let got = decode::<Position>(cursor).expect_err(cursor);
            assert!(got.problem().contains(why), "{cursor:?}: {got:?}");
        }
    }

    #[test]
    fn page_sizes_are_checked() {
        // (limit, the page size or None when refused)
        let limits = [
            (Some(0), None),
            (Some(201), None),
            (Some(1), Some(1)),
            (Some(200), Some(200)),
            (None, Some(50)),
        ];
        for (asked, want) in limits {
            match (limit(asked), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{asked:?}"),
                (Err(err), None) => assert_eq!(err.field, "limit", "{asked:?}"),
                (got, want) => panic!("{asked:?}: got {got:?}, want {want:?}"),
            }
        }
        assert_eq!(given(Some("")), None);
        assert_eq!(given(Some("c")), Some("c"));
    }
}
