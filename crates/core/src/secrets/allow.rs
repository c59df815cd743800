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
                || is_code(secret)
                || is_path(secret)
                || is_content_hash(secret)
                || is_uuid(secret)
                || is_key_id(secret)
                || is_public_key(secret)
                || is_plain_word(secret)
                || is_identifier(secret)
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

/// A stand-in: a placeholder word, a word in brackets as CI logs mask
/// values (`[secure]`, `[MASKED]`), a run of `x` / `*` / `.` / `…`, or one
/// character repeated.
fn is_placeholder(secret: &str) -> bool {
    let lower = secret.to_ascii_lowercase();
    if PLACEHOLDER_WORDS.iter().any(|w| lower.contains(w)) {
        return true;
    }
    if let Some(inside) = lower.strip_prefix('[').and_then(|s| s.strip_suffix(']'))
        && !inside.is_empty()
        && inside
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b' ' || b == b'-')
    {
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
/// `{{ .Values.x }}`, `%(name)s`, `<token>`, or a YAML tag (`!vault` of
/// Ansible, `!Ref` of CloudFormation).
fn is_reference(secret: &str) -> bool {
    secret.starts_with('$')
        || secret.contains("${")
        || secret.contains("$(")
        || secret.contains("{{")
        || secret.starts_with("%(")
        || secret.starts_with('<')
        || secret
            .strip_prefix('!')
            .is_some_and(|tag| !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// Code that reads the value from elsewhere rather than holding it: a call
/// or an index on a dotted name or a lower-case function (`os.environ[`,
/// `System.getenv(`, `self.password.clone()`, `getenv(`), or a dotted path
/// of names that starts with a lower-case one (`process.env.API_KEY`,
/// `var.db_password`, `django.contrib.auth.backends.ModelBackend`).
fn is_code(secret: &str) -> bool {
    let is_name = |s: &str| {
        s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if let Some(at) = secret.find(['(', '[']) {
        let callee = &secret[..at];
        let dotted = callee.contains(['.', ':'])
            && is_name(callee.split(['.', ':']).next().unwrap_or(""))
            && callee
                .split(['.', ':'])
                .filter(|s| !s.is_empty())
                .all(is_name);
        let function =
            !callee.is_empty() && callee.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        // What follows the bracket is nothing (a quote ended the match),
        // the closing bracket or a name: not `hunter(2)`.
        let argument = secret[at + 1..]
            .bytes()
            .next()
            .is_none_or(|b| b == b')' || b == b']' || b.is_ascii_alphabetic() || b == b'_');
        return (dotted || function) && argument;
    }
    // Later parts are tidy names: `snake_case`, `SCREAMING_CASE` or
    // `CamelCase` without digits, not the mixed case of a token.
    let tidy = |s: &str| {
        is_name(s)
            && (s.bytes().all(|b| !b.is_ascii_uppercase())
                || s.bytes().all(|b| !b.is_ascii_lowercase())
                || (s.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
                    && s.bytes().all(|b| b.is_ascii_alphabetic())))
    };
    let mut segments = secret.split('.');
    let first = segments.next().unwrap_or("");
    first.len() >= 2
        && first.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && first.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        && secret.contains('.')
        && segments.all(tidy)
}

/// A filesystem path: `/…`, `./…`, `../…`, `~/…`, `C:\…`, or a relative
/// path to a file (`config/keys/api_key_2026.txt`: at least one `/` and a
/// short lower-case extension).
fn is_path(secret: &str) -> bool {
    let bytes = secret.as_bytes();
    let relative_file = secret.contains('/')
        && secret.rsplit_once('/').is_some_and(|(_, file)| {
            file.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            })
        });
    relative_file
        || secret.starts_with('/')
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

/// A GPG key id (16 hex digits, as `gpg --keyid-format=long` and git's
/// `signingkey` show it): a name for a public key, not a secret.
fn is_key_id(secret: &str) -> bool {
    secret.len() == 16
        && (secret
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
            || secret
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// An age public key (`age1` and 58 lower-case bech32 characters), which
/// `age-keygen` prints as `# public key: age1…`; the secret key is
/// `AGE-SECRET-KEY-1…`.
fn is_public_key(secret: &str) -> bool {
    secret.len() == 62
        && secret.starts_with("age1")
        && secret
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
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
/// by `-`, `_`, `.` or `/` (`required`, `from-secret`, `db.password.file`,
/// `topology.kubernetes.io/zone`).
fn is_plain_word(secret: &str) -> bool {
    secret.bytes().all(|b| b.is_ascii_alphabetic())
        || (secret.split(SEPARATORS).count() > 1
            && secret
                .split(SEPARATORS)
                .all(|w| w.bytes().all(|b| b.is_ascii_lowercase())))
}

/// What joins the words of a name.
const SEPARATORS: [char; 4] = ['-', '_', '.', '/'];

/// A name built of lower-case parts, each a word, a number, a version
/// (`v1beta1`) or a short abbreviation (`k8s`, `v2`, `01`): host names and
/// API groups (three parts or more, with a `.` or `/`:
/// `orders-api-v2.shop.svc.cluster.local`, `storage.k8s.io/v1`) and
/// resource names (four parts or more: `shop-tls-2026-wildcard`). A token
/// has no such structure; fewer parts are not enough (`summer-2024-shop`
/// may be a password, `7q2k9z.x3m8w1v6b4n5c0r7` is a bootstrap token).
fn is_identifier(secret: &str) -> bool {
    let part = |p: &str| {
        let letters = p.bytes().all(|b| b.is_ascii_lowercase());
        let digits = p.bytes().all(|b| b.is_ascii_digit());
        let short = p.len() <= 3
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        !p.is_empty() && (letters || digits || short || is_version(p))
    };
    let parts: Vec<&str> = secret.split(SEPARATORS).collect();
    let enough = if secret.contains(['.', '/']) { 3 } else { 4 };
    parts.len() >= enough
        && parts.iter().all(|p| part(p))
        && parts
            .iter()
            .any(|p| p.len() >= 3 && p.bytes().all(|b| b.is_ascii_lowercase()))
}

/// A version part: `v1`, `v1beta1`, `v2alpha3`.
fn is_version(part: &str) -> bool {
    let Some(rest) = part.strip_prefix('v') else {
        return false;
    };
    let major = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if major.len() == rest.len() {
        return false;
    }
    let minor = major
        .strip_prefix("alpha")
        .or_else(|| major.strip_prefix("beta"))
        .unwrap_or(major);
    minor.bytes().all(|b| b.is_ascii_digit())
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
            (Class::Assignment, "[secure]", true),
            (Class::Assignment, "[MASKED]", true),
            (Class::Assignment, "[Zq9Lx2Wm7]", false),
            (Class::Assignment, "os.environ[", true),
            (Class::Assignment, "System.getenv(", true),
            (Class::Assignment, "getenv(", true),
            (Class::Assignment, "self.password.clone()", true),
            (Class::Assignment, "process.env.API_KEY", true),
            (
                Class::Assignment,
                "django.contrib.auth.backends.ModelBackend",
                true,
            ),
            (Class::Assignment, "Tr0ub4dor(3", false),
            (Class::Assignment, "hunter(2)", false),
            (Class::Assignment, "pass.Word(1)", false),
            (Class::Assignment, "std::env::var(", true),
            (Class::Assignment, "os.environ.get(key)", true),
            (Class::Assignment, "Zq9.Lx2Wm7Vb4", false),
            (Class::Assignment, "3AA5C34371567BD2", true),
            (Class::Assignment, "3aa5c34371567bd2", true),
            (Class::Assignment, "3Aa5C34371567bD2", false),
            (Class::Assignment, "topology.kubernetes.io/zone", true),
            (Class::Assignment, "shop/db", true),
            (Class::Assignment, "storage.k8s.io/v1", true),
            (Class::Assignment, "external-secrets.io/v1beta1", true),
            (
                Class::Assignment,
                "orders-api-v2.shop.svc.cluster.local",
                true,
            ),
            (Class::Assignment, "shop-api-credentials-v2-2026", true),
            (Class::Assignment, "kubernetes/shop-prod-cluster-01", true),
            (Class::Assignment, "7q2k9z.x3m8w1v6b4n5c0r7", false),
            (Class::Assignment, "summer-2024", false),
            (Class::Assignment, "summer-2024-shop", false),
            (Class::Assignment, "kv-shop-prod-weu-001", true),
            (Class::Assignment, "x7k2p9-q3m8w1-v6b4n5", false),
            (
                Class::Assignment,
                "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqql3z7h",
                true,
            ),
            (
                Class::Assignment,
                "age1Ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqql3z7h",
                false,
            ),
            (Class::Assignment, "!vault", true),
            (Class::Assignment, "!Ref", true),
            (Class::Assignment, "!Zq9Lx2", false),
            (Class::Assignment, "var.db_password", true),
            (Class::Assignment, "random_password.db.result", true),
            (Class::Assignment, "sk.eyJ1IjoiZm9vIiwiYSI6ImJhciJ9", false),
            (Class::Assignment, "pass.W0rd", false),
            (
                Class::Assignment,
                "uploads/2026/12/01/7f3a9c2e-invoice.pdf",
                true,
            ),
            (Class::Assignment, "config/keys/api_key_2026.txt", true),
            (Class::Assignment, "Zq9/Lx2Wm7Vb4", false),
            (Class::Assignment, "Zq9/Lx2Wm7.Vb4Nc8", false),
            (Class::Prefixed, "[secure]", true),
            (Class::Prefixed, "shop-api-credentials-v2-2026", false),
            (Class::Assignment, "hunter2!", false),
            (Class::Assignment, "s3cr3t-Pa55", false),
            (Class::Assignment, "Qm9iOnNlY3JldA9x", false),
        ];
        for (class, secret, want) in cases {
            assert_eq!(allowed(class, secret), want, "{class:?} {secret:?}");
        }
    }
}
