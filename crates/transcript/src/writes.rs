//! Whether a session's own transcript shows a successful `write_handoff` of
//! a key: the exact form of "written in this session" the lifecycle hooks
//! use (`handoff hook`). A timestamp comparison cannot tell an identical
//! rewrite (answered `unchanged`, so the stored `updated_at` stays older
//! than the session) from no write at all; the transcript can.
//!
//! What counts, by format (a tool named `write_handoff`, or `…__write_handoff`
//! as MCP clients prefix it, whatever the server is called):
//!
//! - **Claude Code**: an assistant `tool_use` block with `input.handoff_key`
//!   = the key, answered by a user `tool_result` block with its
//!   `tool_use_id` that is not `is_error`.
//! - **Codex**: an `event_msg` record `item_completed` whose item is an
//!   `McpToolCall` of tool `write_handoff` with `arguments.handoff_key` =
//!   the key, `status` `completed` and a result that is not `isError`. (Its
//!   `function_call_output` response item carries no reliable error mark:
//!   a failed call's output is only shaped differently.)
//! - **Copilot CLI**: a call of the tool (`<server>-write_handoff`, or
//!   `mcpToolName` `write_handoff`) with `arguments.handoff_key` = the key,
//!   in an `assistant.message` tool request or a `tool.execution_start`,
//!   answered by a `tool.execution_complete` with its `toolCallId` and
//!   `success` true.
//! - **Gemini CLI**: a `gemini` message whose `toolCalls` hold a call of
//!   `mcp_<server>_write_handoff` (how it names MCP tools) with
//!   `args.handoff_key` = the key, `status` `success` and no `error` in its
//!   function responses (the message is written again as the call
//!   progresses; the record of its outcome has both).
//! - **Grok CLI** runs no hooks: never.
//!
//! The scan streams line by line and parses only lines that can matter
//! (they name the tool, or a pending call's id), so a long transcript
//! costs one pass of substring searches.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

use crate::AgentKind;
use crate::linear::contains;

/// How one format's transcript shows a successful write of `key`: given a
/// parsed line that names the tool or may answer a pending call, whether
/// it completes one. `pending` holds the ids of calls of the tool for the
/// key still waiting for their answer (Claude Code answers in a later
/// record). Each format's own check is its row's
/// [`Format::write_check`](crate::formats::Format::write_check).
pub(crate) type WriteCheck = fn(record: &Value, key: &str, pending: &mut HashSet<String>) -> bool;

/// Whether the JSON-lines transcript on `reader` shows a successful
/// `write_handoff` of `key` (see the module docs). Unreadable lines are
/// passed over.
pub fn wrote_handoff(kind: AgentKind, reader: impl BufRead, key: &str) -> bool {
    let Some(check) = kind.format().write_check() else {
        return false;
    };
    let mut scan = Scan {
        check,
        key,
        pending: HashSet::new(),
    };
    for line in reader.split(b'\n') {
        let Ok(line) = line else {
            return false;
        };
        if scan.line(&line) {
            return true;
        }
    }
    false
}

/// [`wrote_handoff`] over the last `max_bytes` of the file at `path` (a
/// write's answer is near the session's end, where a hook looks). `false`
/// when the file cannot be read, or the agent's transcript never shows a
/// write (it runs no hooks).
pub fn file_wrote_handoff(kind: AgentKind, path: &Path, key: &str, max_bytes: u64) -> bool {
    if kind.format().write_check().is_none() {
        return false;
    }
    match crate::source::open_tail(path, max_bytes) {
        Ok(tail) => wrote_handoff(kind, tail.reader, key),
        Err(_) => false,
    }
}

/// The scan's state: the format's check, and the ids of calls of the tool
/// for the key still waiting for their answer.
struct Scan<'a> {
    check: WriteCheck,
    key: &'a str,
    pending: HashSet<String>,
}

impl Scan<'_> {
    /// Reads one line; `true` once a successful write of the key is seen.
    /// Only lines that name the tool, or a pending call's id, are parsed.
    fn line(&mut self, line: &[u8]) -> bool {
        let names_tool = contains(line, b"write_handoff");
        let may_answer = self.pending.iter().any(|id| contains(line, id.as_bytes()));
        if !names_tool && !may_answer {
            return false;
        }
        let Ok(record) = serde_json::from_slice::<Value>(line) else {
            return false;
        };
        (self.check)(&record, self.key, &mut self.pending)
    }
}

/// `write_handoff`, bare or as an MCP client prefixes it.
pub(crate) fn is_write_tool(name: Option<&str>) -> bool {
    name.is_some_and(|n| n == "write_handoff" || n.ends_with("__write_handoff"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claude_call(id: &str, name: &str, key: &str) -> String {
        json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": id, "name": name, "input": {"handoff_key": key}}]}})
        .to_string()
    }

    fn claude_result(id: &str, error: bool) -> String {
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": id, "is_error": error, "content": "ok"}]}})
        .to_string()
    }

    fn codex_item(tool: &str, key: &str, status: &str, is_error: bool) -> String {
        json!({"timestamp": "2026-12-02T03:19:06.522Z", "type": "event_msg", "payload": {
            "type": "item_completed", "item": {
                "type": "McpToolCall", "id": "call_1", "server": "handoff", "tool": tool,
                "arguments": {"handoff_key": key, "project": "p", "body": "b"},
                "status": status, "result": {"content": [], "isError": is_error}}}})
        .to_string()
    }

    fn scanned(kind: AgentKind, lines: &[String]) -> bool {
        wrote_handoff(kind, lines.join("\n").as_bytes(), "k")
    }

    #[test]
    fn a_successful_claude_code_write_of_the_key_counts() {
        let mcp = "mcp__plugin_handoff_handoff__write_handoff";
        let cases = [
            (
                vec![claude_call("a", mcp, "k"), claude_result("a", false)],
                true,
            ),
            (
                vec![
                    claude_call("a", "write_handoff", "k"),
                    claude_result("a", false),
                ],
                true,
            ),
            (
                vec![claude_call("a", mcp, "k"), claude_result("a", true)],
                false,
            ),
            (vec![claude_call("a", mcp, "k")], false),
            (
                vec![claude_call("a", mcp, "other"), claude_result("a", false)],
                false,
            ),
            (
                vec![
                    claude_call("a", "mcp__x__get_handoff", "k"),
                    claude_result("a", false),
                ],
                false,
            ),
            (
                vec![claude_call("a", mcp, "k"), claude_result("b", false)],
                false,
            ),
            (
                vec![
                    "not json".to_owned(),
                    claude_call("a", mcp, "k"),
                    claude_result("a", false),
                ],
                true,
            ),
            // Codex's record in a Claude transcript is not Claude's.
            (
                vec![codex_item("write_handoff", "k", "completed", false)],
                false,
            ),
        ];
        for (i, (lines, want)) in cases.into_iter().enumerate() {
            assert_eq!(scanned(AgentKind::Claude, &lines), want, "case {i}");
        }
    }

    #[test]
    fn a_successful_codex_mcp_call_of_the_key_counts() {
        let cases = [
            (codex_item("write_handoff", "k", "completed", false), true),
            (codex_item("write_handoff", "k", "failed", false), false),
            (codex_item("write_handoff", "k", "completed", true), false),
            (
                codex_item("write_handoff", "other", "completed", false),
                false,
            ),
            (codex_item("get_handoff", "k", "completed", false), false),
            (
                codex_item("mcp__h__write_handoff", "k", "completed", false),
                true,
            ),
            // The model's call alone (a response item) is not its answer.
            (
                json!({"type": "response_item", "payload": {"type": "function_call",
                    "name": "write_handoff", "namespace": "mcp__handoff",
                    "arguments": "{\"handoff_key\":\"k\"}", "call_id": "call_1"}})
                .to_string(),
                false,
            ),
        ];
        for (i, (line, want)) in cases.into_iter().enumerate() {
            assert_eq!(scanned(AgentKind::Codex, &[line]), want, "case {i}");
        }
        assert!(!scanned(
            AgentKind::Codex,
            &[
                claude_call("a", "write_handoff", "k"),
                claude_result("a", false)
            ]
        ));
    }

    #[test]
    fn a_file_is_read_from_its_tail() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("rollout.jsonl");
        let filler = format!(
            "{}\n",
            json!({"type": "event_msg", "payload": {"x": "y".repeat(100)}})
        );
        let write = codex_item("write_handoff", "k", "completed", false);
        std::fs::write(&path, format!("{write}\n{}", filler.repeat(100))).expect("write");
        let len = std::fs::metadata(&path).expect("meta").len();
        assert!(file_wrote_handoff(AgentKind::Codex, &path, "k", len));
        assert!(
            !file_wrote_handoff(AgentKind::Codex, &path, "k", len / 2),
            "a write before the window is not seen"
        );
        std::fs::write(&path, format!("{}{write}\n", filler.repeat(100))).expect("write");
        assert!(file_wrote_handoff(AgentKind::Codex, &path, "k", 1_000));
        assert!(!file_wrote_handoff(
            AgentKind::Codex,
            &dir.path().join("none"),
            "k",
            1_000
        ));
        assert!(!file_wrote_handoff(AgentKind::Grok, &path, "k", len));
    }
}
