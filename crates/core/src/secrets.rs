//! The credential detector: one rule table that every path checks.
//!
//! A handoff lives in etcd, in every etcd backup and in the PostgreSQL
//! mirror's history, and every later agent reads it: a credential written
//! into one leaks for as long as any of those copies lives. So a write that
//! holds one is refused, on every path, by the same [`RULES`]:
//!
//! - the bridge (`write_handoff`, `offer_handoff`) checks every text field
//!   before anything is sent and names the field, the kind of credential and
//!   the line ([`crate::api::validation::no_credentials`]), never the secret;
//! - `kubectl`, GitOps and any other apiserver writer meet a
//!   ValidatingAdmissionPolicy generated from the same table
//!   ([`admission_policy`], committed as
//!   `config/policy/credentials-policy.yaml`; a test fails when it differs).
//!   CEL names the field and the kind, not the line;
//! - the rescue handoff (extracted from a transcript that may hold
//!   credentials) calls [`redact`] before writing.
//!
//! Every pattern is valid in both the `regex` crate and RE2 (what CEL's
//! `matches()` runs): no look-around, no back-references, `\x27` for a
//! single quote so a pattern fits a raw CEL string. Each rule stands alone
//! (no entropy score, keyword pre-filter or allow-list a CEL expression
//! could not repeat), so the bridge and the policy cannot disagree.
//!
//! Why our own table rather than a crate: the Rust wrappers of gitleaks'
//! rules (and detect-secrets' / trufflehog's) pair hundreds of patterns with
//! entropy thresholds, keyword pre-filters and allow-lists evaluated in code.
//! The policy cannot run those, hundreds of `matches()` over a 32 Ki body
//! would exhaust CEL's cost budget, and without the filters the patterns
//! raise false alarms on ordinary handoffs. The table below covers the kinds
//! the project promises (issue 17) with shapes taken from the vendors'
//! documented formats, and is tested on a corpus of true positives and near
//! misses (`tests/fixtures/secret_corpus.rs`).
//!
//! False-positive policy: a value with a credential's full shape is refused
//! even when it is a placeholder (`ghp_` and 36 `X`s): write `ghp_…`,
//! `<token>` or a reference ("the token in Secret ci/github") instead.
//! Shorter or elided forms (`sk-...`, `ghp_xxx`), `Bearer <token>`,
//! `password: <redacted>` / `********` / `${VAR}`, URLs with a user but no
//! password, hex digests, UUIDs and base64 images are accepted.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// One kind of credential and its pattern.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// What is found, in words (named in refusals and in `[redacted: …]`).
    pub kind: &'static str,
    /// The pattern (RE2 syntax, no single quote).
    pub pattern: &'static str,
}

/// The rule table, most specific first: where two rules match overlapping
/// text, the earlier one names it (Anthropic's `sk-ant-` before OpenAI's
/// `sk-`), here and in the admission policy.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        kind: "private key",
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    },
    Rule {
        kind: "GCP service-account key",
        pattern: r#""type"\s*:\s*"service_account"|"private_key_id"\s*:\s*"[0-9a-f]{40}""#,
    },
    Rule {
        kind: "AWS access key id",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    },
    Rule {
        kind: "AWS secret access key",
        pattern: r#"(?i)(?:aws[\w. -]{0,30}secret|secret_?access_?key)[\w. -]{0,30}["\x27]?\s*[:=]\s*["\x27]?[A-Za-z0-9/+]{40}"#,
    },
    Rule {
        kind: "GitHub token",
        pattern: r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b",
    },
    Rule {
        kind: "GitLab token",
        pattern: r"\bglpat-[A-Za-z0-9_-]{20,}",
    },
    Rule {
        kind: "Slack token",
        pattern: r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    },
    Rule {
        kind: "Slack webhook URL",
        pattern: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}",
    },
    Rule {
        kind: "Anthropic API key",
        pattern: r"\bsk-ant-[A-Za-z0-9_-]{32,}",
    },
    Rule {
        kind: "OpenAI API key",
        pattern: r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",
    },
    Rule {
        kind: "JSON Web Token (e.g. a Kubernetes ServiceAccount token)",
        pattern: r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
    },
    Rule {
        kind: "Authorization header credential",
        pattern: r"(?i)authorization\s*[:=]\s*[\x22\x27]?(?:bearer|basic|token)\s+[A-Za-z0-9._~+/-]{8,}=*",
    },
    Rule {
        kind: "password in a URL",
        pattern: r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+:[^\s/@<$*{][^\s/@]*@",
    },
    Rule {
        kind: "password assignment",
        pattern: r#"(?i)(?:password|passwd|pwd)\s*["\x27]?\s*[:=]\s*["\x27]?[^\s"\x27<$*{\[(][^\s"\x27]*[0-9!#%&+=@^_~][^\s"\x27]*"#,
    },
];

/// A credential found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule's [`Rule::kind`].
    pub kind: &'static str,
    /// The 1-based line where it starts.
    pub line: usize,
    /// Its bytes in the text.
    pub range: Range<usize>,
}

static COMPILED: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| {
            let regex = Regex::new(rule.pattern)
                .unwrap_or_else(|e| panic!("rule {:?} does not compile: {e}", rule.kind));
            (rule.kind, regex)
        })
        .collect()
});

/// Every credential in `text`, in order of position. Where rules overlap,
/// the earlier rule of [`RULES`] names the text.
pub fn find(text: &str) -> Vec<Finding> {
    let mut found: Vec<Finding> = Vec::new();
    for (kind, regex) in COMPILED.iter() {
        for m in regex.find_iter(text) {
            let range = m.range();
            if found
                .iter()
                .any(|f| f.range.start < range.end && range.start < f.range.end)
            {
                continue;
            }
            found.push(Finding {
                kind,
                line: line_of(text, range.start),
                range,
            });
        }
    }
    found.sort_by_key(|f| f.range.start);
    found
}

/// `text` with every finding replaced by `[redacted: <kind>]`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for finding in find(text) {
        out.push_str(&text[at..finding.range.start]);
        out.push_str(&format!("[redacted: {}]", finding.kind));
        at = finding.range.end;
    }
    out.push_str(&text[at..]);
    out
}

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The name of the generated admission policy (and of its binding).
pub const POLICY_NAME: &str = "handoff.dev-no-credentials";

/// The fields the policy checks, on Handoffs and HandoffOffers: every
/// string a writer supplies that is stored and shown to agents
/// (`createdBy` is the writer's user name, checked by another policy).
pub(crate) const POLICY_FIELDS: &[&str] = &[
    "handoffKey",
    "fromKey",
    "project",
    "repo",
    "kind",
    "to",
    "session",
    "artifact",
    "body",
];

/// The ValidatingAdmissionPolicy (and its binding) that refuses a Handoff or
/// HandoffOffer holding a credential in any of [`POLICY_FIELDS`], generated
/// from [`RULES`]. One variable per field names the first rule that matches
/// it (`''` when none); one validation per field refuses with that kind.
pub fn admission_policy() -> String {
    let mut out = String::from(POLICY_HEADER);
    out.push_str(&format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {POLICY_NAME}
  labels:
    app.kubernetes.io/part-of: handoff
spec:
  # Refuse rather than admit unchecked when the policy cannot be evaluated.
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [\"handoff.dev\"]
        apiVersions: [\"*\"]
        operations: [\"CREATE\", \"UPDATE\"]
        resources: [\"handoffs\", \"handoffoffers\"]
  matchConditions:
    # Only content writes: labels, finalizers and the garbage collector
    # never add text (and must still work on objects older than this policy).
    - name: writes-content
      expression: \"request.operation == 'CREATE' || object.spec != oldObject.spec\"
  variables:
"
    ));
    for field in POLICY_FIELDS {
        out.push_str(&format!(
            "    - name: {field}\n      expression: >-\n        "
        ));
        let value = format!("object.spec.?{field}.orValue('')");
        let mut chain = String::new();
        for rule in RULES {
            chain.push_str(&format!(
                "{value}.matches(r'{}') ? '{}' :\n        ",
                rule.pattern, rule.kind
            ));
        }
        chain.push_str("''\n");
        out.push_str(&chain);
    }
    out.push_str("  validations:\n");
    for field in POLICY_FIELDS {
        out.push_str(&format!(
            "    - expression: \"variables.{field} == ''\"
      messageExpression: >-
        'spec.{field} holds a credential (' + variables.{field} + '); rule: no credentials
        in handoffs (they are kept in etcd, its backups and the mirror): remove it,
        or name where it lives (e.g. the token in Secret ci/github). The MCP bridge
        names the line'
      reason: Invalid
"
        ));
    }
    out.push_str(&format!(
        "---
# Enforce the policy everywhere (Deny: reject, and audit the rejection).
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {POLICY_NAME}
  labels:
    app.kubernetes.io/part-of: handoff
spec:
  policyName: {POLICY_NAME}
  validationActions: [\"Deny\", \"Audit\"]
"
    ));
    out
}

const POLICY_HEADER: &str = "\
# GENERATED by `handoff policy --dir config/policy` from the rule table in
# crates/core/src/secrets.rs: do not edit (a test fails when this file differs).
#
# Refuses a Handoff or HandoffOffer that holds a credential in a field a
# writer supplies, whoever writes it (bridge, kubectl, GitOps): private
# keys, AWS and GCP keys, GitHub / GitLab / Slack / OpenAI / Anthropic
# tokens, JWTs (Kubernetes ServiceAccount tokens are JWTs), Authorization
# header values, passwords in URLs and password assignments. The message
# names the field and the kind of credential; the MCP bridge checks the same
# rules first and also names the line. See docs/security.md.
";

/// Writes [`admission_policy`] to `dir/credentials-policy.yaml`.
pub fn write_policy(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(POLICY_FILE), admission_policy())
}

/// The file name of the generated policy under `config/policy`.
pub(crate) const POLICY_FILE: &str = "credentials-policy.yaml";

#[cfg(test)]
mod tests {
    use super::*;

    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/secret_corpus.rs"
    ));

    #[test]
    fn the_corpus_has_no_miss_and_no_false_alarm() {
        let positives = true_positives();
        let misses = near_misses();
        assert!(positives.len() >= 40 && misses.len() >= 40);
        for (kind, text) in &positives {
            let found = find(text);
            assert_eq!(
                found.first().map(|f| f.kind),
                Some(*kind),
                "missed or misnamed: {text:?}: {found:?}"
            );
        }
        for text in &misses {
            assert_eq!(find(text), vec![], "false alarm on {text:?}");
        }
    }

    #[test]
    fn every_rule_has_a_true_positive() {
        let positives = true_positives();
        for rule in RULES {
            assert!(
                positives.iter().any(|(kind, _)| *kind == rule.kind),
                "no corpus entry for {:?}",
                rule.kind
            );
        }
    }

    #[test]
    fn findings_name_the_line_and_the_bytes() {
        let key = format!("AKIA{}", "Q".repeat(16));
        let text = format!("## State\nok\n\nid {key} here\n");
        let start = text.find("AKIA").expect("present");
        assert_eq!(
            find(&text),
            vec![Finding {
                kind: "AWS access key id",
                line: 4,
                range: start..start + 20,
            }]
        );
    }

    #[test]
    fn redaction_replaces_each_finding_by_its_kind() {
        let ant = format!("sk-ant-api03-{}", "a1B2".repeat(10));
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----";
        let cases = [
            ("nothing here", "nothing here".to_owned()),
            (
                &*format!("key {ant} and\n{pem}\nend"),
                "key [redacted: Anthropic API key] and\n[redacted: private key]\nend".to_owned(),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want);
            assert!(find(&redact(text)).is_empty());
        }
    }

    #[test]
    fn patterns_fit_a_raw_cel_string() {
        for rule in RULES {
            assert!(
                !rule.pattern.contains('\'') && !rule.kind.contains('\''),
                "{rule:?}"
            );
        }
    }

    /// `config/policy/credentials-policy.yaml` must be what the rule table
    /// generates: run `handoff policy --dir config/policy`.
    #[test]
    fn the_committed_policy_matches_the_rule_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../config/policy")
            .join(POLICY_FILE);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == admission_policy(),
            "{} differs from the rule table; run `cargo run -q --locked -- policy --dir config/policy`",
            path.display()
        );
    }
}
