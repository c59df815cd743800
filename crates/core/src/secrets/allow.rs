//! The allowlist: what has a credential's place or shape but is not one.
//!
//! An honest text that is refused is a bug to fix here, not something the
//! writer should work around. Every entry has near misses in the corpus
//! (`tests/fixtures/secrets/near_misses.rs`).

use super::rules::Class;

/// Whether the `secret` a rule of `class` matched is allowed.
pub(super) fn allowed(class: Class, secret: &str) -> bool {
    match class {
        Class::Prefixed => is_placeholder(secret),
        Class::Assignment => {
            is_placeholder(secret)
                || is_reference(secret)
                || is_path(secret)
                || is_content_hash(secret)
                || is_uuid(secret)
                || is_plain_word(secret)
        }
    }
}

/// Words that mark a value as a stand-in.
const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "placeholder",
    "redacted",
    "dummy",
    "sample",
    "changeme",
    "change_me",
    "change-me",
    "replace",
    "your_",
    "your-",
    "yourtoken",
    "yourpassword",
    "notreal",
    "not-real",
    "not_real",
    "<",
];

/// A stand-in: a placeholder word, a run of `x` / `*` / `.` / `…`, or one
/// character repeated.
fn is_placeholder(secret: &str) -> bool {
    let lower = secret.to_ascii_lowercase();
    if PLACEHOLDER_WORDS.iter().any(|w| lower.contains(w)) {
        return true;
    }
    if lower.contains("xxxx")
        || secret.contains("***")
        || secret.contains("...")
        || secret.contains('…')
    {
        return true;
    }
    let mut chars = secret.chars().filter(|c| c.is_ascii_alphanumeric());
    match chars.next() {
        None => true,
        Some(first) => chars.all(|c| c == first),
    }
}

/// A reference to where the value lives: `${VAR}`, `$VAR`, `$(cat …)`,
/// `{{ .Values.x }}`, `%(name)s`, `<token>`.
fn is_reference(secret: &str) -> bool {
    secret.starts_with('$')
        || secret.contains("${")
        || secret.contains("$(")
        || secret.contains("{{")
        || secret.starts_with("%(")
        || secret.starts_with('<')
}

/// A filesystem path: `/…`, `./…`, `../…`, `~/…`, `C:\…`.
fn is_path(secret: &str) -> bool {
    let bytes = secret.as_bytes();
    secret.starts_with('/')
        || secret.starts_with("./")
        || secret.starts_with("../")
        || secret.starts_with("~/")
        || (bytes.len() > 2
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && bytes[2] == b'\\')
}

/// A content hash: a hex digest (32, 40, 64 or 128 digits, with or without
/// an `sha256:` style prefix), a subresource-integrity value
/// (`sha512-…`, as in lockfiles) or a `go.sum` hash (`h1:…`).
fn is_content_hash(secret: &str) -> bool {
    let digest = secret
        .split_once(':')
        .filter(|(algorithm, _)| {
            algorithm.starts_with("sha") || *algorithm == "md5" || *algorithm == "blake3"
        })
        .map_or(secret, |(_, digest)| digest);
    let hex = digest.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && matches!(digest.len(), 32 | 40 | 64 | 96 | 128) {
        return true;
    }
    ["sha1-", "sha256-", "sha384-", "sha512-", "h1:"]
        .iter()
        .any(|prefix| secret.starts_with(prefix))
}

/// A UUID (`8-4-4-4-12` hex digits).
fn is_uuid(secret: &str) -> bool {
    let groups: Vec<&str> = secret.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A plain word or identifier, not a secret: letters only, or words joined
/// by `-`, `_` or `.` (`required`, `from-secret`, `db.password.file`).
fn is_plain_word(secret: &str) -> bool {
    secret.bytes().all(|b| b.is_ascii_alphabetic())
        || (secret.split(['-', '_', '.']).count() > 1
            && secret
                .split(['-', '_', '.'])
                .all(|w| w.bytes().all(|b| b.is_ascii_lowercase())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_by_example() {
        let cases = [
            (
                Class::Prefixed,
                "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                true,
            ),
            (
                Class::Prefixed,
                "ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
                true,
            ),
            (Class::Prefixed, "AKIAIOSFODNN7EXAMPLE", true),
            (
                Class::Prefixed,
                "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A",
                false,
            ),
            (Class::Prefixed, "/home/runner/work", false),
            (Class::Assignment, "placeholder", true),
            (Class::Assignment, "<redacted>", true),
            (Class::Assignment, "${DB_PASSWORD}", true),
            (Class::Assignment, "$(cat", true),
            (Class::Assignment, "$TOKEN", true),
            (Class::Assignment, "{{.Values.password}}", true),
            (Class::Assignment, "********", true),
            (Class::Assignment, "/home/runner/work/shop/shop_api", true),
            (Class::Assignment, "./secrets/db.txt", true),
            (Class::Assignment, "~/.kube/config", true),
            (Class::Assignment, "C:\\Users\\ci\\token.txt", true),
            (
                Class::Assignment,
                "3f786850e387550fdab836ed7e6dc881de23001b",
                true,
            ),
            (
                Class::Assignment,
                "sha256:9b2a3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809",
                true,
            ),
            (Class::Assignment, "sha512-Zm9vYmFyYmF6cXV4", true),
            (Class::Assignment, "h1:Zm9vYmFyYmF6cXV4PQ=", true),
            (
                Class::Assignment,
                "123e4567-e89b-12d3-a456-426614174000",
                true,
            ),
            (Class::Assignment, "required", true),
            (Class::Assignment, "from-secret-ref", true),
            (Class::Assignment, "hunter2!", false),
            (Class::Assignment, "s3cr3t-Pa55", false),
            (Class::Assignment, "Qm9iOnNlY3JldA9x", false),
        ];
        for (class, secret, want) in cases {
            assert_eq!(allowed(class, secret), want, "{class:?} {secret:?}");
        }
    }
}
