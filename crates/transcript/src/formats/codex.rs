//! Codex rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*-<session>.jsonl`
//! (or `archived_sessions/`). See the module docs of the crate for what is
//! kept and what is left out.

use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::formats::{ContextLimit, Format, Home};
use crate::json::{Content, Loose, Text, ToolInput};
use crate::linear::{Disposition, Linearizer, Note, Records, read_lines};
use crate::writes::{WriteCheck, is_write_tool};
use crate::{Budget, Mark, Outcome, Role};

/// Codex's row of the registry.
pub(crate) struct Transcripts;

impl Format for Transcripts {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn label(&self) -> &'static str {
        "Codex"
    }

    fn home(&self) -> Home {
        Home {
            var: "CODEX_HOME",
            dir: ".codex",
        }
    }

    fn linearize(&self, reader: &mut dyn BufRead, budget: Budget) -> Outcome {
        read_lines(reader, &mut Codex::default(), budget)
    }

    /// A rollout's name holds the session id; the working directory does
    /// not place it.
    fn locate(&self, root: &Path, session: &str, _cwd: &Path) -> Option<PathBuf> {
        locate(root, session)
    }

    fn write_check(&self) -> Option<WriteCheck> {
        Some(wrote)
    }

    /// 2,500 of its tokens, which it counts as a quarter of the bytes, so
    /// 10,000 bytes (measured with Codex 0.171.0 in the agents tier).
    fn context_limit(&self) -> Option<ContextLimit> {
        Some(ContextLimit::Bytes(10_000))
    }
}

/// A write shows as an `event_msg` record `item_completed` whose item is
/// an `McpToolCall` of the tool with `arguments.handoff_key` = the key,
/// `status` `completed` and a result that is not `isError`. (Its
/// `function_call_output` response item carries no reliable error mark: a
/// failed call's output is only shaped differently.) Codex answers in the
/// same record, so nothing is pending.
fn wrote(record: &Value, key: &str, _pending: &mut HashSet<String>) -> bool {
    let payload = &record["payload"];
    let item = &payload["item"];
    record["type"] == "event_msg"
        && payload["type"] == "item_completed"
        && item["type"] == "McpToolCall"
        && is_write_tool(item["tool"].as_str())
        && item["arguments"]["handoff_key"] == key
        && item["status"] == "completed"
        && item["result"]["isError"] != Value::Bool(true)
}

/// Response-item types that are not conversation: tool outputs, snapshots.
const IGNORED_ITEMS: [&str; 7] = [
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "tool_search_output",
    "image_generation_output",
    "ghost_snapshot",
    "compaction",
];

/// Top-level record types that are not conversation: session and turn
/// metadata, token accounting, the world state given to the model.
const IGNORED_RECORDS: [&str; 4] = [
    "session_meta",
    "turn_context",
    "token_usage_record",
    "world_state",
];

/// Event types passed over by name (they repeat response items or report
/// progress); any other event is counted as `event_msg`.
const IGNORED_EVENTS: [&str; 17] = [
    "token_count",
    "task_started",
    "task_complete",
    "turn_started",
    "turn_complete",
    "turn_aborted",
    "item_started",
    "item_completed",
    "agent_reasoning",
    "agent_reasoning_raw_content",
    "exec_command_begin",
    "exec_command_end",
    "patch_apply_end",
    "mcp_tool_call_end",
    "web_search_end",
    "context_compacted",
    "thread_settings_applied",
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
fn locate(root: &Path, session: &str) -> Option<PathBuf> {
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
    query: Text<'a>,
    #[serde(default, borrow)]
    revised_prompt: Text<'a>,
    #[serde(default, borrow)]
    author: Text<'a>,
    #[serde(default, borrow)]
    sender: Text<'a>,
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

/// Messages remembered from one kind of record while waiting for the other
/// to repeat them: more unmatched ones than this are forgotten, oldest
/// first.
const MAX_UNMATCHED: usize = 64;

/// Which kind of record a message was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Item,
    Event,
}

/// A message's identity for matching its repetition: role and text hash.
type Key = (Role, u64);

/// The messages read from response items and from event messages and not
/// yet seen in the other kind. Codex writes most messages twice (a
/// `response_item` for the model and an `event_msg` for the UI, in either
/// order) but some only once (a prompt only as an event); a message is
/// read where it is first seen and its repetition is passed over.
#[derive(Debug, Default)]
struct Sightings {
    items: VecDeque<Key>,
    events: VecDeque<Key>,
}

impl Sightings {
    /// Whether this is the first sighting of the message (read it), or the
    /// repetition of one the other kind of record carried (pass it over).
    fn first(&mut self, from: Carrier, role: Role, text: &str) -> bool {
        let key = (role, text_hash(text));
        let (mine, theirs) = match from {
            Carrier::Item => (&mut self.items, &mut self.events),
            Carrier::Event => (&mut self.events, &mut self.items),
        };
        if let Some(at) = theirs.iter().position(|k| *k == key) {
            // Older unmatched ones were read; their repetition will not come.
            theirs.drain(..=at);
            return false;
        }
        if mine.len() >= MAX_UNMATCHED {
            mine.pop_front();
        }
        mine.push_back(key);
        true
    }
}

/// The hash of a message text, its surrounding whitespace aside.
fn text_hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.trim().hash(&mut hasher);
    hasher.finish()
}

/// The Codex reader: each message is read once, from the record it is
/// first seen in ([`Sightings`]).
#[derive(Debug, Default)]
struct Codex {
    seen: Sightings,
    /// Messages read from an event and not (yet) repeated by a response
    /// item.
    from_events: usize,
}

impl Codex {
    fn item(&mut self, item: &Rec<'_>, out: &mut Linearizer) -> Disposition {
        let kind = item.kind.as_str();
        match kind {
            Some("message") => self.message(item, out),
            Some("agent_message") => agent_message(item, out),
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
                out.tool(
                    item.name.as_str().unwrap_or_default(),
                    input.as_ref().and_then(ToolInput::hint),
                );
                Disposition::Used
            }
            Some("custom_tool_call") => {
                let hint = item.input.as_str().map(patch_files);
                out.tool(item.name.as_str().unwrap_or_default(), hint.as_deref());
                Disposition::Used
            }
            Some("local_shell_call") => {
                let action = item.action.0.as_ref();
                out.tool("shell", action.and_then(|a| a.command.as_str()));
                Disposition::Used
            }
            Some("web_search_call") => {
                let action = item.action.0.as_ref();
                out.tool("web_search", action.and_then(|a| a.query.as_str()));
                Disposition::Used
            }
            Some("tool_search_call") => {
                let action = item.action.0.as_ref();
                let query = action.and_then(|a| a.query.as_str());
                out.tool("tool_search", query.or(item.query.as_str()));
                Disposition::Used
            }
            Some("image_generation_call") => {
                out.tool("image_generation", item.revised_prompt.as_str());
                Disposition::Used
            }
            Some(k) => match IGNORED_ITEMS.iter().find(|t| **t == k) {
                Some(name) => out.pass(name),
                None => out.unknown(kind),
            },
            None => out.unknown(kind),
        }
    }

    fn message(&mut self, item: &Rec<'_>, out: &mut Linearizer) -> Disposition {
        let role = match item.role.as_str() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("developer") => return out.pass("message/developer"),
            Some("system") => return out.pass("message/system"),
            other => return out.unknown(other.map(|r| format!("message/{r}")).as_deref()),
        };
        let parts = texts(&item.content, out);
        let said: Vec<&str> = parts
            .iter()
            .filter(|part| !part.image)
            .map(|part| part.text.as_ref())
            .filter(|t| !(role == Role::User && is_injected(t)))
            .filter(|t| !t.trim().is_empty())
            .collect();
        let key = said.join("\n\n");
        if !said.is_empty() && !self.seen.first(Carrier::Item, role, &key) {
            // It was read from its event, which came first.
            self.from_events = self.from_events.saturating_sub(1);
            return Disposition::Ignored;
        }
        let texts: Vec<&str> = parts
            .iter()
            .map(|part| part.text.as_ref())
            .filter(|t| !(role == Role::User && is_injected(t)))
            .filter(|t| !t.trim().is_empty())
            .collect();
        if texts.is_empty() {
            return Disposition::Ignored;
        }
        say(out, role, &texts.join("\n\n"));
        Disposition::Used
    }

    /// A user or agent event message: read when no response item carried
    /// it (yet).
    fn event(&mut self, event: &Rec<'_>, out: &mut Linearizer) -> Disposition {
        let kind = event.kind.as_str();
        let role = match kind {
            Some("user_message") => Role::User,
            Some("agent_message") => Role::Assistant,
            Some(k) => {
                return match IGNORED_EVENTS.iter().find(|t| **t == k) {
                    Some(name) => out.pass(name),
                    None => out.pass("event_msg"),
                };
            }
            None => return out.pass("event_msg"),
        };
        let Some(text) = event
            .message
            .as_str()
            .filter(|t| !t.trim().is_empty())
            .filter(|t| !(role == Role::User && is_injected(t)))
        else {
            return Disposition::Ignored;
        };
        if !self.seen.first(Carrier::Event, role, text) {
            return Disposition::Ignored;
        }
        self.from_events += 1;
        say(out, role, text);
        Disposition::Used
    }
}

/// Adds a message's text: a hook's prompt (`<hook_prompt …>…</hook_prompt>`,
/// a Stop hook's block fed back as a user message) is a marked turn;
/// anything else is the role speaking.
fn say(out: &mut Linearizer, role: Role, text: &str) {
    match hook_prompt(text) {
        Some(prompt) if role == Role::User => out.marked(role, Mark::Hook, None, prompt),
        _ => out.text(role, text),
    }
}

/// The text inside a `<hook_prompt …>` wrapper, when `text` is one.
fn hook_prompt(text: &str) -> Option<&str> {
    let rest = text.trim().strip_prefix("<hook_prompt")?;
    let start = rest.find('>')? + 1;
    let inner = &rest[start..];
    Some(inner.strip_suffix("</hook_prompt>").unwrap_or(inner).trim())
}

/// A message between agents: a marked turn naming its sender.
fn agent_message(item: &Rec<'_>, out: &mut Linearizer) -> Disposition {
    let parts = texts(&item.content, out);
    let mut text: Vec<&str> = parts.iter().map(|p| p.text.as_ref()).collect();
    text.extend(item.message.as_str());
    let text = text.join("\n\n");
    if text.trim().is_empty() {
        return Disposition::Ignored;
    }
    let agent = [&item.author, &item.sender, &item.name]
        .into_iter()
        .find_map(Text::as_str)
        .unwrap_or("agent");
    out.marked(Role::Assistant, Mark::Sidechain, Some(agent), &text);
    Disposition::Used
}

impl Records for Codex {
    fn record(&mut self, bytes: &[u8], out: &mut Linearizer) -> Disposition {
        let rec: Rec = match out.parse(bytes) {
            Ok(rec) => rec,
            Err(skipped) => return skipped,
        };
        let payload = rec.payload.0.as_deref();
        let kind = rec.kind.as_str();
        match (kind, payload) {
            (Some("response_item"), Some(item)) => self.item(item, out),
            (Some("event_msg"), Some(event)) => self.event(event, out),
            (Some("compacted"), Some(compacted)) => compaction(compacted, out),
            (Some(k), None) if ITEM_TYPES.contains(&k) => self.item(&rec, out),
            (None, None) if rec.record_type.0.is_some() || rec.id.0.is_some() => {
                out.pass("(legacy header)")
            }
            (Some(k), _) => match IGNORED_RECORDS.iter().find(|t| **t == k) {
                Some(name) => out.pass(name),
                None => out.unknown(kind),
            },
            _ => out.unknown(kind),
        }
    }

    fn finish(&mut self, out: &mut Linearizer) {
        if self.from_events > 0 {
            out.note_many(Note::EventOnly, self.from_events);
        }
    }
}

/// One text of a message's content; an image reads as `[image]`.
struct Part<'c> {
    text: Cow<'c, str>,
    image: bool,
}

/// The texts of a message's content items.
fn texts<'c>(content: &'c Content<'_>, out: &mut Linearizer) -> Vec<Part<'c>> {
    let text = |text: Cow<'c, str>| Part { text, image: false };
    match content {
        Content::Text(t) => vec![text(Cow::Borrowed(t.as_ref()))],
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|block| match &block.0 {
                Some(b) if b.kind.as_str().is_some_and(|k| k.ends_with("text")) => {
                    b.text.as_str().map(|t| text(Cow::Borrowed(t)))
                }
                Some(b) if b.kind.as_str().is_some_and(|k| k.ends_with("image")) => Some(Part {
                    text: Cow::Borrowed("[image]"),
                    image: true,
                }),
                _ => {
                    out.note(Note::UnknownBlock);
                    None
                }
            })
            .collect(),
        Content::Absent => Vec::new(),
    }
}

/// A `compacted` record: its summary is a marked turn.
fn compaction(compacted: &Rec<'_>, out: &mut Linearizer) -> Disposition {
    let Some(summary) = compacted.message.as_str().filter(|m| !m.trim().is_empty()) else {
        out.note(Note::Compaction);
        return Disposition::Ignored;
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
    use crate::{AgentKind, Budget, Outcome, linearize};

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
    fn hook_prompts() {
        let cases = [
            (
                "<hook_prompt hook_run_id=\"s-1\">Write the handoff.</hook_prompt>",
                Some("Write the handoff."),
            ),
            ("  <hook_prompt>\nx\n</hook_prompt>\n", Some("x")),
            ("<hook_prompt id=\"a\">unterminated", Some("unterminated")),
            ("<hook_prompt", None),
            ("see <hook_prompt>", None),
            ("plain", None),
        ];
        for (text, want) in cases {
            assert_eq!(hook_prompt(text), want, "{text:?}");
        }
    }

    #[test]
    fn each_message_is_read_where_it_is_first_seen() {
        use Carrier::{Event, Item};
        // (sightings, whether each is a first sighting)
        let cases: [&[(Carrier, Role, &str, bool)]; 5] = [
            &[
                (Item, Role::User, "q", true),
                (Event, Role::User, "q", false),
            ],
            &[
                (Event, Role::User, "q", true),
                (Item, Role::User, " q ", false),
            ],
            &[
                (Event, Role::User, "q", true),
                (Event, Role::User, "q", true),
            ],
            &[
                (Item, Role::User, "q", true),
                (Event, Role::Assistant, "q", true),
                (Event, Role::User, "q", false),
            ],
            &[
                (Item, Role::User, "a", true),
                (Item, Role::User, "b", true),
                (Event, Role::User, "b", false),
                (Event, Role::User, "a", true),
            ],
        ];
        for sightings in cases {
            let mut seen = Sightings::default();
            for (i, (from, role, text, first)) in sightings.iter().enumerate() {
                assert_eq!(seen.first(*from, *role, text), *first, "{sightings:?} #{i}");
            }
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
        assert_eq!((later.turns.len(), later.ignored), (2, 0));
        assert_eq!(later.turns[1].mark, Some(Mark::Summary));
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
