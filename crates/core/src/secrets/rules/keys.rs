//! Private keys, signed tokens and password hashes, whoever issued them:
//! shapes that are decisive on their own.

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "private-key",
        description: "a PEM private key (RSA, EC, DSA, OpenSSH, PKCS#8, PGP)",
        keywords: &["-----begin"],
        pattern: r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
        entropy: 0.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "putty-private-key",
        description: "a PuTTY private key file (.ppk)",
        keywords: &["putty-user-key-file"],
        pattern: r"PuTTY-User-Key-File-[0-9]+:[ \t]*[a-z0-9-]+",
        entropy: 0.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "age-secret-key",
        description: "an age encryption secret key",
        keywords: &["age-secret-key-1"],
        pattern: r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        entropy: 0.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "htpasswd-hash",
        description: "a password hash in an htpasswd line (Apache MD5, bcrypt or SHA-1), as basic auth stores it",
        keywords: &["$apr1$", "$2y$", "$2a$", "$2b$", "{sha}"],
        pattern: r"(?m)^[ \t]*[\w.@-]+:(?P<secret>\$apr1\$[./0-9A-Za-z]{1,8}\$[./0-9A-Za-z]{22}|\$2[aby]\$[0-9]{2}\$[./0-9A-Za-z]{53}|\{SHA\}[A-Za-z0-9+/]{27}=)",
        entropy: 0.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "jwt",
        description: "a JSON Web Token (a Kubernetes ServiceAccount token is one)",
        keywords: &["eyj"],
        pattern: r"\beyJ[A-Za-z0-9_-]{15,}\.eyJ[A-Za-z0-9_-]{15,}\.[A-Za-z0-9_-]{10,}",
        entropy: 3.0,
        class: Class::Prefixed,
    },
];
