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
//! - **Claude Code** (`~/.claude/projects/<cwd with every non-alphanumeric
//!   character made '-'>/<session>.jsonl`; the root follows
//!   `CLAUDE_CONFIG_DIR`; when the slug directory has no such file, every
//!   project directory is searched). `user` and `assistant` records; content
//!   as a string or blocks (`text`, `tool_use`, `tool_result`, `thinking`,
//!   `image`). A sub-agent (a `Task` or `Agent` tool call) is kept as its
//!   report in a marked turn named after its `subagent_type`: the call's
//!   `tool_result`, or for one launched in the background ("Async agent
//!   launched") the `<task-notification>` user record that brings its
//!   `<result>` later. Its steps (sidechain records, `isSidechain`) are
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
mod claude;
pub mod cli;
mod codex;
pub mod document;
pub mod files;
mod grok;
mod json;
mod linear;
pub mod rescue;
pub mod writes;

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use budget::Budget;
pub use document::{build_continuation_handoff, build_handoff, continue_message, inject_message};
pub use files::{sweep_files, write_file};

/// The agents whose transcripts can be read: every kind has a reader (the
/// exhaustive matches of [`read_with`] and [`read_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Grok,
}

impl AgentKind {
    pub const ALL: [AgentKind; 3] = [AgentKind::Claude, AgentKind::Codex, AgentKind::Grok];

    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Grok => "grok",
        }
    }

    /// The product name, for people and agents.
    pub fn label(self) -> &'static str {
        match self {
            AgentKind::Claude => "Claude Code",
            AgentKind::Codex => "Codex",
            AgentKind::Grok => "Grok CLI",
        }
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AgentKind {
    type Err = String;

    /// Accepts the names and the product names (`claude-code`, `grok-cli`),
    /// in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        AgentKind::ALL
            .into_iter()
            .find(|kind| {
                wanted == kind.name()
                    || wanted == kind.label().to_ascii_lowercase().replace(' ', "-")
            })
            .ok_or_else(|| {
                let names: Vec<&str> = AgentKind::ALL.into_iter().map(AgentKind::name).collect();
                format!("unknown agent {s:?} (supported: {})", names.join(", "))
            })
    }
}

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
    fn unreadable(what: &Path, err: &dyn fmt::Display) -> Self {
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

/// Where each agent keeps its state (`~/.claude`, `~/.codex`, `~/.grok`).
/// `None` when there is neither an override nor a home directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    pub claude: Option<PathBuf>,
    pub codex: Option<PathBuf>,
    pub grok: Option<PathBuf>,
}

impl Locations {
    /// From `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GROK_HOME`, else `$HOME`.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = set("HOME");
        let root = |env: &str, dir: &str| set(env).or_else(|| home.as_ref().map(|h| h.join(dir)));
        Locations {
            claude: root("CLAUDE_CONFIG_DIR", ".claude"),
            codex: root("CODEX_HOME", ".codex"),
            grok: root("GROK_HOME", ".grok"),
        }
    }

    /// These locations with `kind`'s root replaced by `dir`.
    pub fn with_root(mut self, kind: AgentKind, dir: PathBuf) -> Self {
        *self.root_mut(kind) = Some(dir);
        self
    }

    pub fn root(&self, kind: AgentKind) -> Option<&Path> {
        match kind {
            AgentKind::Claude => self.claude.as_deref(),
            AgentKind::Codex => self.codex.as_deref(),
            AgentKind::Grok => self.grok.as_deref(),
        }
    }

    fn root_mut(&mut self, kind: AgentKind) -> &mut Option<PathBuf> {
        match kind {
            AgentKind::Claude => &mut self.claude,
            AgentKind::Codex => &mut self.codex,
            AgentKind::Grok => &mut self.grok,
        }
    }
}

/// Checks that a session id is a plain file-name component, so that it
/// cannot lead a path out of the agent's directory.
pub fn check_session_id(id: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() {
        Err("the session id is empty".to_owned())
    } else if id.len() > 200 {
        Err("the session id is longer than 200 characters".to_owned())
    } else if id.starts_with('.') || !id.chars().all(plain) {
        Err(format!(
            "the session id {id:?} may only hold letters, digits, '-', '_' and '.', and may not start with '.'"
        ))
    } else {
        Ok(())
    }
}

/// Reads the transcript of `session_id` where `kind` keeps it (`cwd` locates
/// Claude Code sessions), with the default budget. `None` when there is no
/// such transcript.
pub fn read(kind: AgentKind, session_id: &str, cwd: &Path) -> Option<Outcome> {
    read_with(
        &Locations::from_env(),
        kind,
        session_id,
        cwd,
        Budget::default(),
    )
}

/// [`read`] with explicit locations and budget.
pub fn read_with(
    locations: &Locations,
    kind: AgentKind,
    session_id: &str,
    cwd: &Path,
    budget: Budget,
) -> Option<Outcome> {
    check_session_id(session_id).ok()?;
    let root = locations.root(kind)?;
    match kind {
        AgentKind::Claude => read_jsonl(kind, &claude::locate(root, session_id, cwd)?, budget),
        AgentKind::Codex => read_jsonl(kind, &codex::locate(root, session_id)?, budget),
        AgentKind::Grok => grok::read(root, session_id, budget),
    }
}

/// The JSON-lines file of `session_id` where `kind` keeps it (`cwd`
/// locates Claude Code sessions); `None` when there is none (for Grok: a
/// session's `chat_history.jsonl`; its database and legacy files are not
/// JSON lines).
pub fn locate(
    locations: &Locations,
    kind: AgentKind,
    session_id: &str,
    cwd: &Path,
) -> Option<PathBuf> {
    check_session_id(session_id).ok()?;
    let root = locations.root(kind)?;
    match kind {
        AgentKind::Claude => claude::locate(root, session_id, cwd),
        AgentKind::Codex => codex::locate(root, session_id),
        AgentKind::Grok => {
            let in_db = root.join("grok.db").is_file();
            grok::locate_history(root, session_id).filter(|_| !in_db)
        }
    }
}

/// Why a file cannot be read as a transcript of a kind.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FileError {
    #[error("a Grok database holds many sessions: give the session id (--session)")]
    SessionRequired,
    #[error(
        "{0}: a Grok transcript file is a .db database, a session's chat_history.jsonl or a legacy .json session"
    )]
    UnsupportedGrokFile(PathBuf),
}

/// Reads one transcript file directly: a `.jsonl` (Claude, Codex, a Grok
/// session's `chat_history.jsonl`), or for Grok a legacy `.json` session
/// or a `.db` database with `session`.
/// `Ok(None)` when the file (or the session in the database) does not exist.
pub fn read_file(
    kind: AgentKind,
    path: &Path,
    session: Option<&str>,
    budget: Budget,
) -> Result<Option<Outcome>, FileError> {
    match kind {
        AgentKind::Claude | AgentKind::Codex => Ok(read_jsonl(kind, path, budget)),
        AgentKind::Grok => match path.extension().and_then(|e| e.to_str()) {
            Some("db") => {
                let session = session.ok_or(FileError::SessionRequired)?;
                Ok(grok::read_db(path, session, budget))
            }
            Some("json") => Ok(grok::read_legacy(path, budget)),
            Some("jsonl") => Ok(read_jsonl(kind, path, budget)),
            _ => Err(FileError::UnsupportedGrokFile(path.to_owned())),
        },
    }
}

/// [`read_file`] of at most the last `max_bytes` bytes of the file: a
/// session's end is what a rescue needs, and a hook must be done within its
/// timeout and its memory whatever the file holds (a first line with no end,
/// gigabytes of it). In a longer JSON-lines file the line the window cuts
/// is counted as skipped, and a warning says how much was not read. A Grok
/// legacy `.json` session (one JSON document) longer than `max_bytes` is
/// not read (a warning says so); a Grok database is read by session, as
/// [`read_file`] does.
pub fn read_file_tail(
    kind: AgentKind,
    path: &Path,
    session: Option<&str>,
    budget: Budget,
    max_bytes: u64,
) -> Result<Option<Outcome>, FileError> {
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Ok(Some(Outcome::unreadable(path, &err))),
    };
    if len <= max_bytes {
        return read_file(kind, path, session, budget);
    }
    match kind {
        AgentKind::Claude | AgentKind::Codex => {
            Ok(Some(read_jsonl_tail(kind, path, budget, len, max_bytes)))
        }
        AgentKind::Grok if path.extension().is_some_and(|e| e == "jsonl") => {
            Ok(Some(read_jsonl_tail(kind, path, budget, len, max_bytes)))
        }
        AgentKind::Grok if path.extension().is_some_and(|e| e == "json") => {
            Ok(Some(Outcome::unreadable(
                path,
                &format!("it is {len} bytes, over the {max_bytes}-byte limit of this read"),
            )))
        }
        AgentKind::Grok => read_file(kind, path, session, budget),
    }
}

/// The last `max_bytes` of a JSON-lines file of `len` bytes, from the first
/// whole line in that window.
fn read_jsonl_tail(
    kind: AgentKind,
    path: &Path,
    budget: Budget,
    len: u64,
    max_bytes: u64,
) -> Outcome {
    let Tail { reader, cut } = match open_tail(path, max_bytes) {
        Ok(tail) => tail,
        Err(err) => return Outcome::unreadable(path, &err),
    };
    let start = len.saturating_sub(max_bytes);
    let mut outcome = linearize(kind, reader, budget);
    if cut {
        outcome.records += 1;
        outcome.skipped += 1;
    }
    outcome.warnings.insert(
        0,
        format!(
            "the transcript is {len} bytes: only its last {max_bytes} were read (the first {start} bytes were not)"
        ),
    );
    outcome
}

/// The last `max_bytes` of a file, from its first whole line in that window.
pub(crate) struct Tail {
    pub(crate) reader: io::Take<BufReader<File>>,
    /// Whether the window began inside a line (which was passed over).
    pub(crate) cut: bool,
}

/// Opens the [`Tail`] of the file at `path` (the whole file when it is at
/// most `max_bytes`).
pub(crate) fn open_tail(path: &Path, max_bytes: u64) -> io::Result<Tail> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len <= max_bytes {
        return Ok(Tail {
            reader: BufReader::with_capacity(1 << 16, file).take(max_bytes),
            cut: false,
        });
    }
    // The byte before the window says whether it starts a line.
    file.seek(SeekFrom::Start(len - max_bytes - 1))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut before = [0u8; 1];
    reader.read_exact(&mut before)?;
    let cut = before[0] != b'\n';
    if cut {
        linear::discard_line(&mut reader)?;
    }
    Ok(Tail {
        reader: reader.take(max_bytes),
        cut,
    })
}

/// Linearizes a stream of JSON lines of `kind` (Grok: one AI SDK message per
/// line, as in its database).
pub fn linearize(kind: AgentKind, reader: impl BufRead, budget: Budget) -> Outcome {
    match kind {
        AgentKind::Claude => linear::read_lines(reader, &mut claude::Claude::default(), budget),
        AgentKind::Codex => linear::read_lines(reader, &mut codex::Codex::default(), budget),
        AgentKind::Grok => linear::read_lines(reader, &mut grok::Grok, budget),
    }
}

/// Streams a JSON-lines transcript file; `None` when it does not exist.
fn read_jsonl(kind: AgentKind, path: &Path, budget: Budget) -> Option<Outcome> {
    match File::open(path) {
        Ok(file) => Some(linearize(
            kind,
            BufReader::with_capacity(1 << 16, file),
            budget,
        )),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => Some(Outcome::unreadable(path, &err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_read_starts_at_a_whole_line_and_says_what_it_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let record = |text: &str| {
            serde_json::json!({"type": "user", "timestamp": "2026-12-01T10:00:00Z",
                "message": {"role": "user", "content": text}})
            .to_string()
        };
        let lines = [record("first"), record("second"), record("third")];
        let text = lines.join("\n") + "\n";
        std::fs::write(&path, &text).expect("write");
        let len = text.len() as u64;
        let last = lines[2].len() as u64 + 1;
        // (window, records, skipped, the user turn kept: consecutive user
        // records are one turn)
        let cases = [
            (len, 3, 0, vec!["first\n\nsecond\n\nthird"]),
            (last, 1, 0, vec!["third"]),
            (last + 3, 2, 1, vec!["third"]),
        ];
        for (window, records, skipped, texts) in cases {
            let o = read_file_tail(AgentKind::Claude, &path, None, Budget::UNLIMITED, window)
                .expect("a file")
                .expect("exists");
            assert_eq!(
                (o.records, o.skipped),
                (records, skipped),
                "{window}: {o:?}"
            );
            assert!(o.is_balanced(), "{o:?}");
            let kept: Vec<&str> = o.turns.iter().map(|t| t.text.as_str()).collect();
            assert_eq!(kept, texts, "{window}");
            let warned = o.warnings.iter().any(|w| w.contains("only its last"));
            assert_eq!(warned, window < len, "{window}: {:?}", o.warnings);
        }
        let missing = dir.path().join("none.jsonl");
        assert_eq!(
            read_file_tail(AgentKind::Codex, &missing, None, Budget::UNLIMITED, 10),
            Ok(None)
        );
    }

    #[test]
    fn agent_kind_parses_names_and_products() {
        let cases = [
            ("claude", Ok(AgentKind::Claude)),
            ("Claude-Code", Ok(AgentKind::Claude)),
            ("codex", Ok(AgentKind::Codex)),
            (" grok ", Ok(AgentKind::Grok)),
            ("grok-cli", Ok(AgentKind::Grok)),
            (
                "gemini",
                Err("unknown agent \"gemini\" (supported: claude, codex, grok)".to_owned()),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<AgentKind>(), want, "{input}");
        }
    }

    #[test]
    fn every_kind_round_trips() {
        for kind in AgentKind::ALL {
            assert_eq!(kind.name().parse::<AgentKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
    }

    #[test]
    fn session_ids_must_be_plain() {
        let long = "a".repeat(201);
        let cases = [
            ("0192-abcd_ef.1", true),
            ("", false),
            ("../etc", false),
            ("a/b", false),
            (".hidden", false),
            ("a b", false),
            (long.as_str(), false),
        ];
        for (id, ok) in cases {
            assert_eq!(check_session_id(id).is_ok(), ok, "{id}");
        }
    }

    #[test]
    fn locations_follow_overrides_then_home() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let home = Locations::from_vars(vars(&[("HOME", "/h")]));
        assert_eq!(home.claude.as_deref(), Some(Path::new("/h/.claude")));
        assert_eq!(home.codex.as_deref(), Some(Path::new("/h/.codex")));
        assert_eq!(home.grok.as_deref(), Some(Path::new("/h/.grok")));
        let overridden = Locations::from_vars(vars(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GROK_HOME", ""),
        ]));
        assert_eq!(overridden.claude.as_deref(), Some(Path::new("/c")));
        assert_eq!(overridden.codex.as_deref(), Some(Path::new("/x")));
        assert_eq!(overridden.grok.as_deref(), Some(Path::new("/h/.grok")));
        assert_eq!(Locations::from_vars(vars(&[])), Locations::default());
        let moved = home.with_root(AgentKind::Grok, PathBuf::from("/g"));
        assert_eq!(moved.root(AgentKind::Grok), Some(Path::new("/g")));
    }

    #[test]
    fn read_refuses_unsafe_session_ids() {
        let locations = Locations::default().with_root(AgentKind::Claude, PathBuf::from("/"));
        assert_eq!(
            read_with(
                &locations,
                AgentKind::Claude,
                "../x",
                Path::new("/"),
                Budget::default()
            ),
            None
        );
    }
}
