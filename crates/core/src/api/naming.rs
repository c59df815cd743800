//! The pure mapping from a handoff key to Kubernetes names and labels.
//!
//! A handoff key is the conversation object key: any string, stable per issue
//! (`acme/api#42`, `Incident 7`, even `日本`). Kubernetes names are DNS-1123
//! subdomains, so the key is *folded* into a readable prefix (lower-cased,
//! everything outside `[a-z0-9-]` turned into `-`, runs of `-` collapsed,
//! trimmed) and suffixed with a hash of the *exact* key. Two keys that fold
//! alike (`Foo` / `foo`, `a/b` / `a.b`) therefore never share a name, and the
//! apiserver's name uniqueness becomes the "one current handoff per key"
//! guarantee: a write to a key is a server-side apply to one name.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::names::{KIND_LABEL, PROJECT_LABEL, REPO_LABEL};
use sha2::{Digest, Sha256};

/// Longest readable prefix kept from the folded key. With the `-` separator
/// and [`HASH_HEX_LEN`] characters of hash the name stays within 63
/// characters, so it is also a valid DNS-1123 *label* (friendlier in columns,
/// usable as a label value).
pub(crate) const PREFIX_MAX: usize = 46;

/// Hex characters of SHA-256 kept in a name: 64 bits, so a collision between
/// two keys with the same folded prefix needs ~4 billion keys to become likely.
pub(crate) const HASH_HEX_LEN: usize = 16;

/// Prefix used when nothing readable survives folding (e.g. `日本`, `///`, ``).
pub(crate) const EMPTY_PREFIX: &str = "handoff";

/// The `metadata.name` of the Handoff that holds `key`.
pub fn name_for_key(key: &str) -> String {
    let prefix = fold(key);
    let prefix = if prefix.is_empty() {
        EMPTY_PREFIX
    } else {
        &prefix
    };
    format!("{prefix}-{}", key_hash(key))
}

/// Lower-case, map everything outside `[a-z0-9-]` to `-`, collapse runs of
/// `-`, trim `-` at both ends and cut to [`PREFIX_MAX`] characters.
fn fold(key: &str) -> String {
    let mut out = String::with_capacity(key.len().min(PREFIX_MAX));
    for c in key.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        if out.len() == PREFIX_MAX {
            break;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The first [`HASH_HEX_LEN`] hex characters of SHA-256 over the exact key bytes.
fn key_hash(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let mut hex = String::with_capacity(HASH_HEX_LEN);
    for byte in digest.iter().take(HASH_HEX_LEN / 2) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Whether `value` is a valid Kubernetes label value: at most 63 characters,
/// alphanumerics, `-`, `_` and `.`, beginning and ending with an alphanumeric
/// (the empty string is valid too).
pub(crate) fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_none_or(u8::is_ascii_alphanumeric);
    bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && edge_ok(bytes.first())
        && edge_ok(bytes.last())
}

/// The labels for a handoff's `project`, `repo` and `kind`, each present only
/// when its value is a non-empty valid label value.
pub fn labels_for(
    project: &str,
    repo: Option<&str>,
    kind: Option<&str>,
) -> BTreeMap<String, String> {
    [
        (PROJECT_LABEL, Some(project)),
        (REPO_LABEL, repo),
        (KIND_LABEL, kind),
    ]
    .into_iter()
    .filter_map(|(key, value)| {
        let value = value.filter(|v| !v.is_empty() && is_label_value(v))?;
        Some((key.to_owned(), value.to_owned()))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    use super::*;

    /// Whether `name` is a valid DNS-1123 subdomain (what `metadata.name` of most
    /// resources must be).
    fn is_dns1123_subdomain(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|part| {
                let b = part.as_bytes();
                !b.is_empty()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                    && b[0] != b'-'
                    && b[b.len() - 1] != b'-'
            })
    }

    #[test]
    fn readable_prefix_plus_hash() {
        let cases = [
            ("acme/api#42", "acme-api-42"),
            ("Foo", "foo"),
            ("foo", "foo"),
            ("  --Hello,  World!--  ", "hello-world"),
            ("日本", EMPTY_PREFIX),
            ("", EMPTY_PREFIX),
            ("---", EMPTY_PREFIX),
            ("a.b.c", "a-b-c"),
        ];
        for (key, prefix) in cases {
            let name = name_for_key(key);
            let (got_prefix, hash) = name.rsplit_once('-').expect("separator");
            assert_eq!(got_prefix, prefix, "key {key:?}");
            assert_eq!(hash.len(), HASH_HEX_LEN, "key {key:?}");
            assert!(is_dns1123_subdomain(&name), "{name}");
        }
    }

    #[test]
    fn keys_that_fold_alike_get_different_names() {
        for (a, b) in [
            ("Foo", "foo"),
            ("a/b", "a.b"),
            ("x y", "x-y"),
            ("日本", "中国"),
            ("", " "),
        ] {
            assert_eq!(fold(a), fold(b));
            assert_ne!(name_for_key(a), name_for_key(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn long_keys_are_cut_at_a_character_boundary_without_trailing_dash() {
        let key = format!("{}-tail", "a".repeat(PREFIX_MAX - 1));
        let name = name_for_key(&key);
        assert!(name.len() <= 63);
        assert!(!name.contains("--"));
        assert_eq!(
            name_for_key(&"é".repeat(10_000)).len(),
            EMPTY_PREFIX.len() + 1 + HASH_HEX_LEN
        );
    }

    #[test]
    fn label_values() {
        let cases = [
            ("x", true),
            ("", true),
            ("my-project_1.0", true),
            ("org/repo", false),
            ("-x", false),
            ("x-", false),
            ("Has Space", false),
            (&"a".repeat(63), true),
            (&"a".repeat(64), false),
            ("ü", false),
        ];
        for (value, ok) in cases {
            assert_eq!(is_label_value(value), ok, "{value:?}");
        }
    }

    #[test]
    fn labels_only_for_valid_values() {
        let labels = labels_for("shop", Some("org/repo"), Some("issue"));
        assert_eq!(labels.get("project").map(String::as_str), Some("shop"));
        assert_eq!(labels.get("repo"), None);
        assert_eq!(labels.get("kind").map(String::as_str), Some("issue"));
        assert!(labels_for("bad project", None, Some("")).is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn any_key_maps_to_a_valid_deterministic_name(key in any::<String>()) {
            let name = name_for_key(&key);
            prop_assert!(is_dns1123_subdomain(&name), "{name}");
            prop_assert!(name.len() <= 63);
            prop_assert_eq!(name_for_key(&key), name);
        }
    }

    proptest! {
        // Each case is a 10,000-character key; a few dozen cover it.
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn huge_unicode_keys_map_to_valid_names(key in proptest::collection::vec(any::<char>(), 10_000)) {
            let key = String::from_iter(key);
            let name = name_for_key(&key);
            prop_assert!(is_dns1123_subdomain(&name) && name.len() <= 63, "{name}");
        }
    }

    #[test]
    fn different_keys_map_to_different_names_in_a_large_sample() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = proptest::collection::vec(any::<char>(), 0..24).prop_map(String::from_iter);
        let mut seen: HashMap<String, String> = HashMap::new();
        for _ in 0..100_000 {
            let key = strategy.new_tree(&mut runner).expect("strategy").current();
            let name = name_for_key(&key);
            if let Some(previous) = seen.insert(name.clone(), key.clone()) {
                assert_eq!(previous, key, "collision on {name}");
            }
        }
        assert!(seen.len() > 50_000, "sample too small: {}", seen.len());
    }
}
