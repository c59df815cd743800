//! The registry of transcript formats: the one place that knows which
//! agents there are.
//!
//! # Why
//!
//! Every step that depends on who wrote a transcript (where its sessions
//! live, how its files are read, how its writes show, what its hooks keep)
//! asks the kind's [`Format`] instead of matching on [`AgentKind`]:
//! `transcript read`, the rescue, the hook and the writes scan all go
//! through [`AgentKind::format`]. So a new format is one module that
//! implements [`Format`] plus one row in the `registry!` below, which
//! declares the kind, its place in [`AgentKind::ALL`] and its format at
//! once (the compiler then holds every kind to a row).

mod claude;
mod codex;
mod copilot;
mod gemini;
mod grok;

use std::fmt;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::source::{FileError, read_jsonl, read_jsonl_tail};
use crate::writes::WriteCheck;
use crate::{Budget, Outcome};

/// What one agent's transcripts are, and how each step reads them. The
/// defaults are a JSON-lines format whose agent runs no hooks.
pub(crate) trait Format: Sync {
    /// The name used on the command line and in file names.
    fn name(&self) -> &'static str;

    /// The product name, for people and agents.
    fn label(&self) -> &'static str;

    /// Where the agent keeps its state: the variable that overrides it,
    /// else this directory under `$HOME`.
    fn home(&self) -> Home;

    /// Whether [`Home::var`] names a home directory, whose [`Home::dir`]
    /// is the state (Gemini CLI's `GEMINI_CLI_HOME`), rather than the
    /// state directory itself.
    fn var_is_home(&self) -> bool {
        false
    }

    /// Linearizes a stream of the format's JSON lines.
    fn linearize(&self, reader: &mut dyn BufRead, budget: Budget) -> Outcome;

    /// The JSON-lines file of `session` under the agent's `root` (`cwd`:
    /// the session's working directory); `None` when there is none.
    fn locate(&self, root: &Path, session: &str, cwd: &Path) -> Option<PathBuf>;

    /// Reads `session` where the agent keeps it: by default, its located
    /// JSON-lines file. `None` when there is no such transcript.
    fn read_session(
        &self,
        root: &Path,
        session: &str,
        cwd: &Path,
        budget: Budget,
    ) -> Option<Outcome> {
        read_jsonl(&self.locate(root, session, cwd)?, |r| {
            self.linearize(r, budget)
        })
    }

    /// Reads one transcript file (`session`: for a file that holds many,
    /// see [`Format::file_holds_sessions`]); by default, as JSON lines.
    /// `Ok(None)` when it does not exist.
    fn read_file(
        &self,
        path: &Path,
        _session: Option<&str>,
        budget: Budget,
    ) -> Result<Option<Outcome>, FileError> {
        Ok(read_jsonl(path, |r| self.linearize(r, budget)))
    }

    /// Reads the end of a file of `len` bytes, longer than `max_bytes`:
    /// by default its last `max_bytes`, from a whole line.
    fn read_tail(
        &self,
        path: &Path,
        _session: Option<&str>,
        budget: Budget,
        len: u64,
        max_bytes: u64,
    ) -> Result<Option<Outcome>, FileError> {
        Ok(Some(read_jsonl_tail(path, len, max_bytes, |r| {
            self.linearize(r, budget)
        })))
    }

    /// Whether the file at `path` holds many sessions, so that reading it
    /// takes a session id.
    fn file_holds_sessions(&self, _path: &Path) -> bool {
        false
    }

    /// How the transcript shows a successful `write_handoff` (the writes
    /// scan); `None`: the agent runs no hooks, so its transcript is never
    /// asked.
    fn write_check(&self) -> Option<WriteCheck> {
        None
    }

    /// The most of a hook's `additionalContext` the agent keeps as it is;
    /// `None`: no known limit.
    fn context_limit(&self) -> Option<ContextLimit> {
        None
    }

    /// Whether a hook's notice at `event` (its `hook_event_name`) is the
    /// plain line, because the agent does not show a `systemMessage` there.
    fn plain_notice(&self, _event: &str) -> bool {
        false
    }

    /// Whether the transcript at `path` already holds the start of the
    /// hook call whose payload has `timestamp` (milliseconds), so that
    /// everything before that call is on disk. By default `true`: the
    /// agent writes its transcript before it runs a hook.
    fn holds_hook_start(&self, _path: &Path, _timestamp: i64) -> bool {
        true
    }

    /// A hook's answer at `event` that adds `context` to the conversation:
    /// by default Claude Code's shape, `hookSpecificOutput` naming the
    /// event.
    fn context_answer(&self, event: &str, context: &str) -> Value {
        json!({"hookSpecificOutput": {
            "hookEventName": event,
            "additionalContext": context,
        }})
    }

    /// The agent's own name of the hook event Claude Code calls `event`
    /// (`SessionStart`, `Stop`, `PreCompact`, `SessionEnd`): the key of its
    /// settings' `hooks` and the `hook_event_name` it sends. By default the
    /// same name.
    fn hook_event(&self, event: &'static str) -> &'static str {
        event
    }
}

/// Where an agent keeps its state (see [`Format::home`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Home {
    /// The variable that names the directory (`CLAUDE_CONFIG_DIR`).
    pub(crate) var: &'static str,
    /// The directory under `$HOME` otherwise (`.claude`).
    pub(crate) dir: &'static str,
}

/// Declares [`AgentKind`], [`AgentKind::ALL`] and [`AgentKind::format`]
/// from one row per format: `Kind => module::Format,`.
macro_rules! registry {
    ($($kind:ident => $format:path,)+) => {
        /// The agents whose transcripts can be read: one per row of the
        /// registry, each with its [`Format`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum AgentKind {
            $($kind,)+
        }

        impl AgentKind {
            /// Every kind, in the registry's order.
            pub const ALL: [AgentKind; [$(stringify!($kind)),+].len()] = [$(AgentKind::$kind,)+];

            /// The kind's row of the registry.
            pub(crate) fn format(self) -> &'static dyn Format {
                match self {
                    $(AgentKind::$kind => &$format,)+
                }
            }
        }
    };
}

registry! {
    Claude => claude::Transcripts,
    Codex => codex::Transcripts,
    Copilot => copilot::Transcripts,
    Grok => grok::Transcripts,
    Gemini => gemini::Transcripts,
}

impl AgentKind {
    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        self.format().name()
    }

    /// The product name, for people and agents.
    pub fn label(self) -> &'static str {
        self.format().label()
    }

    /// The most of a hook's `additionalContext` the agent keeps as it is;
    /// `None`: no known limit.
    pub fn context_limit(self) -> Option<ContextLimit> {
        self.format().context_limit()
    }

    /// Whether a hook's notice at `event` (its `hook_event_name`) is the
    /// plain line rather than a `systemMessage`, which the agent does not
    /// show there.
    pub fn plain_notice(self, event: &str) -> bool {
        self.format().plain_notice(event)
    }

    /// A hook's answer at `event` (its `hook_event_name`) that adds
    /// `context` to the conversation, in the shape the agent reads.
    pub fn context_answer(self, event: &str, context: &str) -> Value {
        self.format().context_answer(event, context)
    }

    /// Whether the transcript at `path` already holds the start of the
    /// hook call whose payload has `timestamp` (milliseconds): `true` for
    /// an agent that writes its transcript before it runs a hook.
    pub fn holds_hook_start(self, path: &Path, timestamp: i64) -> bool {
        self.format().holds_hook_start(path, timestamp)
    }

    /// The agent's own name of the hook event Claude Code calls `event`
    /// (see [`Format::hook_event`]).
    pub fn hook_event(self, event: &'static str) -> &'static str {
        self.format().hook_event(event)
    }

    /// Whether a transcript file at `path` holds many sessions (a
    /// database), so that reading it takes a session id.
    pub fn file_holds_sessions(self, path: &Path) -> bool {
        self.format().file_holds_sessions(path)
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

/// The most of `additionalContext` an agent keeps as it is. Past it, each
/// agent hides part of the text behind a file of its own: Claude Code
/// replaces the rest by the file and a preview, Codex cuts the middle out
/// ("… N tokens truncated …") and names the file. Either way the key and
/// the way back to the whole handoff could be lost, so the hook cuts first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextLimit {
    /// Characters as JavaScript counts them (UTF-16 code units).
    Utf16(usize),
    /// UTF-8 bytes.
    Bytes(usize),
}

impl ContextLimit {
    /// The most `text` may be.
    pub fn most(self) -> usize {
        match self {
            ContextLimit::Utf16(n) | ContextLimit::Bytes(n) => n,
        }
    }

    /// The size of `text` in this limit's unit.
    pub fn size(self, text: &str) -> usize {
        text.chars().map(|c| self.size_of(c)).sum()
    }

    /// The size of one character in this limit's unit.
    pub fn size_of(self, c: char) -> usize {
        match self {
            ContextLimit::Utf16(_) => c.len_utf16(),
            ContextLimit::Bytes(_) => c.len_utf8(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_kind_parses_names_and_products() {
        let cases = [
            ("claude", Ok(AgentKind::Claude)),
            ("Claude-Code", Ok(AgentKind::Claude)),
            ("codex", Ok(AgentKind::Codex)),
            (" grok ", Ok(AgentKind::Grok)),
            ("grok-cli", Ok(AgentKind::Grok)),
            ("Copilot", Ok(AgentKind::Copilot)),
            ("copilot-cli", Ok(AgentKind::Copilot)),
            ("gemini", Ok(AgentKind::Gemini)),
            ("Gemini-CLI", Ok(AgentKind::Gemini)),
        ];
        for (input, want) in cases {
            assert_eq!(input.parse::<AgentKind>(), want, "{input}");
        }
        let unknown = "cursor".parse::<AgentKind>().expect_err("not a kind");
        let names: Vec<&str> = AgentKind::ALL.into_iter().map(AgentKind::name).collect();
        assert_eq!(
            unknown,
            format!("unknown agent \"cursor\" (supported: {})", names.join(", "))
        );
        for name in ["claude", "codex", "copilot", "gemini", "grok"] {
            assert!(unknown.contains(name), "{unknown}");
        }
    }

    #[test]
    fn every_kind_round_trips() {
        for kind in AgentKind::ALL {
            assert_eq!(kind.name().parse::<AgentKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
            let json = serde_json::to_string(&kind).expect("serializes");
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
    }

    #[test]
    fn each_agent_hooks_as_measured() {
        // (kind, the context it keeps, a plain notice at PreCompact, at
        // Stop, whether its writes are scanned)
        let cases = [
            (
                AgentKind::Claude,
                Some(ContextLimit::Utf16(10_000)),
                true,
                false,
                true,
            ),
            (
                AgentKind::Codex,
                Some(ContextLimit::Bytes(10_000)),
                false,
                false,
                true,
            ),
            (AgentKind::Copilot, None, false, false, true),
            (AgentKind::Grok, None, false, false, false),
            (AgentKind::Gemini, None, false, false, true),
        ];
        for (kind, limit, pre_compact, stop, scanned) in cases {
            assert_eq!(kind.context_limit(), limit, "{kind}");
            assert_eq!(kind.plain_notice("PreCompact"), pre_compact, "{kind}");
            assert_eq!(kind.plain_notice("SessionEnd"), pre_compact, "{kind}");
            assert_eq!(kind.plain_notice("Stop"), stop, "{kind}");
            assert_eq!(kind.format().write_check().is_some(), scanned, "{kind}");
        }
    }

    #[test]
    fn each_agent_names_its_hook_events() {
        let claude = ["SessionStart", "Stop", "PreCompact", "SessionEnd"];
        let cases = [
            (AgentKind::Claude, claude),
            (AgentKind::Codex, claude),
            // Copilot CLI's camelCase wiring sends no `hook_event_name`.
            (AgentKind::Copilot, claude),
            (AgentKind::Grok, claude),
            (
                AgentKind::Gemini,
                ["SessionStart", "AfterAgent", "PreCompress", "SessionEnd"],
            ),
        ];
        for (kind, names) in cases {
            for (event, name) in claude.into_iter().zip(names) {
                assert_eq!(kind.hook_event(event), name, "{kind} {event}");
            }
        }
    }
}
