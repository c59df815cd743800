//! Credentials recognised by where they stand rather than by their shape:
//! a password in a URL or an assignment, HTTP authentication headers and
//! cookies, curl's credentials, passwords on command lines and in
//! `.pgpass` / `.netrc`, and gitleaks' catch-all `generic-api-key`.
//! These are [`Class::Assignment`] rules (the place says credential, so a
//! value shaped like a hash is one there too), but `generic-api-key`, which
//! finds its name by one word of it and is [`Class::Named`].

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "curl-auth-user",
        description: "a user and password given to curl (-u / --user)",
        keywords: &["curl"],
        pattern: r#"\bcurl\b[^\n]*?(?:\s-u\s*|\s--user[ =])["']?[^\s:"'@]+:(?P<secret>[^\s"']+)"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "curl-auth-header",
        description: "an Authorization header given to curl (-H)",
        keywords: &["curl"],
        pattern: r#"(?i)\bcurl\b[^\n]*?(?:-H|--header)[ =]?["']?authorization:[ \t]*(?:bearer|basic|token|apikey)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "authorization-header",
        description: "an HTTP Authorization header's credential",
        keywords: &["authorization"],
        pattern: r#"(?i)\bauthorization["']?[ \t]*[:=][ \t]*["']?(?:bearer|basic|token|apikey|digest)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "api-key-header",
        description: "an API key or auth token sent as an HTTP header",
        keywords: &[
            "x-api-key",
            "api-key",
            "x-auth-token",
            "apikey",
            "x-access-token",
        ],
        pattern: r#"(?i)\b(?:x-api-key|api-key|apikey|x-auth-token|x-access-token)["']?[ \t]*:[ \t]*["']?(?P<secret>[A-Za-z0-9._~+/=-]{12,})"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "session-cookie",
        description: "a session cookie sent or set over HTTP",
        keywords: &["cookie"],
        pattern: r#"(?i)\b(?:set-)?cookie["']?[ \t]*:[ \t]*(?:[^\n]*?;[ \t]*)?[\w.-]*(?:sess|sid|auth|token|jwt)[\w.-]*=(?P<secret>[A-Za-z0-9._~+/%=-]{16,})"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "password-in-url",
        description: "a password in a URL's user information",
        keywords: &["://"],
        pattern: r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s/@]+)@[^\s/@]",
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "pgpass-password",
        description: "a password in a PostgreSQL .pgpass line (host:port:database:user:password)",
        keywords: &["pgpass", ":5432:"],
        pattern: r"(?m)^[ \t]*(?:[\w.-]+|\*):(?:[0-9]+|\*):(?:[\w.-]+|\*):(?:[\w.@-]+|\*):(?P<secret>\S{4,})[ \t]*$",
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "netrc-password",
        description: "a password in a .netrc entry (machine, login, password)",
        keywords: &["netrc", "machine"],
        pattern: r"\bmachine[ \t]+[\w.-]+(?:\s+(?:login|account)[ \t]+\S+)*\s+password[ \t]+(?P<secret>\S{4,})",
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "cli-password-flag",
        description: "a password given on a command line (mysql -p, sshpass -p, redis-cli -a, docker login -p, mongosh -p)",
        keywords: &["mysql", "sshpass", "redis-cli", "docker login", "mongo"],
        pattern: r#"(?:\bmysql(?:dump|admin|sh)?\b[^\n]*?[ \t]-p|\bsshpass\b[^\n]*?[ \t]-p[ \t]*|\bredis-cli\b[^\n]*?[ \t](?:-a|--pass)[ \t]+|\bdocker[ \t]+login\b[^\n]*?[ \t]-p[ \t]+|\bmongo(?:sh)?\b[^\n]*?[ \t]-p[ \t]+)["']?(?P<secret>[^\s"'-][^\s"']{3,})"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    Rule {
        id: "cli-token-flag",
        description: "a key, token or secret given to a command-line flag as its own argument (--token <value>, --api-key <value>)",
        keywords: &["-token", "-key", "-secret"],
        pattern: r#"(?i)(?:^|[\s"'])--(?:[a-z0-9]+-)*(?:token|key|secret|apikey)[ \t]+["']?(?P<secret>[A-Za-z0-9_.=+/~][A-Za-z0-9_.=+/~-]{15,149})(?:["'\s;,]|$)"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
    Rule {
        id: "password-assignment",
        description: "a password assigned to a variable, flag or setting",
        keywords: &["pass", "pwd"],
        pattern: r#"(?i)(?:(?:password|passwd|passphrase|pwd|pass)\b["']?[ \t]*(?::=|=>|=)|(?:password|passwd|passphrase|pwd|_pass|(?-i:pass|Pass))\b["']?[ \t]*:|--(?:password|passwd|pass)[ \t]+)[ \t]*["']?(?P<secret>[^\s"'`,;]{4,})"#,
        entropy: 0.0,
        class: Class::Assignment,
    },
    // ASCII classes and nothing before the keyword: with a Unicode `\w`
    // lead-in under `(?i)` this rule alone took about 7 ms on a 32 KiB body
    // of near misses (release), now about 0.06 ms.
    Rule {
        id: "generic-api-key",
        description: "a high-entropy value assigned to a name like key, secret or token",
        keywords: &[
            "key",
            "secret",
            "token",
            "access",
            "auth",
            "api",
            "credential",
            "creds",
        ],
        pattern: r#"(?i)(?:access|auth|api|credential|creds|key|secret|token)[A-Za-z0-9_.-]{0,20}["']?[ \t]*(?::=|=>|[:=])[ \t]*["'`]?(?P<secret>[A-Za-z0-9_.=+/~-]{16,150})(?:["'`\s;,]|\\[nr]|$)"#,
        entropy: 3.7,
        class: Class::Named,
    },
];
