//! The Gemini CLI reader. A session file is not a plain log: the CLI
//! writes a message again (same `id`) each time it changes, a `$set` with
//! `messages` replaces every message read so far (a checkpoint), and a
//! `$rewindTo` drops a message and everything after it. So the reader
//! holds the messages, distilled, until the end (as the CLI's own loader
//! does): the last record of each id, at the place of its first, and only
//! then turns them into turns. A record is counted as ignored when read
//! and as used at the end if a message it wrote made a turn.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::Value;

use super::wire::{Args, Line, Message, Meta, Part, Parts, ToolCall};
use crate::linear::{Disposition, Linearizer, Note, Records};
use crate::{Mark, Role};

/// Tools that run a sub-agent (whose result is its report).
const SUBAGENT_TOOLS: [&str; 2] = ["invoke_agent", "delegate_to_agent"];
/// The name a sub-agent goes by when nothing names it.
const SUBAGENT: &str = "sub-agent";
/// The block the CLI puts first in a session: date, OS, directory tree.
const SESSION_CONTEXT: &str = "<session_context>";
/// What a hook's `additionalContext` is wrapped in, in the user's message.
const HOOK_OPEN: &str = "<hook_context>";
const HOOK_CLOSE: &str = "</hook_context>";
/// What the CLI wraps an MCP tool's output in.
const UNTRUSTED_OPEN: &str = "<untrusted_context>";
const UNTRUSTED_CLOSE: &str = "</untrusted_context>";

/// A message as kept until the end: what it will say.
#[derive(Debug)]
enum Said {
    /// Nothing to show (`info`, `error`, `warning`, an unknown type): held
    /// so that a rewind to it finds it.
    Nothing,
    /// The user's words; `meta` counts injected parts left out.
    User { text: String, meta: usize },
    /// A sub-agent's prompt (a user message with an `agentId`): left out.
    Prompt,
    /// The model's reply, or a sub-agent's message (`agent`).
    Reply {
        text: String,
        tools: Vec<Tool>,
        thoughts: usize,
        agent: Option<String>,
    },
}

/// A tool call, and for a sub-agent its report.
#[derive(Debug)]
struct Tool {
    name: String,
    hint: Option<String>,
    report: Option<(String, String)>,
}

/// The messages in the CLI's order: the last write of each id, at its
/// first place; each with the record (line) it came from.
#[derive(Debug, Default)]
struct Store {
    order: Vec<(String, usize, Said)>,
    at: HashMap<String, usize>,
}

impl Store {
    fn put(&mut self, id: &str, record: usize, said: Said) {
        match self.at.get(id) {
            Some(&i) => self.order[i] = (id.to_owned(), record, said),
            None => {
                self.at.insert(id.to_owned(), self.order.len());
                self.order.push((id.to_owned(), record, said));
            }
        }
    }

    /// Drops `id` and every message after it; everything when there is
    /// no such message.
    fn rewind(&mut self, id: &str) {
        let from = self.at.get(id).copied().unwrap_or(0);
        for (gone, _, _) in self.order.drain(from..) {
            self.at.remove(&gone);
        }
    }

    fn clear(&mut self) {
        self.order.clear();
        self.at.clear();
    }
}

/// The Gemini CLI reader (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Gemini {
    store: Store,
    /// The file is a sub-agent's own session (`kind: subagent`).
    subagent: bool,
    /// The last `summary` and the record that set it: the session's
    /// title, or in a sub-agent's file its result.
    summary: Option<(String, usize)>,
}

impl Records for Gemini {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        let line: Line = match out.parse(bytes) {
            Ok(line) => line,
            Err(skipped) => return skipped,
        };
        let record = out.records();
        if let Some(id) = line.rewind_to.as_str() {
            self.store.rewind(id);
            return out.pass("$rewindTo");
        }
        if line.message.id.0.is_some() {
            return self.message(line.message, record, out);
        }
        if let Some(set) = line.set.0 {
            return self.meta(set, record, "$set", out);
        }
        if line.meta.session_id.0.is_some() || line.meta.project_hash.0.is_some() {
            return self.meta(line.meta, record, "header", out);
        }
        out.unknown(line.message.kind.as_str())
    }

    fn finish(&mut self, out: &mut Linearizer) {
        let said = std::mem::take(&mut self.store.order);
        let summary = self.summary.take();
        let used: BTreeSet<usize> = if self.subagent {
            own_session(said, summary, out).into_iter().collect()
        } else {
            let mut used: BTreeSet<usize> = said
                .into_iter()
                .filter(|(_, _, said)| emit(said, out))
                .map(|(_, record, _)| record)
                .collect();
            if let Some((title, record)) = summary {
                out.title(&title);
                used.insert(record);
            }
            used
        };
        for _ in used {
            out.used_late();
        }
    }
}

impl Gemini {
    /// A message record: held until the end (see the module docs).
    fn message(
        &mut self,
        message: Message<'_>,
        record: usize,
        out: &mut Linearizer,
    ) -> Disposition {
        let kind = message.kind.as_str();
        let disposition = match kind {
            Some("user" | "gemini") => Disposition::Ignored,
            Some("info") => out.pass("info"),
            Some("error") => out.pass("error"),
            Some("warning") => out.pass("warning"),
            other => out.unknown(other),
        };
        self.hold(&message, record);
        disposition
    }

    /// Holds a message (one without a string `id` is none, as for the
    /// CLI).
    fn hold(&mut self, message: &Message<'_>, record: usize) {
        if let Some(id) = message.id.as_str() {
            self.store.put(id, record, distill(message));
        }
    }

    /// A header or `$set` (`what`): the kind, the summary and a
    /// checkpoint's messages. One that carries a summary or messages may
    /// be used at the end; any other is passed over.
    fn meta(
        &mut self,
        meta: Meta<'_>,
        record: usize,
        what: &'static str,
        out: &mut Linearizer,
    ) -> Disposition {
        let carries = meta.summary.0.is_some() || meta.messages.0.is_some();
        if let Some(summary) = meta.summary.as_str() {
            self.summary = Some((summary.to_owned(), record));
        }
        if let Some(kind) = meta.kind.as_str() {
            self.subagent = kind == "subagent";
        }
        if let Some(messages) = meta.messages.0 {
            self.store.clear();
            for message in messages.iter().filter_map(|m| m.0.as_ref()) {
                self.hold(message, record);
            }
        }
        if carries {
            Disposition::Ignored
        } else {
            out.pass(what)
        }
    }

    /// One message of a single-document session (`messages[i]`), a record
    /// of its own.
    pub(super) fn value(&mut self, value: &Value, out: &mut Linearizer) -> Disposition {
        let record = out.records();
        match Message::deserialize(value) {
            Ok(message) if value.is_object() => self.message(message, record, out),
            Ok(_) => {
                out.note(Note::Shape);
                Disposition::Skipped
            }
            Err(err) => out.unreadable(&err),
        }
    }

    /// A single-document session's metadata (its `messages` are read one
    /// by one with [`Gemini::value`]).
    pub(super) fn document(&mut self, value: &Value, out: &mut Linearizer) {
        if let Ok(meta) = Meta::deserialize(value) {
            self.subagent = meta.kind.is("subagent");
            if let Some(summary) = meta.summary.as_str() {
                out.title(summary);
            }
        }
    }
}

/// What a message will say: a user's or the model's; other types are
/// held for rewinds only.
fn distill(message: &Message<'_>) -> Said {
    match message.kind.as_str() {
        Some("user") => user(message),
        Some("gemini") => reply(message),
        _ => Said::Nothing,
    }
}

/// What a user message says: its text parts (what the user saw, when the
/// CLI recorded it), without tool results, the CLI's session context or a
/// hook's context; images and files as `[image]` / `[file]`.
fn user(message: &Message<'_>) -> Said {
    if message.agent_id.0.is_some() {
        return Said::Prompt;
    }
    let parts = if message.display_content.0.is_empty() {
        &message.content
    } else {
        &message.display_content
    };
    let mut meta = 0;
    let mut texts = Vec::new();
    for part in &parts.0 {
        if let Some(text) = part.text.as_str() {
            let stripped = strip_hook_context(text);
            let hook_only = stripped.is_empty() && text.contains(HOOK_OPEN);
            if stripped.starts_with(SESSION_CONTEXT) || hook_only {
                meta += 1;
            } else if !stripped.is_empty() {
                texts.push(stripped);
            }
        } else if let Some(inline) = &part.inline_data.0 {
            let image = inline
                .mime_type
                .as_str()
                .is_some_and(|m| m.starts_with("image/"));
            texts.push(if image { "[image]" } else { "[file]" }.to_owned());
        } else if part.file_data.0.is_some() {
            texts.push("[file]".to_owned());
        }
    }
    Said::User {
        text: texts.join("\n\n"),
        meta,
    }
}

/// What a `gemini` message says: its text (thoughts left out), its tool
/// calls (`toolCalls`, else the `functionCall` parts of its content) and
/// the reports of the sub-agents it ran.
fn reply(message: &Message<'_>) -> Said {
    let said = |part: &&Part<'_>| !part.thought.0;
    let text: Vec<&str> = message
        .content
        .0
        .iter()
        .filter(said)
        .filter_map(|p| p.text.as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    let thoughts = message.thoughts.items().len()
        + message
            .content
            .0
            .iter()
            .filter(|p| p.thought.0 && p.text.0.is_some())
            .count();
    let mut tools: Vec<Tool> = message
        .tool_calls
        .items()
        .iter()
        .filter_map(|call| call.0.as_ref())
        .map(tool)
        .collect();
    if tools.is_empty() {
        tools = message
            .content
            .0
            .iter()
            .filter_map(|p| p.function_call.0.as_ref())
            .map(|call| Tool {
                name: call.name.as_str().unwrap_or_default().to_owned(),
                hint: hint(&call.args.0),
                report: None,
            })
            .collect();
    }
    Said::Reply {
        text: text.join("\n\n"),
        tools,
        thoughts,
        agent: message.agent_id.as_str().map(str::to_owned),
    }
}

fn hint(args: &Option<Args<'_>>) -> Option<String> {
    args.as_ref().and_then(Args::hint).map(str::to_owned)
}

/// A recorded tool call; a sub-agent's (a call of [`SUBAGENT_TOOLS`], or
/// one whose outcome names an `agentId`) carries its report.
fn tool(call: &ToolCall<'_>) -> Tool {
    let name = call.name.as_str().unwrap_or_default();
    let args = call.args.0.as_ref();
    let subagent = SUBAGENT_TOOLS.contains(&name) || call.agent_id.0.is_some();
    let report = subagent.then(|| {
        let agent = args
            .and_then(|a| a.agent_name.as_str())
            .filter(|a| !a.trim().is_empty())
            .unwrap_or(if SUBAGENT_TOOLS.contains(&name) {
                SUBAGENT
            } else {
                name
            });
        (
            agent.to_owned(),
            result_text(&call.result, &call.result_display),
        )
    });
    Tool {
        name: name.to_owned(),
        hint: hint(&call.args.0),
        report,
    }
}

/// A tool's result: its function responses' `output`, without the
/// CLI's `<untrusted_context>` wrapper, else what the CLI displayed.
fn result_text(result: &Parts<'_>, display: &crate::json::Text<'_>) -> String {
    let outputs: Vec<&str> = result
        .0
        .iter()
        .filter_map(|p| p.function_response.0.as_ref())
        .filter_map(|r| r.response.0.as_ref())
        .filter_map(|r| r.output.as_str())
        .map(unwrap_untrusted)
        .filter(|t| !t.is_empty())
        .collect();
    if outputs.is_empty() {
        display.as_str().unwrap_or_default().trim().to_owned()
    } else {
        outputs.join("\n\n")
    }
}

/// Adds one message's turns; whether it made any.
fn emit(said: &Said, out: &mut Linearizer) -> bool {
    match said {
        Said::Nothing => false,
        Said::Prompt => {
            out.note(Note::Sidechain);
            false
        }
        Said::User { text, meta } => {
            if *meta > 0 {
                out.note_many(Note::Meta, *meta);
            }
            say(text, out)
        }
        Said::Reply {
            text,
            tools,
            thoughts,
            agent,
        } => {
            if *thoughts > 0 {
                out.note_many(Note::Thinking, *thoughts);
            }
            match agent {
                Some(agent) => out.marked(Role::Assistant, Mark::Sidechain, Some(agent), text),
                None => out.text(Role::Assistant, text),
            }
            for tool in tools {
                out.tool(&tool.name, tool.hint.as_deref());
                if let Some((agent, report)) = &tool.report {
                    out.marked(Role::Assistant, Mark::Sidechain, Some(agent), report);
                }
            }
            !text.is_empty() || !tools.is_empty()
        }
    }
}

/// A sub-agent's own session file: its steps are left out, and what it
/// found is kept as a marked turn: the result the CLI records as its
/// `summary` when it completes, else its last text. The record that made
/// it.
fn own_session(
    said: Vec<(String, usize, Said)>,
    summary: Option<(String, usize)>,
    out: &mut Linearizer,
) -> Option<usize> {
    let steps = said
        .iter()
        .filter(|(_, _, s)| !matches!(s, Said::Nothing))
        .count();
    if steps > 0 {
        out.note_many(Note::Sidechain, steps);
    }
    let last = || {
        said.into_iter()
            .rev()
            .find_map(|(_, record, said)| match said {
                Said::Reply { text, .. } if !text.is_empty() => Some((text, record)),
                _ => None,
            })
    };
    let (text, record) = summary
        .filter(|(text, _)| !text.trim().is_empty())
        .or_else(last)?;
    out.note(Note::SidechainNoReport);
    out.marked(Role::Assistant, Mark::Sidechain, Some(SUBAGENT), &text);
    Some(record)
}

/// Adds what the user typed: a slash command is a marked turn. Whether
/// there was anything.
pub(super) fn say(text: &str, out: &mut Linearizer) -> bool {
    if text.trim().is_empty() {
        return false;
    }
    match command(text) {
        Some(command) => out.marked(Role::User, Mark::Command, None, command),
        None => out.text(Role::User, text),
    }
    true
}

/// A slash command the user ran (`/compress`), as the CLI tells one from
/// a prompt: a leading `/` that does not open a comment (`//`, `/*`).
fn command(text: &str) -> Option<&str> {
    let text = text.trim();
    (text.starts_with('/') && !text.starts_with("//") && !text.starts_with("/*")).then_some(text)
}

/// The text without `<hook_context>…</hook_context>` spans (an
/// unterminated one runs to the end), trimmed: a hook's context (the
/// handoff a SessionStart hook injects) is never the user's request.
pub(super) fn strip_hook_context(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(HOOK_OPEN) {
        kept.push_str(&rest[..start]);
        let after = &rest[start + HOOK_OPEN.len()..];
        rest = after
            .find(HOOK_CLOSE)
            .map_or("", |end| &after[end + HOOK_CLOSE.len()..]);
    }
    kept.push_str(rest);
    kept.trim().to_owned()
}

/// An MCP tool's output without the CLI's `<untrusted_context>` wrapper.
fn unwrap_untrusted(output: &str) -> &str {
    let trimmed = output.trim();
    trimmed
        .strip_prefix(UNTRUSTED_OPEN)
        .and_then(|rest| rest.strip_suffix(UNTRUSTED_CLOSE))
        .unwrap_or(trimmed)
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentKind, Budget, Outcome, Turn, linearize};

    fn read(lines: &[&str]) -> Outcome {
        linearize(
            AgentKind::Gemini,
            lines.join("\n").as_bytes(),
            Budget::UNLIMITED,
        )
    }

    fn texts(o: &Outcome) -> Vec<(Role, &str, Option<Mark>)> {
        o.turns
            .iter()
            .map(|t: &Turn| (t.role, t.text.as_str(), t.mark))
            .collect()
    }

    const HEADER: &str = r#"{"sessionId":"s-1","projectHash":"h","startTime":"2026-12-05T02:20:19.689Z","lastUpdated":"2026-12-05T02:20:19.689Z","kind":"main"}"#;

    fn user(id: &str, text: &str) -> String {
        serde_json::json!({"id": id, "timestamp": "t", "type": "user", "content": [{"text": text}]})
            .to_string()
    }

    fn gemini(id: &str, text: &str) -> String {
        serde_json::json!({"id": id, "timestamp": "t", "type": "gemini", "content": text})
            .to_string()
    }

    #[test]
    fn updates_rewinds_and_checkpoints() {
        let (u1, g1, g1b, u2, g2) = (
            user("u1", "first"),
            gemini("g1", ""),
            gemini("g1", "one"),
            user("u2", "second"),
            gemini("g2", "two"),
        );
        let checkpoint = serde_json::json!({"$set": {"messages": [
            {"id": "c1", "type": "user", "content": "kept"},
            {"id": "c2", "type": "gemini", "content": "yes"}]}})
        .to_string();
        let rewind = |id: &str| serde_json::json!({"$rewindTo": id}).to_string();
        let (to_u1, to_u2, to_none) = (rewind("u1"), rewind("u2"), rewind("nope"));
        let not_a_checkpoint = r#"{"$set":{"messages":"none","lastUpdated":"t"}}"#;
        use Role::{Assistant as A, User as U};
        // (lines, the turns, (used, ignored))
        type Case<'a> = (Vec<&'a str>, Vec<(Role, &'a str)>, (usize, usize));
        let cases: Vec<Case<'_>> = vec![
            // The last write of an id, at its first place.
            (
                vec![HEADER, &u1, &g1, &u2, &g1b],
                vec![(U, "first"), (A, "one"), (U, "second")],
                (3, 2),
            ),
            (
                vec![HEADER, &u1, &g1, &u2, &g1b, &g2],
                vec![(U, "first"), (A, "one"), (U, "second"), (A, "two")],
                (4, 2),
            ),
            // A rewind drops the message and what follows.
            (
                vec![&u1, &g1b, &u2, &g2, &to_u2],
                vec![(U, "first"), (A, "one")],
                (2, 3),
            ),
            // An unknown id clears everything; later messages are read.
            (vec![&u1, &g1b, &to_none, &u2], vec![(U, "second")], (1, 3)),
            // A rewound id written again goes to the end.
            (
                vec![&u1, &u2, &to_u1, &g2, &u1],
                vec![(A, "two"), (U, "first")],
                (2, 3),
            ),
            // Only an array of messages is a checkpoint.
            (
                vec![&u1, not_a_checkpoint, &g1b],
                vec![(U, "first"), (A, "one")],
                (2, 1),
            ),
            // A checkpoint replaces what came before.
            (
                vec![HEADER, &u1, &g1b, &checkpoint, &u2],
                vec![(U, "kept"), (A, "yes"), (U, "second")],
                (2, 3),
            ),
        ];
        for (lines, want, (used, ignored)) in cases {
            let o = read(&lines);
            let got: Vec<(Role, &str)> =
                o.turns.iter().map(|t| (t.role, t.text.as_str())).collect();
            assert_eq!(got, want, "{lines:#?}");
            assert_eq!(
                (o.used, o.ignored, o.skipped),
                (used, ignored, 0),
                "{lines:#?}"
            );
            assert!(o.is_balanced());
        }
    }

    #[test]
    fn user_words_only() {
        let function_response = r#"{"id":"r","type":"user","content":[{"functionResponse":{"id":"c","name":"t","response":{"output":"x"}}}]}"#;
        let session = r#"{"id":"s","type":"user","content":[{"text":"<session_context>\ntoday\n</session_context>"}]}"#;
        let hooked = r#"{"id":"h","type":"user","content":[{"text":"<hook_context>HANDOFF</hook_context>\n\nsay hi"}]}"#;
        let hook_only =
            r#"{"id":"o","type":"user","content":"<hook_context>HANDOFF</hook_context>"}"#;
        let shown = r#"{"id":"d","type":"user","content":[{"text":"read @a.rs"},{"text":"--- a.rs ---\nfn main"}],"displayContent":[{"text":"read @a.rs"}]}"#;
        let command = r#"{"id":"c","type":"user","content":"/compress"}"#;
        let image = r#"{"id":"i","type":"user","content":[{"text":"look"},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}"#;
        let sub = r#"{"id":"a","type":"user","agentId":"x","content":"do the sub task"}"#;
        let blank = r#"{"id":"b","type":"user","content":[{"text":"  "},{"text":"real"}]}"#;
        // (line, the turn it makes, meta notes)
        type Case<'a> = (&'a str, Option<(&'a str, Option<Mark>)>, usize);
        let cases: [Case<'_>; 9] = [
            (function_response, None, 0),
            (session, None, 1),
            (hooked, Some(("say hi", None)), 0),
            (hook_only, None, 1),
            (shown, Some(("read @a.rs", None)), 0),
            (command, Some(("/compress", Some(Mark::Command))), 0),
            (image, Some(("look\n\n[image]", None)), 0),
            (sub, None, 0),
            (blank, Some(("real", None)), 0),
        ];
        let prompt = read(&[sub]);
        assert!(
            prompt.warnings[0].contains("1 sidechain (sub-agent) record was left out"),
            "{:?}",
            prompt.warnings
        );
        for (line, want, meta) in cases {
            let o = read(&[line]);
            let got: Vec<(&str, Option<Mark>)> =
                o.turns.iter().map(|t| (t.text.as_str(), t.mark)).collect();
            assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{line}");
            let noted = o.warnings.iter().any(|w| w.contains("meta record"));
            assert_eq!(noted, meta > 0, "{line}: {:?}", o.warnings);
            assert!(o.is_balanced(), "{line}");
        }
    }

    #[test]
    fn replies_tools_thoughts_and_sub_agents() {
        let tools = r#"{"id":"g","type":"gemini","content":"Looking.","thoughts":[{"subject":"s","description":"d"}],"toolCalls":[{"id":"1","name":"run_shell_command","args":{"command":"ls"},"status":"success"},{"id":"2","name":"list_directory","args":{"dir_path":"/src"},"status":"success"}]}"#;
        let parts = r#"{"id":"p","type":"gemini","content":[{"text":"plan","thought":true},{"text":"Done."},{"functionCall":{"name":"read_file","args":{"file_path":"/a"}}}]}"#;
        let agent = r#"{"id":"a","type":"gemini","content":"","toolCalls":[{"id":"3","name":"invoke_agent","args":{"agent_name":"codebase_investigator","prompt":"find x"},"result":[{"functionResponse":{"response":{"output":"x is in y.rs"}}}],"status":"success"}]}"#;
        let direct = r#"{"id":"d","type":"gemini","content":"","toolCalls":[{"id":"4","name":"researcher","args":{"prompt":"p"},"agentId":"ag-1","result":[],"resultDisplay":"found it","status":"success"}]}"#;
        let own = r#"{"id":"o","type":"gemini","agentId":"ag-2","content":"sub says"}"#;
        let info = r#"{"id":"n","type":"info","content":"Request cancelled."}"#;
        let a = |text: &str, tools: &[&str]| Turn {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            ..Turn::new(Role::Assistant, text)
        };
        let sub = |text: &str, who: &str| Turn {
            mark: Some(Mark::Sidechain),
            agent: Some(who.to_owned()),
            ..Turn::new(Role::Assistant, text)
        };
        let cases: [(&str, Vec<Turn>, &[&str]); 6] = [
            (
                tools,
                vec![a(
                    "Looking.",
                    &[
                        "[tool] run_shell_command: ls",
                        "[tool] list_directory: /src",
                    ],
                )],
                &["1 thinking block"],
            ),
            (
                parts,
                vec![a("Done.", &["[tool] read_file: /a"])],
                &["1 thinking block"],
            ),
            (
                agent,
                vec![
                    a("", &["[tool] invoke_agent: find x"]),
                    sub("x is in y.rs", "codebase_investigator"),
                ],
                &[],
            ),
            (
                direct,
                vec![
                    a("", &["[tool] researcher: p"]),
                    sub("found it", "researcher"),
                ],
                &[],
            ),
            (own, vec![sub("sub says", "ag-2")], &[]),
            (info, vec![], &["info ×1"]),
        ];
        for (line, want, warnings) in cases {
            let o = read(&[line]);
            assert_eq!(o.turns, want, "{line}");
            assert_eq!(o.warnings.len(), warnings.len(), "{line}: {:?}", o.warnings);
            for (got, want) in o.warnings.iter().zip(warnings) {
                assert!(got.contains(want), "{line}: {got:?} lacks {want:?}");
            }
            assert!(o.is_balanced(), "{line}");
        }
    }

    #[test]
    fn hook_context_is_stripped() {
        let cases = [
            ("<hook_context>H</hook_context>\n\nsay hi", "say hi"),
            ("say hi\n\n<hook_context>H</hook_context>", "say hi"),
            (
                "a<hook_context>1</hook_context>b<hook_context>2</hook_context>c",
                "abc",
            ),
            ("<hook_context>unterminated", ""),
            ("plain", "plain"),
        ];
        for (text, want) in cases {
            assert_eq!(strip_hook_context(text), want, "{text:?}");
        }
    }

    #[test]
    fn untrusted_wrappers_and_commands() {
        let cases = [
            (
                "<untrusted_context>\n{\"outcome\":\"created\"}\n</untrusted_context>",
                "{\"outcome\":\"created\"}",
            ),
            (" plain ", "plain"),
            (
                "<untrusted_context>open only",
                "<untrusted_context>open only",
            ),
        ];
        for (output, want) in cases {
            assert_eq!(unwrap_untrusted(output), want, "{output:?}");
        }
        let commands = [
            ("/compress", Some("/compress")),
            ("  /chat save x ", Some("/chat save x")),
            ("// a comment", None),
            ("/* block */", None),
            ("fix /tmp/x", None),
        ];
        for (text, want) in commands {
            assert_eq!(command(text), want, "{text:?}");
        }
    }

    #[test]
    fn a_sub_agent_session_is_its_result_else_its_last_text() {
        let header = r#"{"sessionId":"sub-1","projectHash":"h","kind":"subagent"}"#;
        let result = r#"{"$set":{"summary":"the result"}}"#;
        let blank = r#"{"$set":{"summary":"  "}}"#;
        let (task, step, found) = (
            user("u", "the task"),
            gemini("g", "step"),
            gemini("h", "found it"),
        );
        // (lines, the report, (used, ignored))
        type Case<'a> = (Vec<&'a str>, Option<&'a str>, (usize, usize));
        let cases: [Case<'_>; 4] = [
            (vec![header, &task, &step, &found], Some("found it"), (1, 3)),
            (
                vec![header, &task, &step, result],
                Some("the result"),
                (1, 3),
            ),
            (vec![header, &task, &step, blank], Some("step"), (1, 3)),
            (vec![header, &task], None, (0, 2)),
        ];
        for (lines, report, counts) in cases {
            let o = read(&lines);
            let want: Vec<_> = report
                .map(|r| (Role::Assistant, r, Some(Mark::Sidechain)))
                .into_iter()
                .collect();
            assert_eq!(texts(&o), want, "{lines:?}");
            assert!(o.turns.iter().all(|t| t.agent.as_deref() == Some(SUBAGENT)));
            assert_eq!((o.used, o.ignored), counts, "{lines:?}");
            assert_eq!(o.title, None, "{lines:?}");
        }
    }

    #[test]
    fn a_checkpoint_is_one_record() {
        let checkpoint = r#"{"$set":{"messages":[{"id":"i","type":"info","content":"saved"},{"id":"q","type":"mystery"},{"type":"user","content":"no id"},{"id":"u","type":"user","content":"kept"}]}}"#;
        let o = read(&[checkpoint]);
        assert_eq!(texts(&o), [(Role::User, "kept", None)]);
        assert_eq!((o.records, o.used, o.ignored, o.skipped), (1, 1, 0, 0));
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    }

    #[test]
    fn titles_come_from_summaries() {
        let set = r#"{"$set":{"summary":"Fix the parser"}}"#;
        let o = read(&[HEADER, &user("u", "q"), set]);
        assert_eq!(o.title.as_deref(), Some("Fix the parser"));
    }
}
