//! Source hosting, package registries, CI and developer tooling.

use super::{Class, Rule};

pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "github-pat",
        description: "a GitHub personal access token (classic)",
        keywords: &["ghp_"],
        pattern: r"\bghp_[A-Za-z0-9]{36}\b",
        entropy: 3.0,
        class: Class::Prefixed,
    },
    Rule {
        id: "gitlab-pat",
        description: "a GitLab personal access token",
        keywords: &["glpat-"],
        pattern: r"\bglpat-[A-Za-z0-9_-]{20,}",
        entropy: 3.0,
        class: Class::Prefixed,
    },
];
