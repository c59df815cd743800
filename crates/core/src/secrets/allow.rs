//! The allowlist: what has a credential's place or shape but is not one.
//!
//! An honest text that is refused is a bug to fix here, not something the
//! writer should work around. A credential that passes for a hash is one
//! too: a value shaped like a git SHA, a digest or a UUID is allowed only
//! where the name it is assigned to says hash, commit or id, or names no
//! credential (issue 39: `X-API-Key: <40 hex>` was stored). Every entry has near misses in the corpus
//! (`tests/fixtures/secrets/near_misses.rs`).

use super::rules::Class;

/// Whether the `secret` a rule of `class` matched is allowed; `name` is
/// what it is assigned to (read for [`Class::Named`] only).
pub(super) fn allowed(class: Class, secret: &str, name: &str) -> bool {
    match class {
        Class::Prefixed => is_placeholder(secret),
        Class::Assignment => is_assigned_non_secret(secret),
        Class::Named => {
            is_assigned_non_secret(secret) || (!names_credential(name) && is_hex_id(secret))
        }
    }
}

/// What an assigned value can be without being a credential, whatever
/// the name says.
fn is_assigned_non_secret(secret: &str) -> bool {
    is_placeholder(secret)
        || is_reference(secret)
        || is_code(secret)
        || is_path(secret)
        || is_labelled_digest(secret)
        || is_public_key(secret)
        || is_plain_word(secret)
        || is_identifier(secret)
}

/// A value shaped like an id or a digest and nothing else: a bare hex
/// digest (a git SHA), a GPG key id, a UUID. Assigned to a credential's
/// name it is a credential (`X-API-Key: <40 hex>`), so only a name that
/// says hash, or names no credential, lets it through.
fn is_hex_id(secret: &str) -> bool {
    is_hex_digest(secret) || is_key_id(secret) || is_uuid(secret)
}

/// Whether `name` (`GITHUB_TOKEN`, `--api-key`, `apiKey`, `COMMIT_SHA`)
/// names a credential: its last word that says either decides, so
/// `api_commit_sha` and `KEY_ID` name a hash and an id, `HASH_KEY` and
/// `signing_key` a key; a name with neither (`api_version`) names none.
fn names_credential(name: &str) -> bool {
    for word in words(name).iter().rev() {
        if says_hash(word) {
            return false;
        }
        if says_credential(word) {
            return true;
        }
    }
    false
}

/// The lower-cased words of a name: split at what is not a letter or a
/// digit and where a lower-case letter meets an upper-case one (`apiKey`).
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut word = String::new();
        let mut prev_lower = false;
        for c in part.chars() {
            if c.is_ascii_uppercase() && prev_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            word.push(c.to_ascii_lowercase());
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

/// A word that says the value is a hash, a digest or a commit (`sha`,
/// `sha256`, `digest`, `commit`, `checksum`), or what refers to a
/// credential rather than the credential itself (`id`, `version`, `name`:
/// `secret_version: <uuid>`).
fn says_hash(word: &str) -> bool {
    const HASH_WORDS: &[&str] = &[
        "hash",
        "digest",
        "commit",
        "checksum",
        "sum",
        "integrity",
        "fingerprint",
        "id",
        "uuid",
        "etag",
        "keyid",
        "version",
        "name",
        "ref",
    ];
    HASH_WORDS.contains(&word)
        || word
            .strip_prefix("sha")
            .is_some_and(|bits| bits.bytes().all(|b| b.is_ascii_digit()))
}

/// A word that names a credential: it is, or ends with, key, token,
/// secret or password (`apikey`, `authtoken`), or it is a short form
/// (`pass`, `pwd`, `auth`, `creds`).
fn says_credential(word: &str) -> bool {
    const ENDINGS: &[&str] = &["key", "token", "secret", "password", "passwd", "passphrase"];
    const WORDS: &[&str] = &["pass", "pwd", "auth", "creds", "credential", "credentials"];
    ENDINGS.iter().any(|e| word.ends_with(e)) || WORDS.contains(&word)
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

/// A bare hex digest: 32, 40, 64, 96 or 128 hex digits (MD5, a git SHA,
/// SHA-256, SHA-384, SHA-512).
fn is_hex_digest(secret: &str) -> bool {
    secret.bytes().all(|b| b.is_ascii_hexdigit()) && matches!(secret.len(), 32 | 40 | 64 | 96 | 128)
}

/// A digest that says what it is: a hex digest behind its algorithm
/// (`sha256:…`, `md5:…`, `blake3:…`), a subresource-integrity value
/// (`sha512-…`, as in lockfiles) or a `go.sum` hash (`h1:…`).
fn is_labelled_digest(secret: &str) -> bool {
    let labelled = secret.split_once(':').is_some_and(|(algorithm, digest)| {
        (algorithm.starts_with("sha") || algorithm == "md5" || algorithm == "blake3")
            && is_hex_digest(digest)
    });
    labelled
        || ["sha1-", "sha256-", "sha384-", "sha512-", "h1:"]
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
                false,
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
                false,
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
            (Class::Assignment, "3AA5C34371567BD2", false),
            (Class::Assignment, "3aa5c34371567bd2", false),
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
            assert_eq!(allowed(class, secret, ""), want, "{class:?} {secret:?}");
        }
    }

    #[test]
    fn a_hash_assigned_to_a_credentials_name_is_not_allowed() {
        let sha = "3f786850e387550fdab836ed7e6dc881de23001b";
        let uuid = "123e4567-e89b-12d3-a456-426614174000";
        // (the name, the value, allowed as a Named rule's match)
        let cases = [
            ("GITHUB_TOKEN", sha, false),
            ("--api-key", sha, false),
            ("apiKey", sha, false),
            ("API_KEY", uuid, false),
            ("client_secret", sha, false),
            ("HASH_KEY", sha, false),
            ("signing_key", "3AA5C34371567BD2", false),
            ("COMMIT_SHA", sha, true),
            ("api_commit_sha", sha, true),
            ("cache_key_sha256", sha, true),
            ("commitSha", sha, true),
            ("KEY_ID", "3AA5C34371567BD2", true),
            ("access_log", sha, true),
            ("secret_version", uuid, true),
            ("api_version", sha, true),
            ("GITHUB_TOKEN", "placeholder", true),
            ("GITHUB_TOKEN", "${GITHUB_TOKEN}", true),
            ("API_KEY", &format!("sha256:{sha}{sha}")[..71], true),
        ];
        for (name, secret, want) in cases {
            assert_eq!(
                allowed(Class::Named, secret, name),
                want,
                "{name} = {secret:?}"
            );
        }
        // The other classes read no name.
        assert!(!allowed(Class::Assignment, sha, "COMMIT_SHA"));
        assert!(!allowed(Class::Prefixed, sha, "COMMIT_SHA"));
    }
}
