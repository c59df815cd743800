//! Transcript linearizer: reads another agent's session into plain
//! conversational turns and wraps them in a handoff document.
//!
//! # Why
//!
//! When an agent of one kind takes over from an agent of another kind, there
//! is no compact handoff yet, only the source agent's transcript, in that
//! agent's own format. This module reads the transcript into a LINEAR list of
//! [`Turn`]s (who said what, and which tools the assistant called) and builds
//! a document the destination reads as DATA, not instructions: it summarizes
//! and waits or, given a task, continues once it understands where things
//! stand ([`document`]). The document goes to a file ([`files`]) and the
//! destination is launched with a short prompt naming that file, because a
//! large paste is not submitted reliably while a file has no size limit.
//!
//! The reader is best-effort and never fails the whole read: every record is
//! counted as used, deliberately ignored, or skipped (unparseable or of an
//! unknown type) in the [`Outcome`], and `warnings` say what was left out so
//! that the destination's summary can mention the gaps. Records of a known
//! type that carry no conversation are counted by their type's name, so the
//! warning says which were passed over, and only new types read as unknown. It streams line by
//! line, and the [`Budget`] keeps a bounded tail of turns while streaming, so
//! memory does not grow with the transcript.
//!
//! # Turns
//!
//! A turn is a run of content of one role: consecutive assistant messages
//! (the steps of a tool loop, or several lines sharing one Claude
//! `message.id`) form one assistant turn, whose `tools` lists its tool calls
//! as `[tool] <name>: <main argument>`, cut to 120 characters, the last 40
//! per turn. Tool results, thinking and reasoning are not carried; images
//! read as `[image]`.
//!
//! A **marked** turn ([`Mark`]) is a turn of its own that is not the user
//! asking or the assistant answering: an interrupt, shell-mode input or
//! output, a slash command, a hook's feedback, a compaction summary, a
//! sub-agent's report (with the sub-agent's name in `agent`). The rescue
//! never takes a marked turn for the user's last request.
//!
//! # Formats
//!
//! Each format is one module of `formats`, and one row of its registry,
//! which every reader, the rescue, the hook and the writes scan consult
//! (see `formats` for how to add one):
//!
//! - **Claude Code** (`~/.claude/projects/<cwd with every non-alphanumeric
//!   character made '-'>/<session>.jsonl`; the root follows
//!   `CLAUDE_CONFIG_DIR`; when the slug directory has no such file, every
//!   project directory is searched). `user` and `assistant` records; content
//!   as a string or blocks (`text`, `tool_use`, `tool_result`, `thinking`,
//!   `image`). A sub-agent (a `Task` or `Agent` tool call) is kept as its
//!   report in a marked turn named after its `subagent_type`: the call's
//!   `tool_result`, or for one launched in the background ("Async agent
//!   launched") the notification that reports it later: a user record
//!   holding `<task-notification>` (2.1 line; also after a notice, or
//!   marked `origin.kind` `task-notification`, `isMeta` or not) or
//!   `<agent-notification>` (2.0 line, naming the agent's id), read as
//!   `[status] summary` and its `<result>` (else where the result was
//!   written), never as a request. Its steps (sidechain records, `isSidechain`) are
//!   left out with a warning, except the last text of a sub-agent whose
//!   call is still unanswered at the end of the file (it had not
//!   reported), or of a file that is a sub-agent's own transcript.
//!   Meta lines (`isMeta`: harness caveats and injected context) and
//!   local-command caveats written without `isMeta` are not the user
//!   speaking: they are left out and counted in a warning, except a Stop
//!   hook's feedback (`Stop hook feedback:`), a marked turn.
//!   `<system-reminder>` blocks and `<local-command-…>` output are dropped
//!   silently. Interrupts (`[Request interrupted by user…]`), shell-mode
//!   input and output (`<bash-input>`, `<bash-stdout>`) and slash commands
//!   (`<command-name>`, read as `/name args`) are marked turns. `ai-title`
//!   and `custom-title` give the [`Outcome`]'s title (a title the user set
//!   wins); `last-prompt` and `pr-link` are its `refs`. The session metadata
//!   Claude Code appends (`permission-mode`, `mode`, `agent-name`,
//!   `worktree-state`, `api-request`, `cost-state`, …) is passed over by
//!   name.
//! - **Claude Code steering** (`queue-operation` records: a message the user
//!   typed while the agent worked). The rule for "delivered": `enqueue`
//!   only queues the message (it may never be sent); `dequeue` takes the
//!   oldest as the next prompt, which Claude Code records as an ordinary
//!   `user` record, so it is not repeated; `remove` delivers the message
//!   into the running turn, where no `user` record carries it, so it
//!   becomes a user turn at that point (the record's content, else the
//!   oldest queued message), and the assistant's next reply follows it;
//!   `popAll` takes every queued message back into the prompt box to be
//!   edited (undelivered: an edit is queued again). Other operations, and
//!   messages still queued at the end, are not turns.
//! - **Compaction** (Claude `compact_boundary` + `isCompactSummary`, Codex
//!   `compacted`): the file still holds the turns before the compaction, so
//!   they are read as they are, and the summary is a marked user turn
//!   starting `[compaction summary]` where it was recorded (a warning
//!   records the compaction; when the summary opens the file, the warning
//!   says the turns it summarizes live in an earlier session).
//! - **Codex** (`~/.codex/sessions/YYYY/MM/DD/rollout-*-<session>.jsonl`, or
//!   `~/.codex/archived_sessions/`; the root follows `CODEX_HOME`).
//!   `response_item` messages and `function_call` / `custom_tool_call` /
//!   `local_shell_call` / `web_search_call` / `tool_search_call` /
//!   `image_generation_call` items (a `spawn_agent` call shows its
//!   message). `event_msg` user and agent messages mostly repeat the
//!   response-item messages for the UI, in either order, but not always (a
//!   prompt can exist only as an event): each message is read from the
//!   record it is first seen in, and its repetition is passed over. An
//!   `agent_message` item (a message between agents) is a marked turn
//!   naming its sender, a `<hook_prompt …>` user message (a Stop hook's
//!   block) a marked hook turn. Injected environment context, AGENTS.md
//!   and skill instructions and developer messages are not user turns.
//!   Reasoning is left out (counted, encrypted or not). Metadata
//!   (`session_meta`, `turn_context`, `token_usage_record`, `world_state`,
//!   other events such as `item_completed`) is passed over by name; unknown
//!   item types are skipped and counted. The older format without a
//!   `payload` envelope is read too.
//! - **Copilot CLI** (`~/.copilot/session-state/<session>/events.jsonl`;
//!   the root follows `COPILOT_HOME`), one event envelope per line
//!   (`{type, data, id, timestamp, parentId, agentId?}`). `user.message`
//!   is its `content`, what the user typed (never `transformedContent`,
//!   the harness-wrapped text sent to the model); a prompt from another
//!   agent (`source` `agent-…`) is a marked turn of that agent, an
//!   autopilot continuation a marked hook turn, a hidden skill injection
//!   (`source` `skill-…`) is left out. `assistant.message` gives its text
//!   and `toolRequests`; reasoning is counted. A sub-agent
//!   (`subagent.started` names the tool call that runs it) is kept as its
//!   report, the result of that call, in a marked turn named after it; its
//!   own events (`agentId`) are left out with a warning, except its last
//!   text when it never reports; `subagent.failed` is a marked turn saying
//!   so. `session.title_changed` gives the title, a compaction's
//!   `summaryContent` a marked summary turn, `session.task_complete` its
//!   summary as the assistant's. Every other event of a known namespace
//!   (`session.*`, `tool.*`, `hook.*`, …) is passed over by namespace.
//! - **Grok CLI**: the SQLite `~/.grok/grok.db` (root `GROK_HOME`), table
//!   `messages` of the session ordered by `seq`, each row a Vercel AI SDK
//!   message (`text`, `tool-call`, `tool-result`, `reasoning`, `image`,
//!   `file` parts); a session's
//!   `~/.grok/sessions/<URL-encoded cwd>/<id>/chat_history.jsonl`, one chat
//!   message per line (an assistant's `tool_calls` are its tool calls),
//!   streamed like the other JSON-lines transcripts; and the legacy
//!   `~/.grok/sessions/<id>.json` (a `messages` array of such messages or
//!   of `{type, content, toolCallName}` entries), which is one JSON
//!   document and is read whole.
//! - **Gemini CLI** (`~/.gemini/tmp/<project id>/chats/session-<time>-<first
//!   8 of the session id>.jsonl`, the file whose header's `sessionId` is the
//!   session; a sub-agent's `chats/<parent>/<id>.jsonl`; the project id is
//!   the working directory's slug in `~/.gemini/projects.json`, or before
//!   0.29 the SHA-256 of its path; `GEMINI_CLI_HOME` replaces the home
//!   directory). JSON lines since 0.39: a header, `$set` metadata updates
//!   (a `$set.messages` is a checkpoint that replaces every message), and
//!   message records, written again under the same `id` as they change
//!   (the last write is read, at the place of the first), and `$rewindTo`,
//!   which drops a message and all after it; so the messages are held until
//!   the end of the file, as the CLI's own loader does. Before 0.39 a
//!   session is one JSON document (`.json`, `{…, messages}`), read whole.
//!   `user` messages are the user's text (`displayContent` when recorded):
//!   tool results (`functionResponse`) are not words, the CLI's
//!   `<session_context>` message and a hook's `<hook_context>…</hook_context>`
//!   (the handoff a SessionStart hook injects) are left out, a leading `/`
//!   is a marked slash command. `gemini` messages: their text, `toolCalls`
//!   (else `functionCall` parts) as tool calls; thoughts are left out
//!   (counted). A sub-agent (`invoke_agent`, `delegate_to_agent`, or a call
//!   whose outcome names an `agentId`) is kept as its report in a marked
//!   turn named after the agent; a message with an `agentId` is the
//!   sub-agent's (marked); a sub-agent's own file (`kind: subagent`) reads
//!   as its result (the `summary` the CLI sets when it completes), else its
//!   last text. `info`, `error` and `warning` messages are passed
//!   over by name; the header's or a `$set`'s `summary` is the title. A
//!   project's `logs.json` (interactive prompts of every session, by
//!   `sessionId`) is read with a session id, as the user's prompts only.
//!
//! Rewound branches (Claude `parentUuid` forks) are read in file order: the
//! reader is linear by design.
//!
//! # CLI
//!
//! - `handoff transcript read --agent A (--session ID [--cwd DIR] | --file PATH)`
//!   prints the [`Outcome`] as JSON.
//! - `handoff transcript build … [--task T]` writes the document and prints
//!   its path, then the launch message.
//! - `handoff transcript sweep --max-age 24h` removes expired documents.
//!
//! `--max-turns` / `--max-bytes` set the budget (0: no limit), `--agent-home`
//! overrides the agent's root directory, `--state-dir` where documents go.
//! The source flags are one [`cli::SourceArgs`] with one loader, shared with
//! `handoff rescue`.

pub mod budget;
pub mod cli;
pub mod document;
pub mod files;
mod formats;
mod json;
mod linear;
mod read;
pub mod rescue;
mod source;
pub mod writes;

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use budget::Budget;
pub use document::{build_continuation_handoff, build_handoff, continue_message, inject_message};
pub use files::{sweep_files, write_file};
pub use formats::{AgentKind, ContextLimit};
pub use read::{
    Locations, check_session_id, linearize, locate, read, read_file, read_file_tail, read_with,
};
pub use source::FileError;

/// Who speaks in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// What a marked turn is: not the user asking or the assistant answering in
/// the main conversation, but something the harness recorded in a user or
/// assistant record. A marked turn is a turn of its own, never merged with
/// its neighbours, and it is never taken as the user's last request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    /// The user interrupted the agent (`[Request interrupted by user]`).
    Interrupt,
    /// Shell-mode input or its output, run by the user, not a request.
    Shell,
    /// A slash command the user ran (`/compact`), without its XML.
    Command,
    /// A hook's feedback fed back to the agent (a Stop hook's block reason).
    Hook,
    /// A compaction summary of earlier turns.
    Summary,
    /// A sub-agent's report (its final one when there is one).
    Sidechain,
}

/// One conversational turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: Role,
    pub text: String,
    /// `[tool] <name>: <main argument>` per tool call, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// What the turn is, when it is marked (see [`Mark`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<Mark>,
    /// The sub-agent whose turn this is (with [`Mark::Sidechain`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Turn {
    /// An unmarked turn of `role` with `text` and no tool calls.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Turn {
            role,
            text: text.into(),
            tools: Vec::new(),
            mark: None,
            agent: None,
        }
    }

    /// Whether this is the user asking (an unmarked user turn).
    pub fn is_request(&self) -> bool {
        self.role == Role::User && self.mark.is_none()
    }

    /// Whether this is the assistant answering (an unmarked assistant turn).
    pub fn is_reply(&self) -> bool {
        self.role == Role::Assistant && self.mark.is_none()
    }
}

/// What a read produced. Every record (line, row or legacy message) is
/// counted once: `records == used + ignored + skipped`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Records read.
    pub records: usize,
    /// Records that contributed to a turn (kept by the budget or not).
    pub used: usize,
    /// Records left out on purpose: metadata, tool results, duplicates,
    /// sidechains, blank lines.
    pub ignored: usize,
    /// Records that could not be parsed or whose type is unknown.
    pub skipped: usize,
    /// What was left out or cut, for the destination to mention.
    pub warnings: Vec<String>,
    pub turns: Vec<Turn>,
    /// The session's title, as the agent named it (Claude Code `ai-title`,
    /// or a title the user set), the last one recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the transcript points to, oldest first, each once: the
    /// agent's record of the last prompt, a pull request it opened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
}

impl Outcome {
    /// An existing transcript that could not be read at all.
    pub(crate) fn unreadable(what: &Path, err: &dyn fmt::Display) -> Self {
        Outcome {
            warnings: vec![format!("could not read {}: {err}", what.display())],
            ..Outcome::default()
        }
    }

    /// Whether every record is accounted for.
    pub fn is_balanced(&self) -> bool {
        self.records == self.used + self.ignored + self.skipped
    }

    /// The outcome of reading `turns`, one used record each (tests).
    #[cfg(test)]
    pub(crate) fn of_turns(turns: Vec<Turn>) -> Self {
        Outcome {
            records: turns.len(),
            used: turns.len(),
            turns,
            ..Outcome::default()
        }
    }
}
