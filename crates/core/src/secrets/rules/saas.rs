//! Hosted services: AI providers, messaging, payments, monitoring,
//! productivity.

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "anthropic-api-key",
        description: "an Anthropic API key",
        keywords: &["sk-ant-api"],
        pattern: r"\bsk-ant-api03-[A-Za-z0-9_-]{93}AA\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "slack-bot-token",
        description: "a Slack bot token",
        keywords: &["xoxb-"],
        pattern: r"\bxoxb-[0-9]{10,13}-[0-9]{10,13}[A-Za-z0-9-]*",
        entropy: 3.0,
        class: Class::Prefixed,
    },
];
