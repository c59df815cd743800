//! Codex rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*-<session>.jsonl`
//! (or `archived_sessions/`). See the module docs of [`super`] for what is
//! kept and what is left out.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Role;
use super::budget::{Budget, Tail};
use super::json::{Content, Loose, Text, ToolInput};
use super::linear::{Disposition, Format, Linearizer, Note, tool_summary};

/// Response-item types that are not conversation: tool outputs, snapshots.
const IGNORED_ITEMS: [&str; 5] = [
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "ghost_snapshot",
    "compaction",
];

/// Response-item types, which the format before the `payload` envelope
/// wrote at the top level.
const ITEM_TYPES: [&str; 8] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
];

/// Starts of user-role texts that Codex injects: environment context,
/// AGENTS.md (current and legacy form), skills, interruption notices.
const INJECTED_PREFIXES: [&str; 5] = [
    "<environment_context>",
    "# agents.md instructions for ",
    "<user_instructions>",
    "<skill",
    "<turn_aborted>",
];

/// Directory levels below `sessions/` (YYYY/MM/DD).
const SEARCH_DEPTH: usize = 3;

/// The rollout file of `session`: under `sessions/`, newest first, then
/// under `archived_sessions/`.
pub(crate) fn locate(root: &Path, session: &str) -> Option<PathBuf> {
    ["sessions", "archived_sessions"]
        .into_iter()
        .find_map(|dir| find_rollout(&root.join(dir), session, SEARCH_DEPTH))
}

fn find_rollout(dir: &Path, session: &str, depth: usize) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.file_name()));
    entries.into_iter().find_map(|entry| {
        let path = entry.path();
        if is_rollout_of(&entry.file_name().to_string_lossy(), session) && path.is_file() {
            Some(path)
        } else if depth > 0 && path.is_dir() {
            find_rollout(&path, session, depth - 1)
        } else {
            None
        }
    })
}

/// Whether `name` is `rollout-<YYYY-MM-DDThh-mm-ss>-<session>.jsonl`.
fn is_rollout_of(name: &str, session: &str) -> bool {
    const TIMESTAMP_LEN: usize = "2025-01-02T03-04-05".len();
    name.strip_prefix("rollout-")
        .and_then(|rest| rest.strip_suffix(".jsonl"))
        .and_then(|rest| rest.get(TIMESTAMP_LEN..))
        .and_then(|rest| rest.strip_prefix('-'))
        == Some(session)
}

/// A rollout line, and (the same shape) its payload.
#[derive(Debug, Default, Deserialize)]
struct Rec<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    payload: Loose<Box<Rec<'a>>>,
    #[serde(default, borrow)]
    role: Text<'a>,
    #[serde(default, borrow)]
    content: Content<'a>,
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    arguments: Text<'a>,
    #[serde(default, borrow)]
    input: Text<'a>,
    #[serde(default, borrow)]
    encrypted_content: Text<'a>,
    #[serde(default, borrow)]
    message: Text<'a>,
    #[serde(default, borrow)]
    action: Loose<Action<'a>>,
    #[serde(default, borrow)]
    record_type: Text<'a>,
    #[serde(default, borrow)]
    id: Text<'a>,
}

/// The action of a `local_shell_call` or `web_search_call`.
#[derive(Debug, Default, Deserialize)]
struct Action<'a> {
    #[serde(default, borrow)]
    command: Text<'a>,
    #[serde(default, borrow)]
    query: Text<'a>,
}

/// The Codex reader. User and agent event messages are gathered on the
/// side, and used only if the file has no response-item message.
pub(crate) struct Codex {
    events: Tail,
    event_records: usize,
    response_messages: usize,
}

impl Codex {
    pub(crate) fn new(budget: Budget) -> Self {
        Codex {
            events: Tail::new(budget),
            event_records: 0,
            response_messages: 0,
        }
    }

    fn item(&mut self, item: &Rec<'_>, out: &mut Linearizer) -> Disposition {
        let kind = item.kind.as_str();
        match kind {
            Some("message") => {
                self.response_messages += 1;
                message(item, out)
            }
            Some("reasoning") => {
                out.note(if item.encrypted_content.0.is_some() {
                    Note::EncryptedReasoning
                } else {
                    Note::Reasoning
                });
                Disposition::Ignored
            }
            Some("function_call") => {
                let input = item
                    .arguments
                    .as_str()
                    .and_then(|args| serde_json::from_str::<ToolInput>(args).ok());
                self.tool(
                    item.name.as_str().unwrap_or_default(),
                    input.as_ref().and_then(ToolInput::hint),
                    out,
                )
            }
            Some("custom_tool_call") => {
                let hint = item.input.as_str().map(patch_files);
                self.tool(item.name.as_str().unwrap_or_default(), hint.as_deref(), out)
            }
            Some("local_shell_call") => {
                let action = item.action.0.as_ref();
                self.tool("shell", action.and_then(|a| a.command.as_str()), out)
            }
            Some("web_search_call") => {
                let action = item.action.0.as_ref();
                self.tool("web_search", action.and_then(|a| a.query.as_str()), out)
            }
            Some(k) if IGNORED_ITEMS.contains(&k) => Disposition::Ignored,
            _ => out.unknown(kind),
        }
    }

    /// A tool call, also put in place among the event messages: a file
    /// read from its events still lists the calls, in order.
    fn tool(&mut self, name: &str, hint: Option<&str>, out: &mut Linearizer) -> Disposition {
        out.tool(name, hint);
        self.events.add_tool(tool_summary(name, hint));
        Disposition::Used
    }

    fn event(&mut self, event: &Rec<'_>) -> Disposition {
        let role = match event.kind.as_str() {
            Some("user_message") => Role::User,
            Some("agent_message") => Role::Assistant,
            _ => return Disposition::Ignored,
        };
        if let Some(text) = event.message.as_str().filter(|t| !is_injected(t)) {
            self.events.add_text(role, text);
            self.event_records += 1;
        }
        Disposition::Ignored
    }
}

impl Format for Codex {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        let rec: Rec = match out.parse(bytes) {
            Ok(rec) => rec,
            Err(skipped) => return skipped,
        };
        let payload = rec.payload.0.as_deref();
        let kind = rec.kind.as_str();
        match (kind, payload) {
            (Some("response_item"), Some(item)) => self.item(item, out),
            (Some("event_msg"), Some(event)) => self.event(event),
            (Some("compacted"), Some(compacted)) => compaction(compacted, out),
            (Some("session_meta" | "turn_context"), _) => Disposition::Ignored,
            (Some(k), None) if ITEM_TYPES.contains(&k) => self.item(&rec, out),
            (None, None) if rec.record_type.0.is_some() || rec.id.0.is_some() => {
                Disposition::Ignored
            }
            _ => out.unknown(kind),
        }
    }

    fn finish(&mut self, out: &mut Linearizer) {
        if self.response_messages == 0 && self.event_records > 0 {
            let events = std::mem::replace(&mut self.events, Tail::new(Budget::UNLIMITED));
            out.note_many(Note::EventFallback, self.event_records);
            out.adopt(events, self.event_records);
        }
    }
}

fn message(item: &Rec<'_>, out: &mut Linearizer) -> Disposition {
    let role = match item.role.as_str() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("developer" | "system") => return Disposition::Ignored,
        other => return out.unknown(other.map(|r| format!("message/{r}")).as_deref()),
    };
    let texts = texts(&item.content, out);
    let texts: Vec<&str> = texts
        .iter()
        .map(|t| t.as_ref())
        .filter(|t| !(role == Role::User && is_injected(t)))
        .filter(|t| !t.trim().is_empty())
        .collect();
    if texts.is_empty() {
        return Disposition::Ignored;
    }
    out.text(role, &texts.join("\n\n"));
    Disposition::Used
}

/// The texts of a message's content items; images read as `[image]`.
fn texts<'c>(content: &'c Content<'_>, out: &mut Linearizer) -> Vec<Cow<'c, str>> {
    match content {
        Content::Text(text) => vec![Cow::Borrowed(text.as_ref())],
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|block| match &block.0 {
                Some(b) if b.kind.as_str().is_some_and(|k| k.ends_with("text")) => {
                    b.text.as_str().map(Cow::Borrowed)
                }
                Some(b) if b.kind.as_str().is_some_and(|k| k.ends_with("image")) => {
                    Some(Cow::Borrowed("[image]"))
                }
                _ => {
                    out.note(Note::UnknownBlock);
                    None
                }
            })
            .collect(),
        Content::Absent => Vec::new(),
    }
}

fn compaction(compacted: &Rec<'_>, out: &mut Linearizer) -> Disposition {
    match compacted.message.as_str().filter(|m| !m.trim().is_empty()) {
        Some(summary) if out.turns_seen() == 0 => {
            out.note(Note::OpensWithSummary);
            out.standalone(Role::User, &format!("[compaction summary] {summary}"));
            Disposition::Used
        }
        _ => {
            out.note(Note::Compaction);
            Disposition::Ignored
        }
    }
}

/// Whether a user-role text was injected by Codex rather than typed.
fn is_injected(text: &str) -> bool {
    let start = text.trim_start();
    INJECTED_PREFIXES.iter().any(|prefix| {
        start
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    })
}

/// What an `apply_patch` input touches ("a.rs, b.rs"), or its first line.
fn patch_files(input: &str) -> String {
    const MARKERS: [&str; 3] = ["*** Add File: ", "*** Update File: ", "*** Delete File: "];
    let files: Vec<&str> = input
        .lines()
        .filter_map(|line| MARKERS.iter().find_map(|m| line.strip_prefix(m)))
        .map(str::trim)
        .collect();
    if files.is_empty() {
        input
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or_default()
            .to_owned()
    } else {
        files.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentKind, Outcome, linearize};

    fn read(lines: &[&str]) -> Outcome {
        linearize(
            AgentKind::Codex,
            lines.join("\n").as_bytes(),
            Budget::UNLIMITED,
        )
    }

    #[test]
    fn rollout_names() {
        let id = "5f0c2a8e-0000-4000-8000-000000000001";
        let cases = [
            (format!("rollout-2025-05-01T10-00-00-{id}.jsonl"), id, true),
            (
                format!("rollout-2025-05-01T10-00-00-{id}.jsonl"),
                "000000000001",
                false,
            ),
            (format!("rollout-2025-05-01T10-00-00-{id}.json"), id, false),
            (format!("other-2025-05-01T10-00-00-{id}.jsonl"), id, false),
            ("rollout-short.jsonl".to_owned(), id, false),
        ];
        for (name, session, want) in cases {
            assert_eq!(is_rollout_of(&name, session), want, "{name} {session}");
        }
    }

    #[test]
    fn injected_prefixes() {
        let cases = [
            ("<environment_context>\n<cwd>/x</cwd>", true),
            ("  # AGENTS.md instructions for /x\n\n<INSTRUCTIONS>", true),
            ("<user_instructions>be nice</user_instructions>", true),
            ("<skill>\n<name>x</name>", true),
            ("please fix <environment_context>", false),
            ("é", false),
            ("", false),
        ];
        for (text, want) in cases {
            assert_eq!(is_injected(text), want, "{text:?}");
        }
    }

    #[test]
    fn patch_files_cases() {
        let cases = [
            (
                "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.rs\n*** End Patch",
                "a.txt, b.rs",
            ),
            ("*** Begin Patch\n*** Delete File: c\n*** End Patch", "c"),
            ("\n  just text\nmore", "just text"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(patch_files(input), want);
        }
    }

    #[test]
    fn tool_items_become_summaries() {
        let o = read(&[
            r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"ls\"]}"}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call","name":"f","arguments":"not json"}}"#,
            r#"{"type":"response_item","payload":{"type":"local_shell_call","action":{"type":"exec","command":["git","diff"]}}}"#,
            r#"{"type":"response_item","payload":{"type":"web_search_call","action":{"type":"search","query":"rust"}}}"#,
        ]);
        assert_eq!(o.turns.len(), 1);
        assert_eq!(
            o.turns[0].tools,
            [
                "[tool] shell: bash -lc ls",
                "[tool] f",
                "[tool] shell: git diff",
                "[tool] web_search: rust"
            ]
        );
    }

    #[test]
    fn the_legacy_format_without_payload_is_read() {
        let o = read(&[
            r#"{"id":"x","timestamp":"t","instructions":null}"#,
            r#"{"record_type":"state"}"#,
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}"#,
            r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"yo"}]}"#,
        ]);
        assert_eq!((o.used, o.ignored, o.skipped), (2, 2, 0));
        assert_eq!(o.turns.len(), 2);
    }

    #[test]
    fn a_leading_compaction_summary_is_kept() {
        let compacted =
            r#"{"type":"compacted","payload":{"message":"S","replacement_history":[]}}"#;
        let user =
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":"u"}}"#;
        assert_eq!(
            read(&[compacted, user]).turns[0].text,
            "[compaction summary] S"
        );
        let later = read(&[user, compacted]);
        assert_eq!((later.turns.len(), later.ignored), (1, 1));
    }

    #[test]
    fn function_calls_are_listed_without_message_items() {
        let call = r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}"}}"#;
        let output =
            r#"{"type":"response_item","payload":{"type":"function_call_output","output":"a"}}"#;
        let asked = r#"{"type":"event_msg","payload":{"type":"user_message","message":"q"}}"#;
        let answered = r#"{"type":"event_msg","payload":{"type":"agent_message","message":"a"}}"#;
        let user =
            r#"{"type":"response_item","payload":{"type":"message","role":"user","content":"q"}}"#;
        let reply = r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":"a"}}"#;
        let tool = "[tool] shell: ls";
        // The lines, and the turns (role, text, tools) they read as.
        type Case<'a> = (&'a [&'a str], &'a [(Role, &'a str, &'a [&'a str])]);
        let cases: [Case<'_>; 4] = [
            (&[call, output], &[(Role::Assistant, "", &[tool])]),
            (
                &[asked, call, output, answered],
                &[(Role::User, "q", &[]), (Role::Assistant, "a", &[tool])],
            ),
            (
                &[asked, call, call],
                &[(Role::User, "q", &[]), (Role::Assistant, "", &[tool, tool])],
            ),
            (
                &[user, asked, call, output, reply, answered],
                &[(Role::User, "q", &[]), (Role::Assistant, "a", &[tool])],
            ),
        ];
        for (lines, want) in cases {
            let o = read(lines);
            let got: Vec<(Role, &str, Vec<&str>)> = o
                .turns
                .iter()
                .map(|t| {
                    (
                        t.role,
                        t.text.as_str(),
                        t.tools.iter().map(String::as_str).collect(),
                    )
                })
                .collect();
            let want: Vec<(Role, &str, Vec<&str>)> = want
                .iter()
                .map(|(role, text, tools)| (*role, *text, tools.to_vec()))
                .collect();
            assert_eq!(got, want, "{lines:?}");
        }
    }
}
