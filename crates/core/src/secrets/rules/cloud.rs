//! Cloud providers and their infrastructure services.

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "aws-access-token",
        description: "an AWS access key id",
        keywords: &["akia", "asia", "abia", "acca"],
        pattern: r"\b(?P<secret>(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "aws-secret-access-key",
        description: "an AWS secret access key",
        keywords: &["secret"],
        pattern: r#"(?i)(?:aws[\w. -]{0,30}secret|secret_?access_?key)[\w. -]{0,30}["']?[ \t]*[:=][ \t]*["']?(?P<secret>[A-Za-z0-9/+]{40})\b"#,
        entropy: 3.0,
        class: Class::Assignment,
    },
];
