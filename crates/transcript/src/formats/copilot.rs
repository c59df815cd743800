//! GitHub Copilot CLI sessions: `~/.copilot/session-state/<session>/events.jsonl`
//! (the root follows `COPILOT_HOME`). See the module docs of the crate for
//! what is kept and what is left out.
//!
//! Every line is an event envelope `{type, data, id, timestamp, parentId,
//! agentId?}` (the public schema: `github/copilot-sdk`,
//! `nodejs/src/generated/session-events.ts`). A sub-agent's own events
//! carry `agentId`; the sub-agent is kept as its report, which is the
//! result of the tool call that started it (`subagent.started` names that
//! call), the way Claude Code's sub-agents are.

use std::collections::{HashSet, VecDeque};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::formats::{Format, Home};
use crate::json::{Flag, Loose, Text, ToolInput};
use crate::linear::{Disposition, Linearizer, Note, Records, contains, read_lines};
use crate::source::open_tail;
use crate::writes::{WriteCheck, is_write_tool};
use crate::{Budget, Mark, Outcome, Role};

/// Copilot CLI's row of the registry.
pub(crate) struct Transcripts;

impl Format for Transcripts {
    fn name(&self) -> &'static str {
        "copilot"
    }

    fn label(&self) -> &'static str {
        "Copilot CLI"
    }

    fn home(&self) -> Home {
        Home {
            var: "COPILOT_HOME",
            dir: ".copilot",
        }
    }

    fn linearize(&self, reader: &mut dyn BufRead, budget: Budget) -> Outcome {
        read_lines(reader, &mut Copilot::default(), budget)
    }

    /// A session's directory is named by its id; the working directory
    /// does not place it.
    fn locate(&self, root: &Path, session: &str, _cwd: &Path) -> Option<PathBuf> {
        let path = root
            .join("session-state")
            .join(session)
            .join("events.jsonl");
        path.is_file().then_some(path)
    }

    fn write_check(&self) -> Option<WriteCheck> {
        Some(wrote)
    }

    /// Copilot CLI writes `events.jsonl` behind a debounce, so a hook may
    /// run before the events that led to it are on disk (measured: a
    /// sessionEnd hook saw only the session's first two events). Its own
    /// call is an event too, `hook.start` with the payload as `input`:
    /// once that is on disk, so is everything before it.
    fn holds_hook_start(&self, path: &Path, timestamp: i64) -> bool {
        let Ok(tail) = open_tail(path, HOOK_SCAN_BYTES) else {
            return false;
        };
        let stamp = timestamp.to_string();
        tail.reader
            .split(b'\n')
            .map_while(Result::ok)
            .filter(|line| contains(line, b"hook.start") && contains(line, stamp.as_bytes()))
            .any(|line| {
                serde_json::from_slice::<Value>(&line).is_ok_and(|event| {
                    event["type"] == "hook.start"
                        && event["data"]["input"]["timestamp"] == timestamp
                })
            })
    }

    /// `additionalContext` at the top of the answer: Copilot CLI (1.0.102)
    /// adds it to the conversation from a `sessionStart` or
    /// `userPromptSubmitted` command hook, and ignores Claude Code's
    /// `hookSpecificOutput` (measured in the agents tier).
    fn context_answer(&self, _event: &str, context: &str) -> Value {
        json!({ "additionalContext": context })
    }
}

/// How much of the end of `events.jsonl` is searched for a hook's own
/// start: the events after it are few (the other hooks of the event).
const HOOK_SCAN_BYTES: u64 = 1 << 20;

/// A write shows as a call of the tool with `arguments.handoff_key` = the
/// key (an `assistant.message` tool request or a `tool.execution_start`),
/// answered by a `tool.execution_complete` with its `toolCallId` and
/// `success` true (an `unchanged` answer is a success too).
fn wrote(record: &Value, key: &str, pending: &mut HashSet<String>) -> bool {
    let data = &record["data"];
    match record["type"].as_str() {
        Some("assistant.message") => {
            let requests = data["toolRequests"].as_array().into_iter().flatten();
            for request in requests {
                let tool = (&request["name"], &request["mcpToolName"]);
                if is_copilot_write_tool(tool) && request["arguments"]["handoff_key"] == key {
                    pending.extend(request["toolCallId"].as_str().map(str::to_owned));
                }
            }
            false
        }
        Some("tool.execution_start") => {
            let tool = (&data["toolName"], &data["mcpToolName"]);
            if is_copilot_write_tool(tool) && data["arguments"]["handoff_key"] == key {
                pending.extend(data["toolCallId"].as_str().map(str::to_owned));
            }
            false
        }
        Some("tool.execution_complete") => {
            data["success"] == Value::Bool(true)
                && data["toolCallId"]
                    .as_str()
                    .is_some_and(|id| pending.contains(id))
        }
        _ => false,
    }
}

/// Whether a tool (its `name`, and its `mcpToolName` when it is an MCP
/// tool) is `write_handoff`. Copilot names an MCP tool
/// `<server>-<tool>`.
fn is_copilot_write_tool((name, mcp_tool): (&Value, &Value)) -> bool {
    let name = name.as_str();
    is_write_tool(name)
        || is_write_tool(mcp_tool.as_str())
        || name.is_some_and(|n| n.ends_with("-write_handoff"))
}

/// Namespaces of event types that carry no conversation (session
/// metadata, streaming deltas, permissions, hooks, MCP status, …), passed
/// over by namespace; an event of a type outside them is unknown.
const IGNORED_NAMESPACES: [(&str, &str); 25] = [
    ("session.", "session.*"),
    ("assistant.", "assistant.*"),
    ("tool.", "tool.*"),
    ("subagent.", "subagent.*"),
    ("hook.", "hook.*"),
    ("permission.", "permission.*"),
    ("mcp.", "mcp.*"),
    ("mcp_app.", "mcp_app.*"),
    ("system.", "system.*"),
    ("user.", "user.*"),
    ("user_input.", "user_input.*"),
    ("elicitation.", "elicitation.*"),
    ("sampling.", "sampling.*"),
    ("command.", "command.*"),
    ("commands.", "commands.*"),
    ("external_tool.", "external_tool.*"),
    ("exit_plan_mode.", "exit_plan_mode.*"),
    ("auto_mode_switch.", "auto_mode_switch.*"),
    ("capabilities.", "capabilities.*"),
    ("factory.", "factory.*"),
    ("model.", "model.*"),
    ("pending_messages.", "pending_messages.*"),
    ("skill.", "skill.*"),
    ("tool_search.", "tool_search.*"),
    ("ui.", "ui.*"),
];

/// The most sub-agents remembered while they have not reported: one
/// started over and over without reporting must not grow the list
/// without bound (the oldest is forgotten).
const MAX_SUBAGENTS: usize = 64;

/// The most of a sub-agent's last text kept while it has not reported.
const MAX_PENDING_TEXT: usize = 8 << 10;

/// One event line: its type, its sub-agent (absent for the main agent)
/// and its data.
#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(rename = "agentId", default, borrow)]
    agent_id: Text<'a>,
    #[serde(default, borrow)]
    data: Loose<Data<'a>>,
}

/// The fields of the events the reader uses (each event type has some).
#[derive(Debug, Default, Deserialize)]
struct Data<'a> {
    /// `user.message`: the text as the user typed it (never
    /// `transformedContent`, which is what the model was sent, with the
    /// harness's wrapping). `assistant.message`: the reply.
    #[serde(default, borrow)]
    content: Text<'a>,
    #[serde(default, borrow)]
    source: Text<'a>,
    #[serde(rename = "isAutopilotContinuation", default)]
    autopilot: Flag,
    #[serde(rename = "toolRequests", default)]
    tool_requests: Vec<Loose<ToolRequest<'a>>>,
    #[serde(rename = "reasoningText", default, borrow)]
    reasoning: Text<'a>,
    #[serde(rename = "encryptedContent", default, borrow)]
    encrypted: Text<'a>,
    #[serde(rename = "reasoningOpaque", default, borrow)]
    opaque: Text<'a>,
    #[serde(rename = "toolCallId", default, borrow)]
    tool_call_id: Text<'a>,
    #[serde(rename = "agentName", default, borrow)]
    agent_name: Text<'a>,
    #[serde(rename = "agentDisplayName", default, borrow)]
    agent_display_name: Text<'a>,
    #[serde(default, borrow)]
    result: Loose<ToolResult<'a>>,
    /// `subagent.failed`: a string; `tool.execution_complete`: an object.
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    summary: Text<'a>,
    #[serde(rename = "summaryContent", default, borrow)]
    summary_content: Text<'a>,
    #[serde(default, borrow)]
    title: Text<'a>,
    /// `hook.end`: the hook's answer.
    #[serde(default, borrow)]
    output: Loose<HookOutput<'a>>,
}

/// A hook's answer as `hook.end` records it: an agentStop hook's block
/// (`decision` `block`) comes back as the next user message, its `reason`.
#[derive(Debug, Default, Deserialize)]
struct HookOutput<'a> {
    #[serde(default, borrow)]
    decision: Text<'a>,
    #[serde(default, borrow)]
    reason: Text<'a>,
}

#[derive(Debug, Default, Deserialize)]
struct ToolRequest<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    arguments: Loose<ToolInput<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct ToolResult<'a> {
    #[serde(default, borrow)]
    content: Text<'a>,
}

/// A sub-agent started by a tool call and not reported yet.
#[derive(Debug)]
struct Subagent {
    call: String,
    name: String,
}

/// The Copilot reader: it remembers the sub-agents not reported yet and
/// the last text one of them said.
#[derive(Debug, Default)]
struct Copilot {
    subagents: VecDeque<Subagent>,
    /// The last text of a sub-agent that has not reported, and who it is.
    pending: Option<(String, String)>,
    /// The reason of a hook's block, which Copilot sends on as the next
    /// user message.
    blocked: Option<String>,
}

impl Records for Copilot {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        let event: Event = match out.parse(bytes) {
            Ok(event) => event,
            Err(skipped) => return skipped,
        };
        let data = event.data.0.unwrap_or_default();
        let kind = event.kind.as_str();
        if let Some(agent) = event.agent_id.as_str() {
            return self.sub_agent_step(kind, agent, &data, out);
        }
        match kind {
            Some("user.message") => self.user(&data, out),
            Some("hook.end") => {
                let output = data.output.0.as_ref();
                if let Some(block) = output.filter(|o| o.decision.is("block")) {
                    self.blocked = block.reason.as_str().map(str::to_owned);
                }
                out.pass("hook.*")
            }
            Some("assistant.message") => assistant(&data, out),
            Some("subagent.started") => self.started(&data, out),
            Some("subagent.failed") => self.failed(&data, out),
            Some("tool.execution_complete") => self.completed(&data, out),
            Some("session.task_complete") => match data.summary.as_str() {
                Some(summary) if !summary.trim().is_empty() => {
                    out.text(Role::Assistant, summary);
                    Disposition::Used
                }
                _ => out.pass("session.task_complete"),
            },
            Some("session.compaction_complete") => compaction(&data, out),
            Some("session.title_changed") => match data.title.as_str() {
                Some(title) => {
                    out.title(title);
                    Disposition::Used
                }
                None => out.pass("session.title_changed"),
            },
            Some(k) => match IGNORED_NAMESPACES.iter().find(|(ns, _)| k.starts_with(ns)) {
                Some((_, name)) => out.pass(name),
                None => out.unknown(kind),
            },
            None => out.unknown(kind),
        }
    }

    fn finish(&mut self, out: &mut Linearizer) {
        // A sub-agent whose call is still unanswered did not report; a file
        // of nothing but its events is its own.
        let unreported = !self.subagents.is_empty() || out.turns_seen() == 0;
        if let Some((agent, text)) = self.pending.take().filter(|_| unreported) {
            out.note(Note::SidechainNoReport);
            out.marked(Role::Assistant, Mark::Sidechain, Some(&agent), &text);
            out.used_late();
        }
    }
}

impl Copilot {
    /// An event of a sub-agent (`agentId`): left out, but its last text is
    /// held in case it never reports.
    fn sub_agent_step(
        &mut self,
        kind: Option<&str>,
        agent: &str,
        data: &Data<'_>,
        out: &mut Linearizer,
    ) -> Disposition {
        out.note(Note::Sidechain);
        let text = data.content.as_str().filter(|t| !t.trim().is_empty());
        if let Some(text) = text.filter(|_| kind == Some("assistant.message")) {
            let name = self
                .subagents
                .back()
                .map_or_else(|| agent.to_owned(), |s| s.name.clone());
            self.pending = Some((name, tail(text, MAX_PENDING_TEXT)));
        }
        Disposition::Ignored
    }

    /// `subagent.started`: the sub-agent reports as the result of the call
    /// named by `toolCallId`.
    fn started(&mut self, data: &Data<'_>, out: &mut Linearizer) -> Disposition {
        let Some(call) = data.tool_call_id.as_str() else {
            return out.pass("subagent.started");
        };
        let name = [&data.agent_name, &data.agent_display_name]
            .into_iter()
            .filter_map(Text::as_str)
            .find(|n| !n.trim().is_empty())
            .unwrap_or("sub-agent");
        if self.subagents.len() >= MAX_SUBAGENTS {
            self.subagents.pop_front();
        }
        self.subagents.push_back(Subagent {
            call: call.to_owned(),
            name: name.to_owned(),
        });
        out.pass("subagent.started")
    }

    /// The sub-agent that reports on the call `call`, forgotten.
    fn take(&mut self, call: Option<&str>) -> Option<String> {
        let at = self
            .subagents
            .iter()
            .position(|s| Some(s.call.as_str()) == call)?;
        self.pending = None;
        self.subagents.remove(at).map(|s| s.name)
    }

    /// `subagent.failed`: a marked turn saying so.
    fn failed(&mut self, data: &Data<'_>, out: &mut Linearizer) -> Disposition {
        let Some(agent) = self.take(data.tool_call_id.as_str()) else {
            return out.pass("subagent.failed");
        };
        let error = match &data.error {
            Some(Value::String(e)) => e.clone(),
            Some(e) => e["message"].as_str().unwrap_or_default().to_owned(),
            None => String::new(),
        };
        out.marked(
            Role::Assistant,
            Mark::Sidechain,
            Some(&agent),
            format!("[failed] {error}").trim(),
        );
        Disposition::Used
    }

    /// `tool.execution_complete`: a tool's result, not carried, unless it
    /// is a sub-agent's report (the result of the call that started it).
    fn completed(&mut self, data: &Data<'_>, out: &mut Linearizer) -> Disposition {
        let held = self.pending.take();
        let Some(agent) = self.take(data.tool_call_id.as_str()) else {
            self.pending = held;
            return out.pass("tool.execution_complete");
        };
        let result = data.result.0.as_ref().and_then(|r| r.content.as_str());
        let report = match result.filter(|r| !r.trim().is_empty()) {
            Some(report) => report.to_owned(),
            None => held.map(|(_, text)| text).unwrap_or_default(),
        };
        if report.trim().is_empty() {
            return Disposition::Ignored;
        }
        out.marked(Role::Assistant, Mark::Sidechain, Some(&agent), &report);
        Disposition::Used
    }
}

impl Copilot {
    /// `user.message`: what the user typed (`content`). A prompt from
    /// another agent (`source` `agent-<id>`) is a marked turn of that
    /// agent; an autopilot continuation, or the reason of a hook's block
    /// sent on as a message, a marked hook turn; a hidden injection (a
    /// skill's, `source` `skill-…`) is left out.
    fn user(&mut self, data: &Data<'_>, out: &mut Linearizer) -> Disposition {
        let blocked = self.blocked.take();
        let Some(text) = data.content.as_str().filter(|t| !t.trim().is_empty()) else {
            return Disposition::Ignored;
        };
        let source = data.source.as_str().unwrap_or_default();
        if let Some(agent) = source.strip_prefix("agent-") {
            out.marked(Role::Assistant, Mark::Sidechain, Some(agent), text);
        } else if source.starts_with("skill-") {
            out.note(Note::Meta);
            return Disposition::Ignored;
        } else if data.autopilot.0 || blocked.as_deref() == Some(text) {
            out.marked(Role::User, Mark::Hook, None, text);
        } else {
            out.text(Role::User, text);
        }
        Disposition::Used
    }
}

/// `assistant.message`: its text and tool requests; reasoning is counted.
fn assistant(data: &Data<'_>, out: &mut Linearizer) -> Disposition {
    if data.encrypted.0.is_some() || data.opaque.0.is_some() {
        out.note(Note::EncryptedReasoning);
    } else if data
        .reasoning
        .as_str()
        .is_some_and(|r| !r.trim().is_empty())
    {
        out.note(Note::Reasoning);
    }
    let mut used = false;
    if let Some(text) = data.content.as_str().filter(|t| !t.trim().is_empty()) {
        out.text(Role::Assistant, text);
        used = true;
    }
    for request in data.tool_requests.iter().filter_map(|r| r.0.as_ref()) {
        let hint = request.arguments.0.as_ref().and_then(ToolInput::hint);
        out.tool(request.name.as_str().unwrap_or_default(), hint);
        used = true;
    }
    Disposition::used_if(used)
}

/// `session.compaction_complete`: its summary is a marked turn.
fn compaction(data: &Data<'_>, out: &mut Linearizer) -> Disposition {
    let Some(summary) = data
        .summary_content
        .as_str()
        .filter(|s| !s.trim().is_empty())
    else {
        return out.pass("session.compaction_complete");
    };
    out.note(if out.turns_seen() == 0 {
        Note::OpensWithSummary
    } else {
        Note::Compaction
    });
    out.marked(
        Role::User,
        Mark::Summary,
        None,
        &format!("[compaction summary] {summary}"),
    );
    Disposition::Used
}

/// The last `max` bytes of `text`, at a character boundary.
fn tail(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].trim().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::writes::wrote_handoff;
    use crate::{AgentKind, linearize};

    fn event(kind: &str, data: Value) -> String {
        json!({"type": kind, "data": data, "id": "e", "timestamp": "2026-12-05T03:00:00.000Z",
            "parentId": null})
        .to_string()
    }

    fn sub(kind: &str, data: Value) -> String {
        json!({"type": kind, "data": data, "id": "e", "timestamp": "2026-12-05T03:00:00.000Z",
            "parentId": null, "agentId": "agent-7"})
        .to_string()
    }

    fn read(lines: &[String]) -> Outcome {
        linearize(
            AgentKind::Copilot,
            lines.join("\n").as_bytes(),
            Budget::UNLIMITED,
        )
    }

    /// (role, text, mark, agent) of each turn.
    fn turns(o: &Outcome) -> Vec<(Role, &str, Option<Mark>, Option<&str>)> {
        o.turns
            .iter()
            .map(|t| (t.role, t.text.as_str(), t.mark, t.agent.as_deref()))
            .collect()
    }

    #[test]
    fn user_messages_are_what_the_user_typed() {
        let typed = |data: Value| read(&[event("user.message", data)]);
        let cases = [
            (
                json!({"content": "fix it", "transformedContent": "<current_datetime>x</current_datetime>\n\nfix it"}),
                vec![(Role::User, "fix it", None, None)],
            ),
            (
                json!({"content": "look at b.rs", "source": "agent-explore-1"}),
                vec![(
                    Role::Assistant,
                    "look at b.rs",
                    Some(Mark::Sidechain),
                    Some("explore-1"),
                )],
            ),
            (
                json!({"content": "Continue.", "isAutopilotContinuation": true}),
                vec![(Role::User, "Continue.", Some(Mark::Hook), None)],
            ),
            (
                json!({"content": "pdf rules", "source": "skill-pdf"}),
                vec![],
            ),
            (json!({"transformedContent": "only for the model"}), vec![]),
            (json!({"content": "  "}), vec![]),
        ];
        for (data, want) in cases {
            let o = typed(data.clone());
            assert_eq!(turns(&o), want, "{data}");
            assert_eq!(o.skipped, 0, "{data}");
        }
    }

    #[test]
    fn a_stop_hook_block_is_a_marked_turn() {
        let block = |reason: &str| {
            event(
                "hook.end",
                json!({"hookType": "agentStop", "success": true,
                    "output": {"decision": "block", "reason": reason}}),
            )
        };
        let allowed = event(
            "hook.end",
            json!({"hookType": "agentStop", "success": true, "output": {}}),
        );
        let said = |text: &str| {
            event(
                "user.message",
                json!({"content": text, "delivery": "queued"}),
            )
        };
        let hook = |text| (Role::User, text, Some(Mark::Hook), None);
        let user = |text| (Role::User, text, None, None);
        let cases = [
            (
                vec![block("Write it."), said("Write it.")],
                vec![hook("Write it.")],
            ),
            (vec![allowed, said("Write it.")], vec![user("Write it.")]),
            (vec![block("Write it."), said("other")], vec![user("other")]),
            (
                vec![block("Write it."), said("other"), said("Write it.")],
                vec![user("other\n\nWrite it.")],
            ),
        ];
        for (lines, want) in cases {
            assert_eq!(turns(&read(&lines)), want, "{lines:?}");
        }
    }

    #[test]
    fn assistant_messages_keep_text_and_tool_requests() {
        let o = read(&[
            event("user.message", json!({"content": "q"})),
            event(
                "assistant.message",
                json!({"messageId": "m", "content": "Reading.", "reasoningText": "hm",
                    "toolRequests": [
                        {"toolCallId": "c1", "name": "bash", "arguments": {"command": "ls"}},
                        {"toolCallId": "c2", "name": "handoff-write_handoff",
                         "arguments": {"handoff_key": "k"}, "mcpServerName": "handoff",
                         "mcpToolName": "write_handoff"}]}),
            ),
            event(
                "tool.execution_start",
                json!({"toolCallId": "c1", "toolName": "bash"}),
            ),
            event(
                "tool.execution_complete",
                json!({"toolCallId": "c1", "success": true, "result": {"content": "a.rs"}}),
            ),
            event(
                "assistant.message",
                json!({"content": "Done.", "encryptedContent": "x"}),
            ),
        ]);
        assert_eq!(
            turns(&o),
            [
                (Role::User, "q", None, None),
                (Role::Assistant, "Reading.\n\nDone.", None, None)
            ]
        );
        assert_eq!(
            o.turns[1].tools,
            ["[tool] bash: ls", "[tool] handoff-write_handoff"]
        );
        assert_eq!((o.used, o.ignored, o.skipped), (3, 2, 0));
        let warnings = o.warnings.join("\n");
        assert!(warnings.contains("reasoning"), "{warnings}");
    }

    #[test]
    fn a_sub_agent_is_kept_as_its_report() {
        let call = event(
            "assistant.message",
            json!({"content": "", "toolRequests": [{"toolCallId": "t1", "name": "task",
                "arguments": {"description": "look around"}}]}),
        );
        let started = event(
            "subagent.started",
            json!({"toolCallId": "t1", "agentName": "explore", "agentDisplayName": "Explore"}),
        );
        let step = sub("assistant.message", json!({"content": "step"}));
        let own_prompt = sub("user.message", json!({"content": "do the look"}));
        let completed = event(
            "subagent.completed",
            json!({"toolCallId": "t1", "agentName": "explore"}),
        );
        let result = |content: &str| {
            event(
                "tool.execution_complete",
                json!({"toolCallId": "t1", "success": true, "result": {"content": content}}),
            )
        };
        let failed = event(
            "subagent.failed",
            json!({"toolCallId": "t1", "agentName": "explore", "error": "out of time"}),
        );
        let report = |text: &str| (Role::Assistant, text.to_owned(), Some(Mark::Sidechain));
        let called = (Role::Assistant, String::new(), None);
        let cases = [
            (
                vec![
                    call.clone(),
                    started.clone(),
                    own_prompt.clone(),
                    step.clone(),
                    completed.clone(),
                    result("found it"),
                ],
                vec![called.clone(), report("found it")],
            ),
            (
                vec![call.clone(), started.clone(), step.clone(), result("")],
                vec![called.clone(), report("step")],
            ),
            (
                vec![call.clone(), started.clone(), step.clone()],
                vec![called.clone(), report("step")],
            ),
            (
                vec![call.clone(), started.clone(), step.clone(), failed],
                vec![called.clone(), report("[failed] out of time")],
            ),
            (
                vec![call.clone(), step.clone(), result("plain tool output")],
                vec![called],
            ),
        ];
        for (lines, want) in cases {
            let o = read(&lines);
            let got: Vec<_> = o
                .turns
                .iter()
                .map(|t| (t.role, t.text.clone(), t.mark))
                .collect();
            assert_eq!(got, want, "{lines:?}");
            for t in o.turns.iter().filter(|t| t.mark == Some(Mark::Sidechain)) {
                assert_eq!(t.agent.as_deref(), Some("explore"), "{lines:?}");
            }
            assert!(o.is_balanced(), "{lines:?}");
            assert_eq!(o.skipped, 0, "{lines:?}");
        }
    }

    #[test]
    fn session_events_give_titles_summaries_and_passes() {
        let o = read(&[
            event(
                "session.start",
                json!({"sessionId": "s", "producer": "copilot-agent"}),
            ),
            event("user.message", json!({"content": "q"})),
            event("session.title_changed", json!({"title": "Fix the parser"})),
            event(
                "session.compaction_complete",
                json!({"success": true, "summaryContent": "S"}),
            ),
            event("session.task_complete", json!({"summary": "Fixed it."})),
            event("hook.end", json!({"hookType": "sessionStart"})),
            event("session.shutdown", json!({"shutdownType": "routine"})),
            event("brand.new", json!({})),
            "not json".to_owned(),
        ]);
        assert_eq!(
            turns(&o),
            [
                (Role::User, "q", None, None),
                (
                    Role::User,
                    "[compaction summary] S",
                    Some(Mark::Summary),
                    None
                ),
                (Role::Assistant, "Fixed it.", None, None),
            ]
        );
        assert_eq!(o.title.as_deref(), Some("Fix the parser"));
        assert_eq!((o.used, o.ignored, o.skipped), (4, 3, 2));
    }

    fn copilot_wrote(lines: &[String]) -> bool {
        wrote_handoff(AgentKind::Copilot, lines.join("\n").as_bytes(), "k")
    }

    #[test]
    fn a_successful_write_of_the_key_counts() {
        let request = |name: &str, key: &str| {
            event(
                "assistant.message",
                json!({"content": "", "toolRequests": [{"toolCallId": "c1", "name": name,
                    "arguments": {"handoff_key": key, "body": "b"}}]}),
            )
        };
        let start = |name: &str, mcp: Option<&str>| {
            let mut data = json!({"toolCallId": "c1", "toolName": name,
                "arguments": {"handoff_key": "k"}});
            if let Some(tool) = mcp {
                data["mcpServerName"] = json!("handoff");
                data["mcpToolName"] = json!(tool);
            }
            event("tool.execution_start", data)
        };
        let complete = |id: &str, success: bool| {
            event(
                "tool.execution_complete",
                json!({"toolCallId": id, "success": success,
                    "result": {"content": "{\"unchanged\":true}"}}),
            )
        };
        let cases = [
            (
                vec![request("handoff-write_handoff", "k"), complete("c1", true)],
                true,
            ),
            (
                vec![
                    start("renamed", Some("write_handoff")),
                    complete("c1", true),
                ],
                true,
            ),
            (
                vec![start("write_handoff", None), complete("c1", true)],
                true,
            ),
            (
                vec![request("handoff-write_handoff", "k"), complete("c1", false)],
                false,
            ),
            (
                vec![
                    request("handoff-write_handoff", "other"),
                    complete("c1", true),
                ],
                false,
            ),
            (
                vec![request("handoff-get_handoff", "k"), complete("c1", true)],
                false,
            ),
            (
                vec![request("handoff-write_handoff", "k"), complete("c2", true)],
                false,
            ),
            (vec![request("handoff-write_handoff", "k")], false),
        ];
        for (i, (lines, want)) in cases.into_iter().enumerate() {
            assert_eq!(copilot_wrote(&lines), want, "case {i}: {lines:?}");
        }
    }

    #[test]
    fn a_hook_waits_for_its_own_start() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("events.jsonl");
        let started = |at: i64| {
            event(
                "hook.start",
                json!({"hookType": "sessionEnd", "input": {"sessionId": "s", "timestamp": at}}),
            )
        };
        let first = event("session.start", json!({"sessionId": "s"}));
        // (the file, the payload's timestamp, whether the file holds it)
        let cases = [
            (vec![first.clone()], 1_796_440_023_551, false),
            (
                vec![first.clone(), started(1_796_440_023_551)],
                1_796_440_023_551,
                true,
            ),
            (
                vec![first.clone(), started(1_796_440_023_550)],
                1_796_440_023_551,
                false,
            ),
            (
                vec![event("hook.end", json!({"input": {"timestamp": 7}}))],
                7,
                false,
            ),
        ];
        for (lines, at, want) in cases {
            std::fs::write(&path, lines.join("\n")).expect("write");
            assert_eq!(Transcripts.holds_hook_start(&path, at), want, "{lines:?}");
        }
        assert!(!Transcripts.holds_hook_start(&dir.path().join("none"), 7));
    }

    #[test]
    fn a_session_is_located_by_its_id() {
        let root = tempfile::tempdir().expect("dir");
        let dir = root.path().join("session-state/s-1");
        std::fs::create_dir_all(&dir).expect("dirs");
        std::fs::write(dir.join("events.jsonl"), "").expect("file");
        let cwd = Path::new("/anywhere");
        assert_eq!(
            Transcripts.locate(root.path(), "s-1", cwd),
            Some(dir.join("events.jsonl"))
        );
        assert_eq!(Transcripts.locate(root.path(), "s-2", cwd), None);
    }
}
