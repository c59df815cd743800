//! How Claude Code's records read as turns: the reader's state across
//! lines (queued steering messages, sub-agent calls waiting for their
//! reports, a sidechain's last text) and what each record type gives.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;

use super::said::{
    STOP_HOOK_FEEDBACK, Said, classify, notification, strip_reminders, user_parts, user_text,
};
use crate::json::{Content, Flag, Loose, Text};
use crate::linear::{Disposition, Linearizer, Note, Records, contains};
use crate::{Mark, Role};

/// Record types that carry no conversation, counted by name when passed
/// over: the session metadata Claude Code re-appends as the session goes
/// (modes, names, colours, latches, costs, API requests, …).
const IGNORED_TYPES: [&str; 30] = [
    "summary",
    "system",
    "file-history-snapshot",
    "progress",
    "attachment",
    "permission-mode",
    "mode",
    "repl-mode",
    "memory-mode",
    "agent-name",
    "agent-color",
    "agent-setting",
    "worktree-state",
    "api-request",
    "api-request-shape",
    "api-request-blob",
    "atis-latch",
    "isolation-latch",
    "cost-state",
    "tag",
    "dev-mods",
    "hybrid-organization",
    "relocated",
    "session-owner",
    "bridge-session",
    "frame-link",
    "tools-used",
    "derived-from",
    "resume-head-vouch",
    "data-flow-records",
];

/// Queued messages remembered while waiting for their `remove`, and Task
/// calls remembered while waiting for their report: a queue the user keeps
/// filling without the agent taking from it must not grow without bound
/// (the oldest is forgotten).
const MAX_QUEUED: usize = 64;

/// The tools that run a sub-agent, whose result is the sub-agent's report.
const SUBAGENT_TOOLS: [&str; 2] = ["Task", "Agent"];

/// The most of a sub-agent's last text kept while it has not reported.
const MAX_PENDING_SIDECHAIN: usize = 8 << 10;

/// How Claude Code answers a Task call whose sub-agent runs in the
/// background: its report comes later, in a `<task-notification>`.
const ASYNC_LAUNCH: &str = "Async agent launched";

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
    #[serde(default, borrow)]
    operation: Text<'a>,
    #[serde(default, borrow)]
    content: Content<'a>,
    #[serde(rename = "aiTitle", default, borrow)]
    ai_title: Text<'a>,
    #[serde(rename = "customTitle", default, borrow)]
    custom_title: Text<'a>,
    #[serde(rename = "lastPrompt", default, borrow)]
    last_prompt: Text<'a>,
    #[serde(rename = "prUrl", default, borrow)]
    pr_url: Text<'a>,
    #[serde(rename = "agentId", default, borrow)]
    agent_id: Text<'a>,
    /// Who made a synthetic user turn (`{"kind": "task-notification"}`).
    #[serde(default, borrow)]
    origin: Loose<Origin<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct Origin<'a> {
    #[serde(default, borrow)]
    kind: Text<'a>,
}

#[derive(Debug, Default, Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    content: Content<'a>,
}

/// A user record read again for the sub-agent reports it carries: the
/// `tool_result` blocks with their content (which the first read skips).
#[derive(Debug, Default, Deserialize)]
struct Reports<'a> {
    #[serde(default, borrow)]
    message: Loose<ReportMessage<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct ReportMessage<'a> {
    #[serde(default, borrow)]
    content: Vec<Loose<ReportBlock<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
struct ReportBlock<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    tool_use_id: Text<'a>,
    #[serde(default, borrow)]
    content: Content<'a>,
}

/// A sub-agent started by a Task call and not reported yet.
#[derive(Debug)]
struct Task {
    id: String,
    agent: String,
    /// The background agent's id, from its launch ("agentId: …").
    launched: Option<String>,
}

/// The Claude Code reader; it remembers the messages queued and not yet
/// taken (see the `queue-operation` rule in the module docs of [`super`]),
/// the sub-agents not reported yet, and the session's titles.
#[derive(Debug, Default)]
pub(super) struct Claude {
    queued: VecDeque<String>,
    tasks: VecDeque<Task>,
    /// The last text of a sub-agent that has not reported (sidechain
    /// records), and who it is.
    sidechain: Option<(String, String)>,
    ai_title: Option<String>,
    custom_title: Option<String>,
    /// The last `last-prompt` (each turn records one).
    last_prompt: Option<String>,
}

impl Records for Claude {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        let record: Record = match out.parse(bytes) {
            Ok(record) => record,
            Err(skipped) => return skipped,
        };
        let kind = record.kind.as_str();
        match kind {
            Some("user" | "assistant") if record.sidechain.0 => self.sidechain(record, out),
            Some("user") => {
                let reported = self.reports(bytes, out);
                match self.user(record, out) {
                    Disposition::Ignored if reported => Disposition::Used,
                    disposition => disposition,
                }
            }
            Some("queue-operation") => self.queue(record, out),
            Some("assistant") => self.assistant(record, out),
            Some("system") if record.subtype.is("compact_boundary") => {
                out.note(Note::Compaction);
                out.pass("system")
            }
            Some("ai-title") => {
                self.ai_title = record.ai_title.as_str().map(str::to_owned);
                Disposition::used_if(self.ai_title.is_some())
            }
            Some("custom-title") => {
                self.custom_title = record.custom_title.as_str().map(str::to_owned);
                Disposition::used_if(self.custom_title.is_some())
            }
            Some("last-prompt") => match record.last_prompt.as_str() {
                Some(prompt) => {
                    self.last_prompt = Some(prompt.to_owned());
                    Disposition::Used
                }
                None => out.pass("last-prompt"),
            },
            Some("pr-link") => match record.pr_url.as_str() {
                Some(url) => {
                    out.reference("pull request", url);
                    Disposition::Used
                }
                None => out.pass("pr-link"),
            },
            Some(k) => match IGNORED_TYPES.iter().find(|t| **t == k) {
                Some(name) => out.pass(name),
                None => out.unknown(kind),
            },
            None => out.unknown(kind),
        }
    }

    fn finish(&mut self, out: &mut Linearizer) {
        // Sidechain records may follow the report they led to: only a
        // sub-agent whose Task call is still unanswered did not report. A
        // file of nothing but sidechain records is a sub-agent's own
        // (`subagents/agent-<id>.jsonl`): its last text is what it found.
        let unreported = !self.tasks.is_empty() || out.turns_seen() == 0;
        if let Some((agent, text)) = self.sidechain.take().filter(|_| unreported) {
            out.note(Note::SidechainNoReport);
            out.marked(Role::Assistant, Mark::Sidechain, Some(&agent), &text);
            out.used_late();
        }
        if let Some(title) = self.custom_title.as_deref().or(self.ai_title.as_deref()) {
            out.title(title);
        }
        if let Some(prompt) = &self.last_prompt {
            out.reference("last prompt", prompt);
        }
    }
}

impl Claude {
    /// A `queue-operation`: `enqueue` remembers the message; `dequeue`
    /// forgets the oldest (it is the next prompt, recorded as a `user`
    /// record of its own); `popAll` takes every queued message back into
    /// the prompt box to be edited, undelivered; `remove` delivers a
    /// message into the running turn, where no `user` record carries it,
    /// so it becomes a user turn here: its own content, else the oldest
    /// remembered message.
    fn queue(&mut self, record: Record<'_>, out: &mut Linearizer) -> Disposition {
        let operation = record.operation.as_str().map(str::to_owned);
        let text = user_text(record.content, out);
        match operation.as_deref() {
            Some("enqueue") => {
                if self.queued.len() >= MAX_QUEUED {
                    self.queued.pop_front();
                }
                self.queued.push_back(text);
                Disposition::Ignored
            }
            Some("dequeue") => {
                self.queued.pop_front();
                Disposition::Ignored
            }
            Some("popAll") => {
                self.queued.clear();
                Disposition::Ignored
            }
            Some("remove") => {
                let delivered = self.queued.pop_front().unwrap_or_default();
                let text = if text.is_empty() { delivered } else { text };
                if text.is_empty() {
                    return Disposition::Ignored;
                }
                out.text(Role::User, &text);
                Disposition::Used
            }
            _ => Disposition::Ignored,
        }
    }

    /// A sidechain record (a sub-agent's step, in the main file): left
    /// out, but the sub-agent's last text is held in case it never
    /// reports.
    fn sidechain(&mut self, record: Record<'_>, out: &mut Linearizer) -> Disposition {
        out.note(Note::Sidechain);
        if !record.kind.is("assistant") {
            return Disposition::Ignored;
        }
        let agent = self
            .tasks
            .back()
            .map(|task| task.agent.clone())
            .or_else(|| record.agent_id.as_str().map(str::to_owned))
            .unwrap_or_else(|| "sub-agent".to_owned());
        let texts: Vec<Cow<str>> = match content(record) {
            Content::Text(text) => vec![text],
            Content::Blocks(blocks) => blocks
                .into_iter()
                .filter_map(|b| b.0)
                .filter(|b| b.kind.is("text"))
                .filter_map(|b| b.text.0)
                .collect(),
            Content::Absent => Vec::new(),
        };
        let text = texts.join("\n\n");
        if !text.trim().is_empty() {
            self.sidechain = Some((agent, tail_chars(&text, MAX_PENDING_SIDECHAIN)));
        }
        Disposition::Ignored
    }

    fn assistant(&mut self, record: Record<'_>, out: &mut Linearizer) -> Disposition {
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
                            let name = b.name.as_str().unwrap_or_default();
                            let input = b.input.0.as_ref();
                            out.tool(name, input.and_then(|input| input.hint()));
                            if SUBAGENT_TOOLS.contains(&name) {
                                let agent = input
                                    .and_then(|i| i.subagent_type.as_str())
                                    .filter(|a| !a.trim().is_empty())
                                    .unwrap_or(name);
                                self.start_task(b.id.as_str().unwrap_or_default(), agent);
                            }
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
        Disposition::used_if(used)
    }

    fn start_task(&mut self, id: &str, agent: &str) {
        if self.tasks.len() >= MAX_QUEUED {
            self.tasks.pop_front();
        }
        self.tasks.push_back(Task {
            id: id.to_owned(),
            agent: agent.to_owned(),
            launched: None,
        });
    }

    /// The reports of the sub-agents a user record answers (their Task
    /// calls' results), each a marked assistant turn. The record is read
    /// again only when it names a sub-agent's call, so tool results stay
    /// unread otherwise. Whether there was a report.
    fn reports(&mut self, bytes: &[u8], out: &mut Linearizer) -> bool {
        let names_a_task = self
            .tasks
            .iter()
            .any(|task| !task.id.is_empty() && contains(bytes, task.id.as_bytes()));
        if !names_a_task {
            return false;
        }
        let Ok(record) = serde_json::from_slice::<Reports>(bytes) else {
            return false;
        };
        let mut reported = false;
        let blocks = record.message.0.map(|m| m.content).unwrap_or_default();
        for block in blocks.into_iter().filter_map(|b| b.0) {
            if !block.kind.is("tool_result") {
                continue;
            }
            let Some(at) = self
                .tasks
                .iter()
                .position(|task| block.tool_use_id.is(&task.id))
            else {
                continue;
            };
            let Some(mut task) = self.tasks.remove(at) else {
                continue;
            };
            let report = report_text(block.content);
            if report.starts_with(ASYNC_LAUNCH) {
                // Not a report: it comes later, as a notification, which
                // may name only the agent's id.
                task.launched = report
                    .lines()
                    .find_map(|line| line.trim().strip_prefix("agentId:"))
                    .map(|id| id.trim().to_owned());
                self.tasks.push_back(task);
                continue;
            }
            self.sidechain = None;
            reported |= !report.trim().is_empty();
            out.marked(Role::Assistant, Mark::Sidechain, Some(&task.agent), &report);
        }
        reported
    }
}

/// The text of a tool result's content: a string, or its text blocks.
fn report_text(content: Content<'_>) -> String {
    match content {
        Content::Text(text) => text.into_owned(),
        Content::Blocks(blocks) => blocks
            .into_iter()
            .filter_map(|b| b.0)
            .filter(|b| b.kind.is("text"))
            .filter_map(|b| b.text.0)
            .collect::<Vec<_>>()
            .join("\n\n"),
        Content::Absent => String::new(),
    }
}

/// The last `max` bytes of `text`, at a character boundary.
fn tail_chars(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].trim().to_owned()
}

fn content(record: Record<'_>) -> Content<'_> {
    record.message.0.map(|m| m.content).unwrap_or_default()
}

impl Claude {
    fn user(&mut self, record: Record<'_>, out: &mut Linearizer) -> Disposition {
        let summary = record.compact_summary.0;
        let notified = record
            .origin
            .0
            .as_ref()
            .is_some_and(|o| o.kind.is("task-notification"));
        if notified {
            // A background sub-agent's report (meta or not), whatever
            // notice comes before it: never the user asking.
            let text = report_text(content(record));
            return match notification(&strip_reminders(&text)) {
                Said::Report { call, text } if !text.is_empty() => {
                    self.report(call, &text, out);
                    Disposition::Used
                }
                _ => Disposition::Ignored,
            };
        }
        if record.meta.0 {
            // Not the user speaking, unless it is a hook's feedback.
            let text = report_text(content(record));
            let text = strip_reminders(&text);
            if text.starts_with(STOP_HOOK_FEEDBACK) {
                out.marked(Role::User, Mark::Hook, None, &text);
                return Disposition::Used;
            }
            out.note(Note::Meta);
            return Disposition::Ignored;
        }
        let parts = user_parts(content(record), out);
        if parts.is_empty() {
            return Disposition::Ignored;
        }
        if summary {
            let text = parts.join("\n\n");
            if out.turns_seen() == 0 {
                out.note(Note::OpensWithSummary);
            }
            out.marked(
                Role::User,
                Mark::Summary,
                None,
                &format!("[compaction summary] {text}"),
            );
            return Disposition::Used;
        }
        for part in &parts {
            match classify(part) {
                Said::Marked(mark, text) => out.marked(Role::User, mark, None, &text),
                Said::Request(text) => out.text(Role::User, text),
                Said::Report { call, text } => self.report(call, &text, out),
            }
        }
        Disposition::Used
    }

    /// A background sub-agent's report on the Task call `call`: a marked
    /// turn of that sub-agent.
    fn report(&mut self, call: &str, text: &str, out: &mut Linearizer) {
        let agent = self
            .take_task(call)
            .unwrap_or_else(|| "sub-agent".to_owned());
        self.sidechain = None;
        out.marked(Role::Assistant, Mark::Sidechain, Some(&agent), text);
    }

    /// The sub-agent of the Task call `id` (or launched as agent `id`),
    /// which has reported.
    fn take_task(&mut self, id: &str) -> Option<String> {
        let at = self
            .tasks
            .iter()
            .position(|task| task.id == id || task.launched.as_deref() == Some(id))?;
        self.tasks.remove(at).map(|task| task.agent)
    }
}
