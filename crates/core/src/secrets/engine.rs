//! The scanner: the compiled rules, the keyword pre-filter, and the passes
//! over a text and its views.

use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::Regex;

use super::rules::{self, Class, Rule};
use super::view::{self, View};
use super::{Finding, Seen, allow};

/// A rule ready to run.
struct Compiled {
    rule: &'static Rule,
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
            let regex = Regex::new(rule.pattern)
                .unwrap_or_else(|e| panic!("rule {} does not compile: {e}", rule.id));
            let secret = regex.capture_names().position(|n| n == Some("secret"));
            rules_compiled.push(Compiled {
                rule,
                regex,
                secret,
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

    /// The credentials in a view, as ranges of the view, in rule order;
    /// with `prefixed_only`, only [`Class::Prefixed`] rules run.
    fn matches(
        &self,
        text: &str,
        active: &[bool],
        prefixed_only: bool,
    ) -> Vec<(usize, Range<usize>)> {
        let mut found = Vec::new();
        for (index, compiled) in self.rules.iter().enumerate() {
            if !active[index] || (prefixed_only && compiled.rule.class != Class::Prefixed) {
                continue;
            }
            for range in compiled.secrets(text) {
                let secret = &text[range.clone()];
                if entropy(secret) >= compiled.rule.entropy
                    && !allow::allowed(compiled.rule.class, secret)
                {
                    found.push((index, range));
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
        for (rule, range) in self.matches(&view.text, &active, prefixed_only) {
            if seen == Seen::AsWritten || view.rewritten(&range) {
                out.push(Candidate {
                    rule,
                    seen,
                    range: view.original(&range),
                });
            }
        }
        active
    }
}

/// A judged match, before overlaps are resolved.
struct Candidate {
    /// Index into [`Scanner::rules`].
    rule: usize,
    seen: Seen,
    range: Range<usize>,
}

impl Compiled {
    /// The ranges of the credential in every match.
    fn secrets<'t>(&'t self, text: &'t str) -> Box<dyn Iterator<Item = Range<usize>> + 't> {
        match self.secret {
            None => Box::new(self.regex.find_iter(text).map(|m| m.range())),
            Some(group) => Box::new(
                self.regex
                    .captures_iter(text)
                    .filter_map(move |caps| caps.get(group).map(|m| m.range())),
            ),
        }
    }
}

/// Every credential in `text`, in order of position: looked for as
/// written, with escapes decoded, with wrapped lines joined, and inside
/// each base64 blob. Where matches overlap, the earlier rule names the
/// text (a vendor's token wrapped over two lines is named by the vendor's
/// rule, not by `generic-api-key` on its first half), then the earlier
/// view; what a blob decodes to only where nothing outside names the blob
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
        if let Some((rule, _)) = scanner.matches(&decoded, &active, false).first() {
            candidates.push(Candidate {
                rule: *rule,
                seen: Seen::Base64,
                range: blob,
            });
        }
    }
    candidates.sort_by_key(|c| (c.seen == Seen::Base64, c.rule, c.seen, c.range.start));
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

/// The 1-based line and column (in characters) of a byte offset.
fn line_and_column(text: &str, byte: usize) -> (usize, usize) {
    let before = &text[..byte];
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_by_example() {
        assert_eq!(entropy(""), 0.0);
        assert_eq!(entropy("aaaa"), 0.0);
        assert!((entropy("abcd") - 2.0).abs() < 1e-6);
    }

    #[test]
    fn lines_and_columns_count_characters() {
        let text = "ab\nçé x";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 3), (2, 1));
        assert_eq!(line_and_column(text, text.find('x').expect("x")), (2, 4));
    }

    #[test]
    fn every_rule_compiles_has_keywords_and_a_unique_id() {
        let scanner = &*SCANNER;
        let mut ids = std::collections::BTreeSet::new();
        for compiled in &scanner.rules {
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
