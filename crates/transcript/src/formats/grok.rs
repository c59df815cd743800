//! Grok CLI sessions: rows of the SQLite `~/.grok/grok.db` (table
//! `messages`: `session_id`, `seq`, `message_json`, one Vercel AI SDK
//! message per row); the JSON lines of
//! `~/.grok/sessions/<URL-encoded cwd>/<id>/chat_history.jsonl`, one chat
//! message per line (`role`, `content`, an assistant's `tool_calls`); and
//! the legacy `~/.grok/sessions/<id>.json`.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::Deserialize;
use serde_json::Value;

use crate::budget::Budget;
use crate::formats::{Format, Home};
use crate::json::{Content, Loose, Text, ToolInput};
use crate::linear::{Disposition, Linearizer, Note, Records, read_lines};
use crate::read::{FileError, read_jsonl, read_jsonl_tail};
use crate::{Outcome, Role};

const DB_FILE: &str = "grok.db";
/// A session's messages, in its own directory under `sessions/<cwd>/`.
pub(crate) const HISTORY_FILE: &str = "chat_history.jsonl";
const MESSAGES_QUERY: &str = "SELECT message_json FROM messages WHERE session_id = ?1 ORDER BY seq";

/// Grok CLI's row of the registry. It runs no hooks (the defaults).
pub(crate) struct Transcripts;

impl Format for Transcripts {
    fn name(&self) -> &'static str {
        "grok"
    }

    fn label(&self) -> &'static str {
        "Grok CLI"
    }

    fn home(&self) -> Home {
        Home {
            var: "GROK_HOME",
            dir: ".grok",
        }
    }

    /// One AI SDK message per line, as in its database.
    fn linearize(&self, reader: &mut dyn BufRead, budget: Budget) -> Outcome {
        read_lines(reader, &mut Grok, budget)
    }

    /// A session's `chat_history.jsonl`, unless a database holds the
    /// sessions (its legacy files are not JSON lines).
    fn locate(&self, root: &Path, session: &str, _cwd: &Path) -> Option<PathBuf> {
        let in_db = root.join(DB_FILE).is_file();
        locate_history(root, session).filter(|_| !in_db)
    }

    fn read_session(
        &self,
        root: &Path,
        session: &str,
        _cwd: &Path,
        budget: Budget,
    ) -> Option<Outcome> {
        read(root, session, budget)
    }

    /// A `.db` database (with `session`), a session's
    /// `chat_history.jsonl` or a legacy `.json` session.
    fn read_file(
        &self,
        path: &Path,
        session: Option<&str>,
        budget: Budget,
    ) -> Result<Option<Outcome>, FileError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("db") => {
                let session = session.ok_or(FileError::SessionRequired)?;
                Ok(read_db(path, session, budget))
            }
            Some("json") => Ok(read_legacy(path, budget)),
            Some("jsonl") => Ok(read_jsonl(self, path, budget)),
            _ => Err(FileError::UnsupportedGrokFile(path.to_owned())),
        }
    }

    /// A `chat_history.jsonl` from a whole line; a legacy `.json` (one
    /// JSON document) is not read; a database is read by session.
    fn read_tail(
        &self,
        path: &Path,
        session: Option<&str>,
        budget: Budget,
        len: u64,
        max_bytes: u64,
    ) -> Result<Option<Outcome>, FileError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => Ok(Some(read_jsonl_tail(self, path, budget, len, max_bytes))),
            Some("json") => Ok(Some(Outcome::unreadable(
                path,
                &format!("it is {len} bytes, over the {max_bytes}-byte limit of this read"),
            ))),
            _ => self.read_file(path, session, budget),
        }
    }

    fn file_holds_sessions(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "db")
    }
}

/// The session from the database when it holds it, else its
/// `chat_history.jsonl`, else the legacy file. A database that cannot be
/// read is reported only when there is neither of the others.
fn read(root: &Path, session: &str, budget: Budget) -> Option<Outcome> {
    let db = root.join(DB_FILE);
    let legacy = root.join("sessions").join(format!("{session}.json"));
    let history = locate_history(root, session);
    let from_db = db.is_file().then(|| query(&db, session, budget));
    match (from_db, history) {
        (Some(Ok(Some(outcome))), _) => Some(outcome),
        (_, Some(history)) => read_jsonl(&Transcripts, &history, budget),
        (Some(Err(err)), None) if !legacy.is_file() => Some(Outcome::unreadable(&db, &err)),
        _ => read_legacy(&legacy, budget),
    }
}

/// `<root>/sessions/<any cwd directory>/<session>/chat_history.jsonl`, the
/// first that exists (the directory of a working directory is its
/// URL-encoded path, which the session id alone does not give).
fn locate_history(root: &Path, session: &str) -> Option<PathBuf> {
    std::fs::read_dir(root.join("sessions"))
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(session).join(HISTORY_FILE))
        .find(|path| path.is_file())
}

/// The messages of `session` in the database at `path`; `None` when the
/// file does not exist or holds no message of that session.
fn read_db(path: &Path, session: &str, budget: Budget) -> Option<Outcome> {
    if !path.is_file() {
        return None;
    }
    query(path, session, budget).unwrap_or_else(|err| Some(Outcome::unreadable(path, &err)))
}

fn query(path: &Path, session: &str, budget: Budget) -> rusqlite::Result<Option<Outcome>> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    let mut statement = conn.prepare(MESSAGES_QUERY)?;
    let mut rows = statement.query([session])?;
    let mut out = Linearizer::new(budget);
    let mut stopped = false;
    loop {
        match rows.next() {
            Ok(Some(row)) => {
                let disposition = match row.get_ref(0) {
                    Ok(ValueRef::Text(bytes) | ValueRef::Blob(bytes)) => {
                        Grok.record(bytes, &mut out)
                    }
                    _ => {
                        out.note(Note::Shape);
                        Disposition::Skipped
                    }
                };
                out.count(disposition);
            }
            Ok(None) => break,
            Err(err) => {
                out.error(format!(
                    "reading stopped after {} rows: {err}",
                    out.records()
                ));
                stopped = true;
                break;
            }
        }
    }
    Ok((out.records() > 0 || stopped).then(|| out.finish()))
}

/// A legacy session file: one JSON document whose `messages` (or the
/// document itself, when it is an array) are read one by one.
fn read_legacy(path: &Path, budget: Budget) -> Option<Outcome> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        Err(err) => return Some(Outcome::unreadable(path, &err)),
    };
    let mut out = Linearizer::new(budget);
    match serde_json::from_reader::<_, Value>(BufReader::new(file)) {
        Ok(document) => legacy_messages(&document, &mut out),
        Err(err) => {
            let disposition = out.unreadable(&err);
            out.count(disposition);
        }
    }
    Some(out.finish())
}

fn legacy_messages(document: &Value, out: &mut Linearizer) {
    let messages = match document {
        Value::Array(items) => Some(items),
        Value::Object(fields) => fields.get("messages").and_then(Value::as_array),
        _ => None,
    };
    let Some(messages) = messages else {
        out.note(Note::Shape);
        out.count(Disposition::Skipped);
        return;
    };
    for item in messages {
        let disposition = match Message::deserialize(item) {
            Ok(message) if item.is_object() => read_message(message, out),
            Ok(_) => {
                out.note(Note::Shape);
                Disposition::Skipped
            }
            Err(err) => out.unreadable(&err),
        };
        out.count(disposition);
    }
}

/// An AI SDK message (`role`, `content`), or a legacy entry (`type`,
/// `content`, `toolCallName` or `toolCall`).
#[derive(Debug, Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    role: Text<'a>,
    #[serde(default, borrow)]
    content: Content<'a>,
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(rename = "toolCallName", default, borrow)]
    tool_call_name: Text<'a>,
    #[serde(rename = "toolCall", default, borrow)]
    tool_call: Loose<ToolCall<'a>>,
    /// A chat message's tool calls (`chat_history.jsonl`).
    #[serde(default, borrow)]
    tool_calls: Vec<Loose<ToolCall<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
struct ToolCall<'a> {
    #[serde(default, borrow)]
    function: Loose<Function<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct Function<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    /// The arguments, a JSON object in a string.
    #[serde(default, borrow)]
    arguments: Text<'a>,
}

/// The Grok reader: one message per record.
struct Grok;

impl Records for Grok {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        match out.parse::<Message>(bytes) {
            Ok(message) => read_message(message, out),
            Err(skipped) => skipped,
        }
    }
}

fn read_message(message: Message<'_>, out: &mut Linearizer) -> Disposition {
    match (message.role.as_str(), message.kind.as_str()) {
        (Some("user"), _) | (None, Some("user")) => user(&message.content, out),
        (Some("assistant"), _) | (None, Some("assistant")) => {
            let said = assistant(&message.content, out);
            let called = chat_tool_calls(&message.tool_calls, out);
            if called { Disposition::Used } else { said }
        }
        (Some("system" | "tool"), _) | (None, Some("tool_result")) => Disposition::Ignored,
        (None, Some("tool_call")) => {
            let function = message.tool_call.0.and_then(|call| call.function.0);
            let name = message
                .tool_call_name
                .0
                .or_else(|| function.and_then(|f| f.name.0))
                .unwrap_or_default();
            out.tool(&name, None);
            Disposition::Used
        }
        (role, kind) => out.unknown(role.or(kind)),
    }
}

fn user(content: &Content<'_>, out: &mut Linearizer) -> Disposition {
    let mut parts: Vec<String> = Vec::new();
    match content {
        Content::Text(text) => parts.push(text.to_string()),
        Content::Blocks(blocks) => {
            for block in blocks.iter().map(|b| b.0.as_ref()) {
                match block {
                    Some(b) if b.kind.is("text") => {
                        parts.extend(b.text.as_str().map(str::to_owned))
                    }
                    Some(b) if b.kind.is("image") => parts.push("[image]".to_owned()),
                    Some(b) if b.kind.is("file") => parts.push(match b.filename.as_str() {
                        Some(name) => format!("[file: {name}]"),
                        None => "[file]".to_owned(),
                    }),
                    _ => out.note(Note::UnknownBlock),
                }
            }
        }
        Content::Absent => {}
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() {
        return Disposition::Ignored;
    }
    out.text(Role::User, &text);
    Disposition::Used
}

/// A chat message's `tool_calls`, each `[tool] name: hint` (the hint from
/// its JSON arguments). Whether there was one.
fn chat_tool_calls(calls: &[Loose<ToolCall<'_>>], out: &mut Linearizer) -> bool {
    let mut called = false;
    for function in calls
        .iter()
        .filter_map(|call| call.0.as_ref())
        .filter_map(|call| call.function.0.as_ref())
    {
        let input = function
            .arguments
            .as_str()
            .and_then(|args| serde_json::from_str::<ToolInput>(args).ok());
        out.tool(
            function.name.as_str().unwrap_or_default(),
            input.as_ref().and_then(ToolInput::hint),
        );
        called = true;
    }
    called
}

fn assistant(content: &Content<'_>, out: &mut Linearizer) -> Disposition {
    let mut used = false;
    match content {
        Content::Text(text) => {
            used = !text.trim().is_empty();
            out.text(Role::Assistant, text);
        }
        Content::Blocks(blocks) => {
            for block in blocks.iter().map(|b| b.0.as_ref()) {
                match block {
                    Some(b) if b.kind.is("text") => {
                        if let Some(text) = b.text.as_str().filter(|t| !t.trim().is_empty()) {
                            out.text(Role::Assistant, text);
                            used = true;
                        }
                    }
                    Some(b) if b.kind.is("tool-call") => {
                        let hint = b.input.0.as_ref().and_then(|input| input.hint());
                        out.tool(b.tool_name.as_str().unwrap_or_default(), hint);
                        used = true;
                    }
                    Some(b) if b.kind.is("reasoning") => out.note(Note::Reasoning),
                    Some(b) if b.kind.is("tool-result") => {}
                    _ => out.note(Note::UnknownBlock),
                }
            }
        }
        Content::Absent => {}
    }
    Disposition::used_if(used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentKind, linearize};

    #[test]
    fn message_dispositions() {
        let cases = [
            (r#"{"role":"user","content":"hi"}"#, Disposition::Used),
            (
                r#"{"role":"user","content":[{"type":"image","image":"b64"}]}"#,
                Disposition::Used,
            ),
            (
                r#"{"role":"system","content":"you are grok"}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"role":"tool","content":[{"type":"tool-result","toolCallId":"1"}]}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"role":"assistant","content":[{"type":"reasoning","text":"hm"}]}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"role":"assistant","content":[{"type":"tool-call","toolName":"bash","input":{"command":"ls"}}]}"#,
                Disposition::Used,
            ),
            (
                r#"{"type":"tool_call","toolCallName":"view_file","content":"x"}"#,
                Disposition::Used,
            ),
            (
                r#"{"type":"tool_result","content":"x"}"#,
                Disposition::Ignored,
            ),
            (r#"{"role":"critic","content":"x"}"#, Disposition::Skipped),
            (r#""just a string""#, Disposition::Skipped),
        ];
        for (line, want) in cases {
            let o = linearize(AgentKind::Grok, line.as_bytes(), Budget::UNLIMITED);
            assert_eq!(Disposition::of_one(&o, line), want, "{line}");
        }
    }

    #[test]
    fn chat_messages_list_their_tool_calls() {
        let cases = [
            (
                r#"{"role":"assistant","content":"Looking.","tool_calls":[{"id":"1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls -la\"}"}}]}"#,
                "Looking.",
                vec!["[tool] bash: ls -la"],
            ),
            (
                r#"{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"view_file","arguments":"{\"path\":\"a.rs\"}"}},{"function":{"name":"x","arguments":"not json"}}]}"#,
                "",
                vec!["[tool] view_file: a.rs", "[tool] x"],
            ),
            (r#"{"role":"assistant","content":"Done."}"#, "Done.", vec![]),
        ];
        for (line, text, tools) in cases {
            let o = linearize(AgentKind::Grok, line.as_bytes(), Budget::UNLIMITED);
            assert_eq!(o.used, 1, "{line}");
            assert_eq!(o.turns[0].text, text, "{line}");
            assert_eq!(o.turns[0].tools, tools, "{line}");
        }
    }

    #[test]
    fn legacy_tool_calls_name_the_function() {
        let line = r#"{"type":"tool_call","content":"Running","toolCall":{"id":"1","function":{"name":"bash","arguments":"{}"}}}"#;
        let o = linearize(AgentKind::Grok, line.as_bytes(), Budget::UNLIMITED);
        assert_eq!(o.turns[0].tools, ["[tool] bash"]);
    }
}
