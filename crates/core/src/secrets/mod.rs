//! The credential detector: one scanner that every path runs.
//!
//! A handoff lives in etcd, in every etcd backup and in the PostgreSQL
//! mirror's history, and every later agent reads it: a credential written
//! into one leaks for as long as any of those copies lives. So a write that
//! holds one is refused on every path by this same code:
//!
//! - the bridge (`write_handoff`, `offer_handoff`) checks every text field
//!   before anything is sent ([`crate::api::validation::no_credentials`]);
//! - `kubectl`, GitOps and any other apiserver writer meet the admission
//!   webhook (`handoff webhook`), which runs the same check on the spec;
//! - the rescue handoff (extracted from a transcript that may hold
//!   credentials) calls [`redact`] before writing.
//!
//! A refusal names the field, the rule id, the line and the column, never
//! the secret.
//!
//! # How a text is scanned
//!
//! Like gitleaks: a keyword pre-filter (one Aho–Corasick pass over the text
//! for every rule's keywords) picks the rules whose pattern can match; only
//! those patterns run. A match is then judged: its credential must reach
//! the rule's entropy and must not be on the allowlist ([`allow`]:
//! placeholders, variable references, paths, digests; hex ids — a bare git
//! SHA, a UUID — only where the name they are assigned to names no
//! credential: `X-API-Key: <40 hex>` is a key, `COMMIT_SHA=<40 hex>` a
//! commit). The
//! text is scanned as written and through three views ([`view`]): with
//! `\n`-style escapes decoded (a JSON string holding a kubeconfig), with
//! line breaks that wrap a token joined, and inside each base64 blob,
//! decoded once.
//!
//! # Why our own rules rather than a crate
//!
//! The candidates on crates.io were judged (December 2026):
//!
//! - `keyspoor` 0.1.x (Apache-2.0, about 220 rules transformed from
//!   gitleaks'): a months-old CLI crate by one author that requires Rust
//!   1.96 (the project builds on 1.95) and brings a CLI's tree (rayon,
//!   ignore, flate2, blake3, clap derive) into the admission webhook.
//! - `nosecrets-rules` 0.3 (MIT, about 50 rules): keywords but no entropy,
//!   rule ids that differ from gitleaks', and fewer rule types than the
//!   issue asks.
//!
//! So the rules ([`rules`]) are written here from the issuers' documented
//! token formats, with gitleaks' rule ids where gitleaks has the rule, its
//! technique (keywords, entropy, allowlists) and maintained building
//! blocks (`aho-corasick`, `regex`, `base64`). The corpus in
//! `tests/fixtures/secrets/` holds true positives for every rule and honest
//! near misses; a unit test asserts the exact counts.

mod allow;
mod engine;
mod rules;
mod view;

use std::ops::Range;

pub use engine::find;

/// A credential found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule's id (gitleaks' where gitleaks has the rule), e.g.
    /// `stripe-access-token`.
    pub rule: &'static str,
    /// What the rule finds, in words.
    pub description: &'static str,
    /// The 1-based line where it starts.
    pub line: usize,
    /// The 1-based column (in characters) where it starts.
    pub column: usize,
    /// Its bytes in the text.
    pub range: Range<usize>,
    /// Where it was seen: in the text as written or in a decoded view.
    pub seen: Seen,
}

/// The view of the text a finding was seen in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    /// The text as written.
    AsWritten,
    /// With `\n`-style escapes decoded.
    Unescaped,
    /// With the line breaks inside a token joined.
    Unwrapped,
    /// Inside a base64 blob, decoded (the range is the whole blob).
    Base64,
}

impl Finding {
    /// Where and what, without the secret: `line 3, column 7: rule
    /// stripe-access-token (a Stripe secret key)`, and how it was seen
    /// when not as written.
    pub fn describe(&self) -> String {
        let seen = match self.seen {
            Seen::AsWritten => "",
            Seen::Unescaped => ", inside an escaped string",
            Seen::Unwrapped => ", wrapped over lines",
            Seen::Base64 => ", inside base64",
        };
        format!(
            "line {}, column {}: rule {} ({}){seen}",
            self.line, self.column, self.rule, self.description
        )
    }
}

/// `text` with every finding replaced by `[redacted: <rule id>]`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for finding in find(text) {
        out.push_str(&text[at..finding.range.start]);
        out.push_str(&format!("[redacted: {}]", finding.rule));
        at = finding.range.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests;
