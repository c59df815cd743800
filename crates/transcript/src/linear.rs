//! The streaming core shared by the readers: a line loop that never fails
//! the whole read, the accounting of every record (used, ignored on purpose,
//! or skipped), the notes that become warnings, and tool-call summaries.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::error::Category;

use super::budget::{Budget, Tail};
use super::{Mark, Outcome, Role};

/// Lines longer than this are skipped without being held in memory whole.
pub(crate) const MAX_LINE: usize = 64 << 20;
/// Tool summaries are cut to this many characters.
pub(crate) const TOOL_SUMMARY_CHARS: usize = 120;
/// Unknown record types named in the warnings; more are counted together.
const MAX_NAMED_UNKNOWN: usize = 8;
/// References kept (the newest; each once).
const MAX_REFS: usize = 16;
/// The longest title or reference kept, in bytes.
const MAX_REF_BYTES: usize = 500;

/// What became of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// It contributed to a turn.
    Used,
    /// It was read and left out on purpose (metadata, tool results, …).
    Ignored,
    /// It could not be read, or its type is unknown.
    Skipped,
}

impl Disposition {
    /// A record that may or may not have contributed to a turn: used when it
    /// did, ignored (read, left out on purpose) when it did not.
    pub(crate) fn used_if(used: bool) -> Self {
        if used { Self::Used } else { Self::Ignored }
    }
}

#[cfg(test)]
impl Disposition {
    /// What became of the one record `outcome` counts (tests read one
    /// `line`).
    pub(crate) fn of_one(outcome: &Outcome, line: &str) -> Self {
        match (outcome.used, outcome.ignored, outcome.skipped) {
            (1, 0, 0) => Disposition::Used,
            (0, 1, 0) => Disposition::Ignored,
            (0, 0, 1) => Disposition::Skipped,
            other => panic!("{line}: {other:?}"),
        }
    }
}

/// Something left out that the destination should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Note {
    NotJson,
    Shape,
    Oversized,
    UnknownBlock,
    Sidechain,
    SidechainNoReport,
    Meta,
    Thinking,
    Reasoning,
    EncryptedReasoning,
    Compaction,
    OpensWithSummary,
    EventOnly,
}

impl Note {
    /// The warning for `n` occurrences.
    pub(crate) fn describe(self, n: usize) -> String {
        let (one, many) = match self {
            Note::NotJson => ("line is not valid JSON", "lines are not valid JSON"),
            Note::Shape => (
                "record has an unexpected shape",
                "records have an unexpected shape",
            ),
            Note::Oversized => (
                "line is longer than 64 MiB and was not read",
                "lines are longer than 64 MiB and were not read",
            ),
            Note::UnknownBlock => (
                "content block of an unknown type was left out",
                "content blocks of unknown types were left out",
            ),
            Note::Sidechain => (
                "sidechain (sub-agent) record was left out: the sub-agent's report is kept as a marked turn",
                "sidechain (sub-agent) records were left out: each sub-agent's report is kept as a marked turn",
            ),
            Note::SidechainNoReport => (
                "sub-agent's last text is kept as a marked turn: it had not reported when the transcript ends, or the file is its own",
                "sub-agents' last texts are kept as marked turns: they had not reported when the transcript ends",
            ),
            Note::Meta => (
                "harness meta record (local-command caveat or injected context) was left out",
                "harness meta records (local-command caveats or injected context) were left out",
            ),
            Note::Thinking => (
                "thinking block was left out",
                "thinking blocks were left out",
            ),
            Note::Reasoning => (
                "reasoning record was left out",
                "reasoning records were left out",
            ),
            Note::EncryptedReasoning => (
                "encrypted reasoning record was left out",
                "encrypted reasoning records were left out",
            ),
            Note::Compaction => (
                "compaction: the turns before it are read from the file, and its summary is a marked turn",
                "compactions: the turns before them are read from the file, and their summaries are marked turns",
            ),
            Note::OpensWithSummary => (
                "compaction summary opens the transcript: the turns it summarizes are not in this file",
                "compaction summaries open the transcript: the turns they summarize are not in this file",
            ),
            Note::EventOnly => (
                "message was read from an event record, as no response item carries it",
                "messages were read from event records, as no response item carries them",
            ),
        };
        format!("{n} {}", if n == 1 { one } else { many })
    }
}

/// A transcript format: reads one record at a time into a [`Linearizer`].
pub(crate) trait Records {
    /// Reads one non-blank line (or database row).
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition;

    /// Called once after the last record.
    fn finish(&mut self, _out: &mut Linearizer) {}
}

/// Builds an [`Outcome`]: the bounded tail of turns plus the accounting.
#[derive(Debug)]
pub(crate) struct Linearizer {
    tail: Tail,
    records: usize,
    used: usize,
    ignored: usize,
    skipped: usize,
    notes: BTreeMap<Note, usize>,
    unknown: BTreeMap<String, usize>,
    unknown_other: usize,
    passed: BTreeMap<&'static str, usize>,
    title: Option<String>,
    refs: Vec<String>,
    errors: Vec<String>,
}

impl Linearizer {
    pub(crate) fn new(budget: Budget) -> Self {
        Linearizer {
            tail: Tail::new(budget),
            records: 0,
            used: 0,
            ignored: 0,
            skipped: 0,
            notes: BTreeMap::new(),
            unknown: BTreeMap::new(),
            unknown_other: 0,
            passed: BTreeMap::new(),
            title: None,
            refs: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Adds text to the current turn of `role` (or starts one).
    pub(crate) fn text(&mut self, role: Role, text: &str) {
        self.tail.add_text(role, text);
    }

    /// Adds an assistant tool call, summarized.
    pub(crate) fn tool(&mut self, name: &str, hint: Option<&str>) {
        self.tail.add_tool(tool_summary(name, hint));
    }

    /// Adds text as a marked turn of its own, by `agent` when a sub-agent
    /// spoke.
    pub(crate) fn marked(&mut self, role: Role, mark: Mark, agent: Option<&str>, text: &str) {
        self.tail.add_marked(role, mark, agent, text);
    }

    /// Counts one record read as ignored as used after all: it held what
    /// became a turn only at the end (a sub-agent's last text).
    pub(crate) fn used_late(&mut self) {
        if self.ignored > 0 {
            self.ignored -= 1;
            self.used += 1;
        }
    }

    /// A record of a known type that carries no conversation: counted by
    /// its type's name, so the warning says what was passed over.
    pub(crate) fn pass(&mut self, kind: &'static str) -> Disposition {
        *self.passed.entry(kind).or_default() += 1;
        Disposition::Ignored
    }

    /// The session's title (the last one set wins).
    pub(crate) fn title(&mut self, title: &str) {
        let title = one_line(title);
        if !title.is_empty() {
            self.title = Some(truncate_chars(&title, MAX_REF_BYTES));
        }
    }

    /// A reference the transcript records (`what: value`), kept once, at
    /// its newest place.
    pub(crate) fn reference(&mut self, what: &str, value: &str) {
        let value = one_line(value);
        if value.is_empty() {
            return;
        }
        let reference = truncate_chars(&format!("{what}: {value}"), MAX_REF_BYTES);
        self.refs.retain(|r| *r != reference);
        if self.refs.len() >= MAX_REFS {
            self.refs.remove(0);
        }
        self.refs.push(reference);
    }

    /// Turns started so far, kept by the budget or not.
    pub(crate) fn turns_seen(&self) -> usize {
        self.tail.seen()
    }

    /// Records counted so far.
    pub(crate) fn records(&self) -> usize {
        self.records
    }

    pub(crate) fn note(&mut self, note: Note) {
        self.note_many(note, 1);
    }

    pub(crate) fn note_many(&mut self, note: Note, n: usize) {
        *self.notes.entry(note).or_default() += n;
    }

    /// Notes a record of unknown type and skips it.
    pub(crate) fn unknown(&mut self, kind: Option<&str>) -> Disposition {
        let name = kind.unwrap_or("(no type)");
        if let Some(n) = self.unknown.get_mut(name) {
            *n += 1;
        } else if self.unknown.len() < MAX_NAMED_UNKNOWN {
            self.unknown.insert(name.to_owned(), 1);
        } else {
            self.unknown_other += 1;
        }
        Disposition::Skipped
    }

    /// Parses one record, which must be a JSON object (serde would read an
    /// array positionally as a struct). On failure, notes why and returns
    /// the skip.
    pub(crate) fn parse<'a, T: Deserialize<'a>>(
        &mut self,
        bytes: &'a [u8],
    ) -> Result<T, Disposition> {
        let object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        let parsed = if object {
            serde_json::from_slice(bytes).map_err(|err| err.classify())
        } else {
            Err(match serde_json::from_slice::<IgnoredAny>(bytes) {
                Ok(_) => Category::Data,
                Err(err) => err.classify(),
            })
        };
        parsed.map_err(|category| self.skip(category))
    }

    /// Notes why a value failed to parse and skips it.
    pub(crate) fn unreadable(&mut self, err: &serde_json::Error) -> Disposition {
        self.skip(err.classify())
    }

    fn skip(&mut self, category: Category) -> Disposition {
        self.note(match category {
            Category::Data => Note::Shape,
            _ => Note::NotJson,
        });
        Disposition::Skipped
    }

    /// An error that stopped the read early.
    pub(crate) fn error(&mut self, message: String) {
        self.errors.push(message);
    }

    pub(crate) fn count(&mut self, disposition: Disposition) {
        self.records += 1;
        match disposition {
            Disposition::Used => self.used += 1,
            Disposition::Ignored => self.ignored += 1,
            Disposition::Skipped => self.skipped += 1,
        }
    }

    pub(crate) fn finish(self) -> Outcome {
        let mut warnings = self.errors;
        warnings.extend(self.notes.iter().map(|(note, &n)| note.describe(n)));
        let total_unknown = self.unknown.values().sum::<usize>() + self.unknown_other;
        if total_unknown > 0 {
            let mut names: Vec<String> = self
                .unknown
                .iter()
                .map(|(name, n)| format!("{name} ×{n}"))
                .collect();
            if self.unknown_other > 0 {
                names.push(format!("others ×{}", self.unknown_other));
            }
            let noun = if total_unknown == 1 {
                "record of an unknown type was"
            } else {
                "records of unknown types were"
            };
            warnings.push(format!(
                "{total_unknown} {noun} skipped ({})",
                names.join(", ")
            ));
        }
        let total_passed: usize = self.passed.values().sum();
        if total_passed > 0 {
            let names: Vec<String> = self
                .passed
                .iter()
                .map(|(name, n)| format!("{name} ×{n}"))
                .collect();
            let noun = if total_passed == 1 {
                "record of a known type without conversation was"
            } else {
                "records of known types without conversation were"
            };
            warnings.push(format!(
                "{total_passed} {noun} passed over ({})",
                names.join(", ")
            ));
        }
        let (turns, budget_warnings) = self.tail.finish();
        warnings.extend(budget_warnings);
        Outcome {
            records: self.records,
            used: self.used,
            ignored: self.ignored,
            skipped: self.skipped,
            warnings,
            turns,
            title: self.title,
            refs: self.refs,
        }
    }
}

/// `[tool] name: hint`, on one line and at most [`TOOL_SUMMARY_CHARS`].
pub(crate) fn tool_summary(name: &str, hint: Option<&str>) -> String {
    let name = name.trim();
    let name = if name.is_empty() { "(unnamed)" } else { name };
    let hint = hint
        .map(|h| one_line(prefix_chars(h, 2 * TOOL_SUMMARY_CHARS)))
        .filter(|h| !h.is_empty());
    let full = match hint {
        Some(hint) => format!("[tool] {name}: {hint}"),
        None => format!("[tool] {name}"),
    };
    truncate_chars(&full, TOOL_SUMMARY_CHARS)
}

/// The text with runs of whitespace (newlines included) made single spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first `n` characters of `text`.
fn prefix_chars(text: &str, n: usize) -> &str {
    text.char_indices().nth(n).map_or(text, |(i, _)| &text[..i])
}

/// At most `max` characters, the last one an ellipsis when cut.
fn truncate_chars(text: &str, max: usize) -> String {
    let max = max.max(1);
    if text.char_indices().nth(max).is_none() {
        return text.to_owned();
    }
    format!("{}…", prefix_chars(text, max - 1))
}

/// How one read of a line ended.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Complete,
    Oversized,
    End,
}

/// Reads one line into `buf` (without its newline). A line longer than
/// `max` is consumed without being kept.
fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(Line::End);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Line::Complete);
    }
    if buf.len() <= max {
        return Ok(Line::Complete);
    }
    buf.clear();
    discard_line(reader)?;
    Ok(Line::Oversized)
}

/// Whether `needle` (not empty) occurs in the raw line `haystack`: the
/// cheap test before a line is parsed.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Consumes the rest of the current line, its newline included, without
/// keeping any of it.
pub(crate) fn discard_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let len = available.len();
                reader.consume(len);
            }
        }
    }
}

/// One line of at most `max` bytes, as text: `None` at the end of input,
/// `Some(None)` for a line that is longer (consumed, not kept) or not
/// UTF-8. For the scans that look at a transcript's first lines.
pub(crate) fn next_text_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Option<Option<String>>> {
    Ok(match read_line(reader, buf, max)? {
        Line::End => None,
        Line::Oversized => Some(None),
        Line::Complete => Some(String::from_utf8(std::mem::take(buf)).ok()),
    })
}

/// Streams `reader` line by line through `format`. Blank lines are ignored;
/// a read error stops the read with a warning and keeps what was read.
pub(crate) fn read_lines(
    reader: impl BufRead,
    format: &mut impl Records,
    budget: Budget,
) -> Outcome {
    read_lines_limited(reader, format, budget, MAX_LINE)
}

fn read_lines_limited(
    mut reader: impl BufRead,
    format: &mut impl Records,
    budget: Budget,
    max_line: usize,
) -> Outcome {
    let mut out = Linearizer::new(budget);
    let mut line = Vec::with_capacity(64 * 1024);
    loop {
        match read_line(&mut reader, &mut line, max_line) {
            Ok(Line::End) => break,
            Ok(Line::Complete) if line.iter().all(u8::is_ascii_whitespace) => {
                out.count(Disposition::Ignored);
            }
            Ok(Line::Complete) => {
                let disposition = format.record(&line, &mut out);
                out.count(disposition);
            }
            Ok(Line::Oversized) => {
                out.note(Note::Oversized);
                out.count(Disposition::Skipped);
            }
            Err(err) => {
                out.error(format!(
                    "reading stopped after {} lines: {err}",
                    out.records()
                ));
                break;
            }
        }
    }
    format.finish(&mut out);
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uses lines that start with `u`/`a`, ignores `-`, skips the rest.
    struct Letters;

    impl Records for Letters {
        fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
            let text = String::from_utf8_lossy(bytes);
            match bytes.first() {
                Some(b'u') => out.text(Role::User, &text),
                Some(b'a') => out.text(Role::Assistant, &text),
                Some(b'-') => return Disposition::Ignored,
                _ => return out.unknown(Some("letter")),
            }
            Disposition::Used
        }
    }

    fn read(input: &str, max_line: usize) -> Outcome {
        read_lines_limited(input.as_bytes(), &mut Letters, Budget::UNLIMITED, max_line)
    }

    #[test]
    fn every_line_is_accounted_for() {
        let cases = [
            ("", 0, 0, 0, 0),
            ("u1", 1, 1, 0, 0),
            ("u1\n", 1, 1, 0, 0),
            ("u1\n\n  \r\na2\n", 4, 2, 2, 0),
            ("u1\n-\nx\nz", 4, 1, 1, 2),
        ];
        for (input, records, used, ignored, skipped) in cases {
            let o = read(input, MAX_LINE);
            assert_eq!(
                (o.records, o.used, o.ignored, o.skipped),
                (records, used, ignored, skipped),
                "{input:?}"
            );
        }
    }

    #[test]
    fn oversized_lines_are_skipped_and_reading_goes_on() {
        let o = read("u1\nu-this-line-is-long\na2\nu-another-long-one", 8);
        assert_eq!((o.records, o.used, o.skipped), (4, 2, 2));
        assert_eq!(o.turns.len(), 2);
        assert!(o.warnings[0].starts_with("2 lines are longer than 64 MiB"));
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_read() {
        let o = read("u2345678\n", 8);
        assert_eq!((o.used, o.skipped), (1, 0));
    }

    struct FailAfter<'a>(&'a [u8]);

    impl Read for FailAfter<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("disk on fire"));
            }
            let n = self.0.len().min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_read_error_keeps_what_was_read() {
        let reader = io::BufReader::new(FailAfter(b"u1\na2\n"));
        let o = read_lines(reader, &mut Letters, Budget::UNLIMITED);
        assert_eq!(o.turns.len(), 2);
        assert_eq!(o.warnings, ["reading stopped after 2 lines: disk on fire"]);
    }

    #[test]
    fn unknown_types_are_named_then_grouped() {
        let mut out = Linearizer::new(Budget::UNLIMITED);
        for i in 0..MAX_NAMED_UNKNOWN + 2 {
            let name = format!("t{i}");
            out.unknown(Some(&name));
        }
        out.unknown(Some("t0"));
        out.unknown(None);
        let warnings = out.finish().warnings;
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("12 records of unknown types were skipped (t0 ×2,"));
        assert!(warnings[0].ends_with("others ×3)"), "{}", warnings[0]);
    }

    #[test]
    fn tool_summary_cases() {
        let long = "x".repeat(300);
        let cases = [
            (
                "Bash",
                Some("ls  -la\n| wc"),
                "[tool] Bash: ls -la | wc".to_owned(),
            ),
            ("Read", None, "[tool] Read".to_owned()),
            ("Read", Some("   "), "[tool] Read".to_owned()),
            ("", None, "[tool] (unnamed)".to_owned()),
            (
                "Write",
                Some(long.as_str()),
                format!("[tool] Write: {}…", "x".repeat(TOOL_SUMMARY_CHARS - 15)),
            ),
        ];
        for (name, hint, want) in cases {
            let got = tool_summary(name, hint);
            assert_eq!(got, want);
            assert!(got.chars().count() <= TOOL_SUMMARY_CHARS);
        }
    }

    #[test]
    fn truncate_chars_cases() {
        let cases = [
            ("abc", 3, "abc"),
            ("abcd", 3, "ab…"),
            ("ééé", 3, "ééé"),
            ("éééé", 3, "éé…"),
            ("", 3, ""),
        ];
        for (text, max, want) in cases {
            assert_eq!(truncate_chars(text, max), want, "{text:?}");
        }
    }

    #[test]
    fn notes_are_singular_or_plural() {
        assert_eq!(Note::Thinking.describe(1), "1 thinking block was left out");
        assert_eq!(
            Note::Thinking.describe(3),
            "3 thinking blocks were left out"
        );
    }
}
