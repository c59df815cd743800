//! Gemini CLI sessions: `~/.gemini/tmp/<project id>/chats/session-*.jsonl`
//! (JSON lines since 0.39; one JSON document, `.json`, before), and the
//! prompts of interactive sessions in `~/.gemini/tmp/<project id>/logs.json`.
//! See the module docs of the crate for what is kept and what is left out,
//! [`locate`] for where a session is, and [`records`] for how its records
//! are read.

mod locate;
mod records;
mod wire;

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::formats::{Format, Home};
use crate::linear::{Disposition, Linearizer, Note, Records, read_lines};
use crate::source::{FileError, read_jsonl};
use crate::writes::{WriteCheck, is_write_tool};
use crate::{Budget, Outcome};

/// Gemini CLI's row of the registry.
pub(crate) struct Transcripts;

impl Format for Transcripts {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn label(&self) -> &'static str {
        "Gemini CLI"
    }

    /// `GEMINI_CLI_HOME` stands for the home directory: the state is its
    /// `.gemini`.
    fn home(&self) -> Home {
        Home {
            var: "GEMINI_CLI_HOME",
            dir: ".gemini",
        }
    }

    fn var_is_home(&self) -> bool {
        true
    }

    fn linearize(&self, reader: &mut dyn BufRead, budget: Budget) -> Outcome {
        read_lines(reader, &mut records::Gemini::default(), budget)
    }

    /// The session's file (`.jsonl`, or an older `.json`), found by its
    /// header (see [`locate`]).
    fn locate(&self, root: &Path, session: &str, cwd: &Path) -> Option<PathBuf> {
        locate::locate(root, session, cwd)
    }

    /// The session's file, else its prompts in a project's `logs.json`.
    fn read_session(
        &self,
        root: &Path,
        session: &str,
        cwd: &Path,
        budget: Budget,
    ) -> Option<Outcome> {
        if let Some(path) = self.locate(root, session, cwd) {
            return self.read_file(&path, None, budget).ok().flatten();
        }
        let tmp = root.join("tmp");
        let mut dirs: Vec<PathBuf> = locate::project_ids(root, cwd)
            .into_iter()
            .map(|id| tmp.join(id))
            .collect();
        for dir in locate::projects(&tmp) {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs.into_iter()
            .map(|dir| dir.join(locate::LOGS))
            .filter(|path| path.is_file())
            .find_map(|path| read_logs(&path, session, budget))
    }

    /// A `logs.json` (with `session`), a single-document `.json` session,
    /// or JSON lines.
    fn read_file(
        &self,
        path: &Path,
        session: Option<&str>,
        budget: Budget,
    ) -> Result<Option<Outcome>, FileError> {
        if self.file_holds_sessions(path) {
            let session = session.ok_or(FileError::LogsSessionRequired)?;
            return Ok(read_logs(path, session, budget));
        }
        if path.extension().is_some_and(|e| e == "json") {
            return Ok(read_document(path, budget));
        }
        Ok(read_jsonl(path, |r| self.linearize(r, budget)))
    }

    /// JSON lines from a whole line; a `.json` (one JSON document) longer
    /// than the window is not read.
    fn read_tail(
        &self,
        path: &Path,
        session: Option<&str>,
        budget: Budget,
        len: u64,
        max_bytes: u64,
    ) -> Result<Option<Outcome>, FileError> {
        if path.extension().is_some_and(|e| e == "json") {
            if self.file_holds_sessions(path) && session.is_none() {
                return Err(FileError::LogsSessionRequired);
            }
            return Ok(Some(Outcome::unreadable(
                path,
                &format!("it is {len} bytes, over the {max_bytes}-byte limit of this read"),
            )));
        }
        Ok(Some(crate::source::read_jsonl_tail(
            path,
            len,
            max_bytes,
            |r| self.linearize(r, budget),
        )))
    }

    /// `logs.json` holds the prompts of every session of a project.
    fn file_holds_sessions(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|name| name == locate::LOGS)
    }

    fn write_check(&self) -> Option<WriteCheck> {
        Some(wrote)
    }

    /// Gemini CLI's events (0.61): `AfterAgent` ends every agent turn and
    /// takes a block as Claude Code's `Stop` does; `PreCompress` runs
    /// before every model request, compressing or not.
    fn hook_event(&self, event: &'static str) -> &'static str {
        match event {
            "Stop" => "AfterAgent",
            "PreCompact" => "PreCompress",
            other => other,
        }
    }
}

/// A write shows as a `gemini` message whose `toolCalls` hold a call of
/// the tool (`mcp_<server>_write_handoff`, as the CLI names an MCP
/// server's tools) with `args.handoff_key` = the key, `status` `success`
/// and no `error` in its function responses. The CLI writes the message
/// again as the call progresses, so only the record of its outcome
/// matches; a checkpoint (`$set.messages`) or a whole-session line is
/// searched too. Nothing is pending: the outcome is in the same record.
fn wrote(record: &Value, key: &str, _pending: &mut HashSet<String>) -> bool {
    let nested = [&record["$set"]["messages"], &record["messages"]]
        .into_iter()
        .filter_map(Value::as_array)
        .flatten();
    std::iter::once(record)
        .chain(nested)
        .filter(|message| message["type"] == "gemini")
        .filter_map(|message| message["toolCalls"].as_array())
        .flatten()
        .any(|call| {
            is_gemini_write_tool(call["name"].as_str())
                && call["args"]["handoff_key"] == key
                && call["status"] == "success"
                && !failed(&call["result"])
        })
}

/// `write_handoff` as Gemini CLI names an MCP tool
/// (`mcp_<server>_write_handoff`), or as other clients do.
fn is_gemini_write_tool(name: Option<&str>) -> bool {
    is_write_tool(name)
        || name.is_some_and(|n| n.starts_with("mcp_") && n.ends_with("_write_handoff"))
}

/// Whether a call's result parts hold a failed function response.
fn failed(result: &Value) -> bool {
    result.as_array().into_iter().flatten().any(|part| {
        let response = &part["functionResponse"]["response"];
        !response["error"].is_null()
    })
}

/// A session written as one JSON document (before 0.39): its `messages`
/// are read one by one, each a record.
fn read_document(path: &Path, budget: Budget) -> Option<Outcome> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        Err(err) => return Some(Outcome::unreadable(path, &err)),
    };
    let mut out = Linearizer::new(budget);
    let mut reader = records::Gemini::default();
    match serde_json::from_reader::<_, Value>(BufReader::new(file)) {
        Ok(document) => match document["messages"].as_array() {
            Some(messages) => {
                reader.document(&document, &mut out);
                for message in messages {
                    let disposition = reader.value(message, &mut out);
                    out.count(disposition);
                }
            }
            None => {
                out.note(Note::Shape);
                out.count(Disposition::Skipped);
            }
        },
        Err(err) => {
            let disposition = out.unreadable(&err);
            out.count(disposition);
        }
    }
    reader.finish(&mut out);
    Some(out.finish())
}

/// The prompts `session` typed, from a `logs.json` (an array of
/// `{sessionId, messageId, timestamp, type, message}`, every session of a
/// project, written by interactive sessions only). `None` when it holds
/// none of the session's.
fn read_logs(path: &Path, session: &str, budget: Budget) -> Option<Outcome> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        Err(err) => return Some(Outcome::unreadable(path, &err)),
    };
    let entries = match serde_json::from_reader::<_, Value>(BufReader::new(file)) {
        Ok(Value::Array(entries)) => entries,
        Ok(_) => return Some(Outcome::unreadable(path, &"it is not a JSON array")),
        Err(err) => return Some(Outcome::unreadable(path, &err)),
    };
    let mut out = Linearizer::new(budget);
    for entry in entries.iter().filter(|e| e["sessionId"] == session) {
        let disposition = match (entry["type"].as_str(), entry["message"].as_str()) {
            (Some("user"), Some(text)) => prompt(text, &mut out),
            (Some("user"), None) => Disposition::Ignored,
            (kind, _) => out.unknown(kind),
        };
        out.count(disposition);
    }
    if out.records() == 0 {
        return None;
    }
    let mut outcome = out.finish();
    outcome.warnings.insert(
        0,
        format!(
            "{} holds only what the user typed: the agent's replies and tool calls are not in it",
            path.display()
        ),
    );
    Some(outcome)
}

/// One prompt of `logs.json`: a slash command is a marked turn.
fn prompt(text: &str, out: &mut Linearizer) -> Disposition {
    Disposition::used_if(records::say(&records::strip_hook_context(text), out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::writes::wrote_handoff;
    use crate::{AgentKind, Mark};

    fn call(name: &str, key: &str, status: &str, output: Value) -> Value {
        json!({"id": "m1", "timestamp": "2026-12-05T02:20:19.784Z", "type": "gemini",
            "content": "", "toolCalls": [{"id": "c1", "name": name,
            "args": {"handoff_key": key, "body": "b"},
            "result": [{"functionResponse": {"id": "c1", "name": name, "response": output}}],
            "status": status}]})
    }

    fn ok(outcome: &str) -> Value {
        json!({"output": format!("<untrusted_context>\n{{\"outcome\":\"{outcome}\"}}\n</untrusted_context>")})
    }

    #[test]
    fn a_successful_write_of_the_key_counts() {
        let tool = "mcp_handoff_write_handoff";
        let cases = [
            (call(tool, "k", "success", ok("created")), true),
            // An identical rewrite is answered `unchanged`: still a write.
            (call(tool, "k", "success", ok("unchanged")), true),
            (call("write_handoff", "k", "success", ok("created")), true),
            (
                call(
                    "mcp_other_server_write_handoff",
                    "k",
                    "success",
                    ok("created"),
                ),
                true,
            ),
            (call(tool, "other", "success", ok("created")), false),
            (call(tool, "k", "error", ok("created")), false),
            (call(tool, "k", "cancelled", ok("created")), false),
            (
                call(tool, "k", "success", json!({"error": "refused"})),
                false,
            ),
            (
                call("mcp_handoff_get_handoff", "k", "success", ok("created")),
                false,
            ),
            (call("write_handoffs", "k", "success", ok("created")), false),
            // In a checkpoint.
            (
                json!({"$set": {"messages": [call(tool, "k", "success", ok("created"))]}}),
                true,
            ),
            // A user message answering the call is not the call.
            (
                json!({"id": "u", "type": "user", "content": [{"functionResponse":
                    {"name": tool, "response": ok("created")}}], "toolCalls": [
                    {"name": tool, "args": {"handoff_key": "k"}, "status": "success"}]}),
                false,
            ),
        ];
        for (i, (record, want)) in cases.into_iter().enumerate() {
            let line = record.to_string();
            assert_eq!(
                wrote_handoff(AgentKind::Gemini, line.as_bytes(), "k"),
                want,
                "case {i}: {line}"
            );
        }
        // The call in progress, then its outcome: the same message twice.
        let running = call(tool, "k", "executing", json!({})).to_string();
        let done = call(tool, "k", "success", ok("created")).to_string();
        let lines = format!("{running}\n{done}\n");
        assert!(wrote_handoff(AgentKind::Gemini, lines.as_bytes(), "k"));
        assert!(!wrote_handoff(AgentKind::Gemini, running.as_bytes(), "k"));
    }

    #[test]
    fn logs_hold_one_sessions_prompts() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("logs.json");
        let logs = json!([
            {"sessionId": "a", "messageId": 0, "timestamp": "t", "type": "user", "message": "fix it"},
            {"sessionId": "b", "messageId": 0, "timestamp": "t", "type": "user", "message": "other"},
            {"sessionId": "a", "messageId": 1, "timestamp": "t", "type": "user", "message": "/compress"},
            {"sessionId": "a", "messageId": 2, "timestamp": "t", "type": "user", "message": "and test it"},
        ]);
        std::fs::write(&path, logs.to_string()).expect("write");
        let read = |session| Transcripts.read_file(&path, session, Budget::UNLIMITED);
        let o = read(Some("a")).expect("read").expect("the session");
        let got: Vec<(&str, Option<Mark>)> =
            o.turns.iter().map(|t| (t.text.as_str(), t.mark)).collect();
        assert_eq!(
            got,
            [
                ("fix it", None),
                ("/compress", Some(Mark::Command)),
                ("and test it", None)
            ]
        );
        assert_eq!((o.records, o.used), (3, 3));
        assert!(
            o.warnings[0].contains("only what the user typed"),
            "{:?}",
            o.warnings
        );
        assert_eq!(read(Some("c")), Ok(None));
        assert_eq!(read(None), Err(FileError::LogsSessionRequired));
        assert!(AgentKind::Gemini.file_holds_sessions(&path));
        assert!(!AgentKind::Gemini.file_holds_sessions(Path::new("session-x.jsonl")));
    }

    #[test]
    fn a_session_without_a_file_is_read_from_logs() {
        let root = tempfile::tempdir().expect("dir");
        let project = root.path().join("tmp").join(locate::sha256_hex("/w/app"));
        std::fs::create_dir_all(project.join("chats")).expect("dirs");
        let logs = json!([{"sessionId": "s-1", "messageId": 0, "timestamp": "t",
            "type": "user", "message": "only typed"}]);
        std::fs::write(project.join("logs.json"), logs.to_string()).expect("write");
        let locations =
            crate::Locations::default().with_root(AgentKind::Gemini, root.path().to_owned());
        let read = |session: &str, cwd: &str| {
            crate::read_with(
                &locations,
                AgentKind::Gemini,
                session,
                Path::new(cwd),
                Budget::UNLIMITED,
            )
        };
        for cwd in ["/w/app", "/elsewhere"] {
            let o = read("s-1", cwd).expect("the session's prompts");
            assert_eq!(o.turns.len(), 1, "{cwd}");
            assert_eq!(o.turns[0].text, "only typed", "{cwd}");
        }
        assert_eq!(read("s-2", "/w/app"), None);
    }

    #[test]
    fn an_old_single_document_session_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("session-2025-09-01T10-00-abcd1234.json");
        let document = json!({"sessionId": "abcd1234-x", "projectHash": "h",
        "startTime": "2025-09-01T10:00:00.000Z", "lastUpdated": "t", "summary": "Old work",
        "messages": [
            {"id": "1", "type": "user", "content": "old question"},
            {"id": "2", "type": "gemini", "content": "old answer",
             "toolCalls": [{"name": "read_file", "args": {"absolute_path": "/a"}, "status": "success"}]},
            {"id": "3", "type": "info", "content": "saved"},
            7
        ]});
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&document).expect("json"),
        )
        .expect("write");
        let o = Transcripts
            .read_file(&path, None, Budget::UNLIMITED)
            .expect("read")
            .expect("exists");
        let got: Vec<(&str, Vec<String>)> = o
            .turns
            .iter()
            .map(|t| (t.text.as_str(), t.tools.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("old question", vec![]),
                ("old answer", vec!["[tool] read_file: /a".to_owned()])
            ]
        );
        assert_eq!((o.records, o.used, o.ignored, o.skipped), (4, 2, 1, 1));
        assert_eq!(o.title.as_deref(), Some("Old work"));
    }
}
