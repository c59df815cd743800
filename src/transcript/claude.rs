//! Claude Code transcripts: `~/.claude/projects/<slug>/<session>.jsonl`.
//! See the module docs of [`super`] for what is kept and what is left out.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Role;
use super::json::{Block, Content, Flag, Loose, Text};
use super::linear::{Disposition, Format, Linearizer, Note};

/// Record types that carry no conversation.
const IGNORED_TYPES: [&str; 7] = [
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "custom-title",
    "attachment",
];

/// Claude Code's directory name for a working directory: every character
/// that is not an ASCII letter or digit becomes '-'.
pub(crate) fn slug(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `<root>/projects/<slug of cwd>/<session>.jsonl`, else the first project
/// directory holding `<session>.jsonl` (the slug rule has changed across
/// versions, and symlinked working directories slug differently).
pub(crate) fn locate(root: &Path, session: &str, cwd: &Path) -> Option<PathBuf> {
    let projects = root.join("projects");
    let file = format!("{session}.jsonl");
    let direct = projects.join(slug(cwd)).join(&file);
    if direct.is_file() {
        return Some(direct);
    }
    std::fs::read_dir(&projects)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(&file))
        .find(|path| path.is_file())
}

#[derive(Debug, Deserialize)]
struct Record<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    subtype: Text<'a>,
    #[serde(rename = "isSidechain", default)]
    sidechain: Flag,
    #[serde(rename = "isMeta", default)]
    meta: Flag,
    #[serde(rename = "isCompactSummary", default)]
    compact_summary: Flag,
    #[serde(default, borrow)]
    message: Loose<Message<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    content: Content<'a>,
}

/// The Claude Code reader.
pub(crate) struct Claude;

impl Format for Claude {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        let record: Record = match out.parse(bytes) {
            Ok(record) => record,
            Err(skipped) => return skipped,
        };
        let kind = record.kind.as_str();
        match kind {
            Some("user" | "assistant") if record.sidechain.0 => {
                out.note(Note::Sidechain);
                Disposition::Ignored
            }
            Some("user") => user(record, out),
            Some("assistant") => assistant(record, out),
            Some("system") if record.subtype.is("compact_boundary") => {
                out.note(Note::Compaction);
                Disposition::Ignored
            }
            Some(k) if IGNORED_TYPES.contains(&k) => Disposition::Ignored,
            _ => out.unknown(kind),
        }
    }
}

fn content(record: Record<'_>) -> Content<'_> {
    record.message.0.map(|m| m.content).unwrap_or_default()
}

fn user(record: Record<'_>, out: &mut Linearizer) -> Disposition {
    if record.meta.0 {
        return Disposition::Ignored;
    }
    let summary = record.compact_summary.0;
    let text = user_text(content(record), out);
    if text.is_empty() {
        return Disposition::Ignored;
    }
    if summary {
        if out.turns_seen() > 0 {
            return Disposition::Ignored;
        }
        out.note(Note::OpensWithSummary);
        out.standalone(Role::User, &format!("[compaction summary] {text}"));
    } else {
        out.text(Role::User, &text);
    }
    Disposition::Used
}

/// What the user said: text blocks without harness injections, images as
/// `[image]`; tool results are not the user speaking.
fn user_text(content: Content<'_>, out: &mut Linearizer) -> String {
    let mut parts: Vec<Cow<str>> = Vec::new();
    match content {
        Content::Text(text) => parts.push(text),
        Content::Blocks(blocks) => {
            for block in blocks {
                match block.0 {
                    Some(Block { kind, text, .. }) if kind.is("text") => parts.extend(text.0),
                    Some(block) if block.kind.is("image") => parts.push("[image]".into()),
                    Some(block) if block.kind.is("document") => parts.push("[document]".into()),
                    Some(block) if block.kind.is("tool_result") => {}
                    _ => out.note(Note::UnknownBlock),
                }
            }
        }
        Content::Absent => {}
    }
    parts
        .iter()
        .map(|part| strip_reminders(part))
        .filter(|part| !part.is_empty() && !is_local_command_output(part))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn assistant(record: Record<'_>, out: &mut Linearizer) -> Disposition {
    let mut used = false;
    match content(record) {
        Content::Text(text) => {
            used = !text.trim().is_empty();
            out.text(Role::Assistant, &text);
        }
        Content::Blocks(blocks) => {
            for block in blocks.into_iter().map(|b| b.0) {
                match block {
                    Some(b) if b.kind.is("text") => {
                        if let Some(text) = b.text.as_str().filter(|t| !t.trim().is_empty()) {
                            out.text(Role::Assistant, text);
                            used = true;
                        }
                    }
                    Some(b) if b.kind.is("tool_use") || b.kind.is("server_tool_use") => {
                        let hint = b.input.0.as_ref().and_then(|input| input.hint());
                        out.tool(b.name.as_str().unwrap_or_default(), hint);
                        used = true;
                    }
                    Some(b) if b.kind.is("thinking") || b.kind.is("redacted_thinking") => {
                        out.note(Note::Thinking);
                    }
                    _ => out.note(Note::UnknownBlock),
                }
            }
        }
        Content::Absent => {}
    }
    if used {
        Disposition::Used
    } else {
        Disposition::Ignored
    }
}

/// The text without `<system-reminder>…</system-reminder>` spans (an
/// unterminated one runs to the end), trimmed.
fn strip_reminders(text: &str) -> Cow<'_, str> {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    if !text.contains(OPEN) {
        return Cow::Borrowed(text.trim());
    }
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        kept.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        rest = after
            .find(CLOSE)
            .map_or("", |end| &after[end + CLOSE.len()..]);
    }
    kept.push_str(rest);
    Cow::Owned(kept.trim().to_owned())
}

/// Output of a local slash command (`/cost`, …), recorded as user text.
fn is_local_command_output(text: &str) -> bool {
    text.starts_with("<local-command-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{AgentKind, Budget, linearize};

    #[test]
    fn slug_cases() {
        let cases = [
            ("/home/me/proj", "-home-me-proj"),
            ("/tmp/a.b_c d", "-tmp-a-b-c-d"),
            ("C:\\work\\x", "C--work-x"),
        ];
        for (cwd, want) in cases {
            assert_eq!(slug(Path::new(cwd)), want);
        }
    }

    #[test]
    fn strip_reminders_cases() {
        let cases = [
            ("plain", "plain"),
            ("a<system-reminder>x</system-reminder>b", "ab"),
            ("<system-reminder>only</system-reminder>", ""),
            ("a\n<system-reminder>x\n</system-reminder>\nb", "a\n\nb"),
            ("keep<system-reminder>unterminated", "keep"),
            (
                "<system-reminder>1</system-reminder>x<system-reminder>2</system-reminder>y",
                "xy",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(strip_reminders(text), want, "{text:?}");
        }
    }

    fn read(lines: &[&str]) -> crate::transcript::Outcome {
        linearize(
            AgentKind::Claude,
            lines.join("\n").as_bytes(),
            Budget::UNLIMITED,
        )
    }

    #[test]
    fn record_dispositions() {
        let cases: [(&str, Disposition); 12] = [
            (
                r#"{"type":"user","message":{"content":"hi"}}"#,
                Disposition::Used,
            ),
            (
                r#"{"type":"user","isMeta":true,"message":{"content":"caveat"}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"user","message":{"content":"<local-command-stdout>$0</local-command-stdout>"}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"user","isSidechain":true,"message":{"content":"sub"}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hm"}]}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}"#,
                Disposition::Used,
            ),
            (
                r#"{"type":"system","subtype":"compact_boundary"}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"summary","summary":"title"}"#,
                Disposition::Ignored,
            ),
            (r#"{"type":"brand-new"}"#, Disposition::Skipped),
            (r#"[1,2]"#, Disposition::Skipped),
            (r#"{"type":"user""#, Disposition::Skipped),
        ];
        for (line, want) in cases {
            let o = read(&[line]);
            let got = match (o.used, o.ignored, o.skipped) {
                (1, 0, 0) => Disposition::Used,
                (0, 1, 0) => Disposition::Ignored,
                (0, 0, 1) => Disposition::Skipped,
                other => panic!("{line}: {other:?}"),
            };
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn a_summary_is_kept_only_when_it_opens_the_file() {
        let summary = r#"{"type":"user","isCompactSummary":true,"message":{"content":"S"}}"#;
        let prompt = r#"{"type":"user","message":{"content":"next"}}"#;
        let opening = read(&[summary, prompt]);
        assert_eq!(opening.turns.len(), 2);
        assert_eq!(opening.turns[0].text, "[compaction summary] S");
        assert_eq!(opening.turns[1].text, "next");
        let later = read(&[prompt, summary]);
        assert_eq!(later.turns.len(), 1);
        assert_eq!(later.ignored, 1);
    }
}
