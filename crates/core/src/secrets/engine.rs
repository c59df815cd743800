//! The scanner: the compiled rules, the keyword pre-filter, and the passes
//! over a text and its views.

use std::ops::Range;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::AhoCorasick;
use regex::Regex;

use super::rules::{self, Class, Rule};
use super::view::{self, View};
use super::{Finding, Seen, allow};
use crate::text::line_and_column;

/// A rule and its pattern, compiled the first time the pre-filter lets
/// it run: compiling all of them costs about 0.5 s in a release build
/// (4 s in a debug one), which every short-lived process (a hook, the
/// CLI) would pay for the few rules a text activates.
struct Compiled {
    rule: &'static Rule,
    pattern: OnceLock<Pattern>,
}

/// A compiled pattern.
struct Pattern {
    regex: Regex,
    /// The index of the `secret` group, when the pattern has one.
    secret: Option<usize>,
}

/// Every rule compiled, and one automaton over all their keywords.
struct Scanner {
    rules: Vec<Compiled>,
    keywords: AhoCorasick,
    /// For each keyword of the automaton, the rules it activates.
    activates: Vec<Vec<usize>>,
}

static SCANNER: LazyLock<Scanner> = LazyLock::new(Scanner::new);

impl Scanner {
    fn new() -> Self {
        let mut rules_compiled = Vec::new();
        let mut keywords: Vec<&'static str> = Vec::new();
        let mut activates: Vec<Vec<usize>> = Vec::new();
        for (index, rule) in rules::all().enumerate() {
            rules_compiled.push(Compiled {
                rule,
                pattern: OnceLock::new(),
            });
            for keyword in rule.keywords {
                match keywords.iter().position(|k| k == keyword) {
                    Some(at) => activates[at].push(index),
                    None => {
                        keywords.push(keyword);
                        activates.push(vec![index]);
                    }
                }
            }
        }
        let keywords = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&keywords)
            .unwrap_or_else(|e| panic!("the keyword automaton does not build: {e}"));
        Self {
            rules: rules_compiled,
            keywords,
            activates,
        }
    }

    /// Which rules a text activates (the keyword pre-filter).
    fn active(&self, text: &str) -> Vec<bool> {
        let mut active = vec![false; self.rules.len()];
        for hit in self.keywords.find_overlapping_iter(text) {
            for &rule in &self.activates[hit.pattern().as_usize()] {
                active[rule] = true;
            }
        }
        active
    }

    /// The credentials in a view, in rule order, as ranges of the view:
    /// (rule, the credential, the whole match); with `prefixed_only`, only
    /// [`Class::Prefixed`] rules run.
    fn matches(&self, text: &str, active: &[bool], prefixed_only: bool) -> Vec<Match> {
        let mut found = Vec::new();
        for (index, compiled) in self.rules.iter().enumerate() {
            if !active[index] || (prefixed_only && compiled.rule.class != Class::Prefixed) {
                continue;
            }
            for (secret, whole) in compiled.secrets(text) {
                let value = &text[secret.clone()];
                if entropy(value) >= compiled.rule.entropy
                    && !allow::allowed(compiled.rule.class, value, name_at(text, whole.start))
                {
                    found.push(Match {
                        rule: index,
                        secret,
                        whole,
                    });
                }
            }
        }
        found
    }

    /// The candidates of one view, in original coordinates (a match in a
    /// decoded view counts only where it holds decoded text), and the
    /// rules the view activated.
    fn view_candidates(&self, view: &View<'_>, seen: Seen, out: &mut Vec<Candidate>) -> Vec<bool> {
        let active = self.active(&view.text);
        let prefixed_only = seen == Seen::Unwrapped;
        for found in self.matches(&view.text, &active, prefixed_only) {
            // A decoded view adds what only it shows: a match that holds a
            // decoded escape or a joined break (in the credential or in
            // its context, as `{\"password\": \"…\"}`).
            if seen == Seen::AsWritten || view.rewritten(&found.whole) {
                out.push(Candidate {
                    rule: found.rule,
                    seen,
                    range: view.original(&found.secret),
                });
            }
        }
        active
    }
}

/// A match that passed its rule's entropy and the allowlist.
struct Match {
    /// Index into [`Scanner::rules`].
    rule: usize,
    /// The credential.
    secret: Range<usize>,
    /// The whole match (the credential and its context).
    whole: Range<usize>,
}

/// A judged match, before overlaps are resolved.
struct Candidate {
    /// Index into [`Scanner::rules`].
    rule: usize,
    seen: Seen,
    range: Range<usize>,
}

impl Compiled {
    /// The rule's pattern, compiled on first use. The patterns are this
    /// crate's constants: one that does not compile is a bug, caught by
    /// `every_rule_compiles_has_keywords_and_a_unique_id`.
    fn pattern(&self) -> &Pattern {
        self.pattern.get_or_init(|| {
            let regex = Regex::new(&ascii_word_boundaries(self.rule.pattern))
                .unwrap_or_else(|e| panic!("rule {} does not compile: {e}", self.rule.id));
            let secret = regex.capture_names().position(|n| n == Some("secret"));
            Pattern { regex, secret }
        })
    }

    /// The ranges of the credential and of the whole match, in every match.
    fn secrets<'t>(
        &'t self,
        text: &'t str,
    ) -> Box<dyn Iterator<Item = (Range<usize>, Range<usize>)> + 't> {
        let pattern = self.pattern();
        match pattern.secret {
            None => Box::new(
                pattern
                    .regex
                    .find_iter(text)
                    .map(|m| (m.range(), m.range())),
            ),
            Some(group) => Box::new(pattern.regex.captures_iter(text).filter_map(move |caps| {
                let whole = caps.get(0)?.range();
                caps.get(group).map(|m| (m.range(), whole))
            })),
        }
    }
}

/// Every credential in `text`, in order of position: looked for as
/// written, with escapes decoded, with wrapped lines joined, and inside
/// each base64 blob. Where matches overlap, a token's shape names the text
/// before its place does (`token: ghp_…` is `github-pat`, not
/// `kubeconfig-token`; a vendor's token wrapped over two lines is named by
/// the vendor's rule, not by `generic-api-key` on its first half), then
/// the earlier rule, then the earlier view; what a blob decodes to only where nothing outside names the blob
/// (`client-key-data: <blob>` is named by the kubeconfig rule).
pub fn find(text: &str) -> Vec<Finding> {
    let scanner = &*SCANNER;
    let mut candidates = Vec::new();
    let active = scanner.view_candidates(&View::as_written(text), Seen::AsWritten, &mut candidates);
    if let Some(view) = view::unescaped(text) {
        scanner.view_candidates(&view, Seen::Unescaped, &mut candidates);
    }
    let prefixed_active = scanner
        .rules
        .iter()
        .zip(&active)
        .any(|(compiled, on)| *on && compiled.rule.class == Class::Prefixed);
    if prefixed_active && let Some(view) = view::unwrapped(text) {
        scanner.view_candidates(&view, Seen::Unwrapped, &mut candidates);
    }
    for (blob, decoded) in view::base64_blobs(text) {
        let active = scanner.active(&decoded);
        if let Some(found) = scanner.matches(&decoded, &active, false).first() {
            candidates.push(Candidate {
                rule: found.rule,
                seen: Seen::Base64,
                range: blob,
            });
        }
    }
    candidates.sort_by_key(|c| {
        let class = scanner.rules[c.rule].rule.class;
        (
            c.seen == Seen::Base64,
            class != Class::Prefixed,
            c.rule,
            c.seen,
            c.range.start,
        )
    });
    let mut found: Vec<Finding> = Vec::new();
    for candidate in candidates {
        if found.iter().any(|f| overlaps(&f.range, &candidate.range)) {
            continue;
        }
        let rule = scanner.rules[candidate.rule].rule;
        let (line, column) = line_and_column(text, candidate.range.start);
        found.push(Finding {
            rule: rule.id,
            description: rule.description,
            line,
            column,
            range: candidate.range,
            seen: candidate.seen,
        });
    }
    found.sort_by_key(|f| f.range.start);
    found
}

/// `pattern` with every `\b` made ASCII (`(?-u:\b)`). A Unicode word
/// boundary stops the regex crate's lazy DFA at the first non-ASCII byte
/// and the match falls back to a slower engine (a rule then cost
/// milliseconds on a 32 KiB body of prose with accents or emoji, not
/// microseconds); the tokens are ASCII, so an ASCII boundary is what the
/// rules mean.
fn ascii_word_boundaries(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut escaped = false;
    for c in pattern.chars() {
        match (escaped, c) {
            (true, 'b') => {
                out.push_str("(?-u:\\b)");
                escaped = false;
            }
            (true, c) => {
                out.push('\\');
                out.push(c);
                escaped = false;
            }
            (false, '\\') => escaped = true,
            (false, c) => out.push(c),
        }
    }
    if escaped {
        out.push('\\');
    }
    out
}

/// The name a match starting at byte `at` stands in: the run of name
/// characters (ASCII letters, digits, `_`, `-`, `.`) around `at`, so
/// `export GITHUB_TOKEN=…` matched at `TOKEN` is `GITHUB_TOKEN`.
fn name_at(text: &str, at: usize) -> &str {
    let is_name = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    let bytes = text.as_bytes();
    let start = bytes[..at]
        .iter()
        .rposition(|b| !is_name(*b))
        .map_or(0, |i| i + 1);
    let end = bytes[at..]
        .iter()
        .position(|b| !is_name(*b))
        .map_or(bytes.len(), |i| at + i);
    &text[start..end]
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// Shannon entropy in bits per byte.
fn entropy(text: &str) -> f32 {
    if text.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for b in text.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = text.len() as f32;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = *c as f32 / len;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_boundaries_become_ascii() {
        let cases = [
            (r"\bghp_[a-z]\b", r"(?-u:\b)ghp_[a-z](?-u:\b)"),
            (r"a\\b", r"a\\b"),
            (r"\\\b", r"\\(?-u:\b)"),
            (r"[\w.-]\s", r"[\w.-]\s"),
        ];
        for (pattern, want) in cases {
            assert_eq!(ascii_word_boundaries(pattern), want, "{pattern}");
        }
    }

    #[test]
    fn names_run_around_the_match() {
        // (text, where the match starts, the name)
        let cases = [
            ("export GITHUB_TOKEN=x", 14, "GITHUB_TOKEN"),
            ("--api-key=x", 2, "--api-key"),
            ("{\"apiKey\": 1}", 2, "apiKey"),
            ("token", 0, "token"),
            ("a é key=1", 5, "key"),
        ];
        for (text, at, name) in cases {
            assert_eq!(name_at(text, at), name, "{text:?}");
        }
    }

    #[test]
    fn entropy_by_example() {
        assert_eq!(entropy(""), 0.0);
        assert_eq!(entropy("aaaa"), 0.0);
        assert!((entropy("abcd") - 2.0).abs() < 1e-6);
    }

    #[test]
    fn every_rule_compiles_has_keywords_and_a_unique_id() {
        let scanner = &*SCANNER;
        let mut ids = std::collections::BTreeSet::new();
        for compiled in &scanner.rules {
            compiled.pattern();
            let rule = compiled.rule;
            assert!(!rule.keywords.is_empty(), "{} has no keyword", rule.id);
            for keyword in rule.keywords {
                assert_eq!(
                    *keyword,
                    keyword.to_ascii_lowercase(),
                    "{}: keywords are lower case",
                    rule.id
                );
            }
            assert!(ids.insert(rule.id), "{} is defined twice", rule.id);
        }
    }
}
