//! `handoff hook <event>` and `handoff rescue`: continuity that does not
//! rest on the agent remembering to call `write_handoff`.
//!
//! Claude Code, Codex, Gemini CLI and Copilot CLI run hooks at lifecycle
//! events, with the event as JSON on stdin and the answer as JSON on stdout
//! (docs/agents.md cites their references). The events below carry Claude
//! Code's names; an agent that names them otherwise (Gemini CLI's
//! `AfterAgent` for `stop`) is answered under its own names
//! ([`Event::agent_event_name`]). The key is `CONVERSATION_OBJECT_KEY`,
//! else `--key`; the connection is the bridge or the local identity
//! ([`link`]).
//!
//! - `session-start`: the handoff of the key, as
//!   `hookSpecificOutput.additionalContext`, fenced as a prior summary with
//!   its author, revision and time, cut to what the agent keeps
//!   ([`capped_context`]); nothing when there is none.
//! - `stop`: unless the key has a *fresh* handoff, `{"decision":"block"}`
//!   with a reason asking for a compact `write_handoff` in the skill's
//!   sections. Never when `stop_hook_active` is true (the agent is already
//!   continuing because of a stop hook): then, still without a fresh
//!   handoff, it writes a rescue and lets the agent stop (Codex's
//!   session-end hook has a budget of a few seconds, so this is where its
//!   sessions are rescued surely).
//! - `pre-compact`, `session-end`: without a fresh handoff, a rescue.
//!
//! **Fresh**, "written in this session": an agent-written handoff (not a
//! rescue) whose key the session's own transcript shows written
//! successfully ([`writes::file_wrote_handoff`], either agent: exact, and
//! an identical rewrite, answered `unchanged` with the old `updated_at`,
//! counts), or whose `updated_at` is at or after the first record of the
//! transcript, compared at the precision both have ([`plan`]; the
//! transcript is read only when the time does not already say fresh). When
//! the session's start is unknown (no transcript, no timestamp in it), any
//! agent-written handoff counts as fresh: a rescue never replaces what an
//! agent wrote on a guess. The same rule decides whether a rescue may write.
//!
//! **Never fails the session.** Whatever goes wrong (handoff unreachable,
//! bad input, no key), a hook says so in one line (stderr, and on stdout
//! where the agent shows it: [`notice_line`]), exits 0, and is done within
//! `--timeout` (10 s by default; connecting to the bridge is bounded at 3 s,
//! the apiserver calls as in the stdio bridge). Its reads are bounded too:
//! at most 16 MiB of stdin, a transcript's first lines for the session's
//! start (8 MiB, lines over 1 MiB passed over) and its last 64 MiB for
//! the session's writes and a rescue; every blocking read runs where the
//! deadline can abandon it ([`run_hook`]), so a FIFO nobody writes or a
//! line with no end cannot hold the agent.
//!
//! **Rescue marking.** A rescued body starts with
//! [`rescue::RESCUE_MARK`] (so `get_handoff` shows it, and `list_handoffs`
//! in its preview) and its `kind` ends with `rescued` (the Kind column of
//! `kubectl get handoffs`, and the `kind` label): both are contract fields,
//! so the tools' results keep their shape and every writer path (bridge or
//! kubeconfig) carries the mark.

mod context;
pub mod link;
mod session;
mod write;

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Args, ValueEnum};
use serde::Deserialize;
use serde_json::{Value, json};

use handoff_core::time::parse_duration;
use handoff_transcript::cli::SourceArgs;
use handoff_transcript::rescue::{self, DEFAULT_MAX_TOKENS, MIN_MAX_TOKENS, Source};
use handoff_transcript::{AgentKind, Budget, read_file_tail, writes};
use link::Link;
use write::write_rescue;

pub use context::{capped_context, session_context};
pub use write::{Plan, get, plan, run_rescue};

/// The key variable (the contract's).
pub const KEY_VAR: &str = "CONVERSATION_OBJECT_KEY";

/// A hook's lifecycle event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Event {
    SessionStart,
    Stop,
    PreCompact,
    SessionEnd,
}

impl Event {
    /// The agents' name of the event (`hook_event_name`).
    pub fn hook_event_name(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::Stop => "Stop",
            Event::PreCompact => "PreCompact",
            Event::SessionEnd => "SessionEnd",
        }
    }

    /// `agent`'s own name of the event (Gemini CLI's `AfterAgent` for
    /// `Stop`): what its settings and its `hook_event_name` say.
    pub fn agent_event_name(self, agent: AgentKind) -> &'static str {
        agent.hook_event(self.hook_event_name())
    }
}

/// Where handoffs are reached.
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// The namespace, when acting with the kubeconfig (default: its
    /// context's, or the pod's).
    #[arg(short = 'n', long, env = "HANDOFF_NAMESPACE")]
    pub namespace: Option<String>,
    /// The agent profile whose tools are called.
    #[arg(long, env = "HANDOFF_PROFILE", default_value = "implement")]
    pub profile: String,
}

/// What a rescue writes besides the body.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// The project (default: the existing handoff's).
    #[arg(long, env = "HANDOFF_PROJECT")]
    pub project: Option<String>,
    /// The repository (default: the existing handoff's).
    #[arg(long, env = "HANDOFF_REPO")]
    pub repo: Option<String>,
    /// The kind of work; `.rescued` is appended (default: the existing
    /// handoff's).
    #[arg(long, env = "HANDOFF_KIND")]
    pub kind: Option<String>,
    /// The rescued body's budget, in approximate tokens (characters / 4).
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS, value_parser = max_tokens)]
    pub max_tokens: usize,
}

/// `handoff hook <event>`.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The lifecycle event.
    #[arg(value_enum)]
    pub event: Event,
    /// Whose hook this is, for reading its transcript and naming its
    /// events: claude, codex, copilot or gemini.
    #[arg(long, value_name = "AGENT", default_value = "claude")]
    pub agent: AgentKind,
    /// The continuation key, when CONVERSATION_OBJECT_KEY is not set.
    #[arg(long)]
    pub key: Option<String>,
    /// The hook's whole time, after which it gives up (and the agent goes on).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub target: Target,
}

/// `handoff rescue`.
#[derive(Debug, Args)]
pub struct RescueArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The continuation key.
    #[arg(long, env = KEY_VAR)]
    pub key: String,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub target: Target,
}

fn max_tokens(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("expected a number of tokens, got {text:?}"))?;
    if n < MIN_MAX_TOKENS {
        return Err(format!(
            "{n} is below {MIN_MAX_TOKENS}, the room the header and sections need"
        ));
    }
    Ok(n)
}

/// What a hook reads on stdin: the documented fields it uses (the others,
/// `model`, `source`, `turn_id`, …, are ignored; all are optional, so a
/// field an agent drops is not an error), in Claude Code's and Codex's
/// snake_case or Copilot CLI's camelCase. Every SessionStart source
/// (startup, resume, clear, compact) gets the handoff.
#[derive(Debug, Default, Deserialize)]
pub struct Payload {
    /// Copilot CLI: `sessionId`, which places its transcript (see
    /// [`Payload::transcript`]).
    #[serde(alias = "sessionId")]
    pub session_id: Option<String>,
    #[serde(alias = "transcriptPath")]
    pub transcript_path: Option<PathBuf>,
    /// The session's working directory (it places Claude Code's sessions).
    pub cwd: Option<PathBuf>,
    /// When the agent called the hook (Copilot CLI: milliseconds).
    pub timestamp: Option<Value>,
    pub hook_event_name: Option<String>,
    /// Stop: the agent already continues because of a stop hook.
    #[serde(default)]
    pub stop_hook_active: bool,
    /// PreCompact: manual, auto.
    pub trigger: Option<String>,
    /// SessionEnd (Claude Code): why the session ended.
    pub reason: Option<String>,
}

/// The stored handoff, as `get_handoff` and `write_handoff` return it.
#[derive(Debug, Clone, Deserialize)]
pub struct Stored {
    pub handoff_key: String,
    pub project: String,
    pub repo: Option<String>,
    pub kind: Option<String>,
    pub body: String,
    pub created_by: Option<String>,
    pub updated_at: Option<String>,
    pub revision: Option<i64>,
}

/// Pure: the reason of a stop block.
pub fn stop_reason(key: &str) -> String {
    format!(
        "No handoff was written for `{key}` in this session. Before you stop, call write_handoff \
         with handoff_key `{key}`, your project (and repo, kind when known) and a COMPACT markdown \
         body with the skill's sections: ## State, ## Done, ## Next, ## Open questions, ## Refs \
         (a summary, not a log). Then stop."
    )
}

/// Pure: the stdout line that carries a notice to the agent's user. A
/// `systemMessage` where the agent shows one; where it does not (its
/// format's `plain_notice`: Claude Code at PreCompact and SessionEnd, whose
/// raw stdout it echoes after `/compact` or logs), the plain line itself.
pub fn notice_line(agent: AgentKind, event: Event, message: &str) -> String {
    if agent.plain_notice(event.agent_event_name(agent)) {
        message.to_owned()
    } else {
        json!({"systemMessage": message}).to_string()
    }
}

/// The most a hook reads of its stdin (an event's JSON is a few KiB).
const MAX_INPUT_BYTES: u64 = 16 << 20;
/// The most a hook reads of a transcript: its end
/// ([`handoff_transcript::read_file_tail`]), whatever the file holds.
pub const MAX_TRANSCRIPT_BYTES: u64 = 64 << 20;

/// Runs `handoff hook <event>` (see the module docs): prints the agent's
/// JSON, or a notice, or nothing, within `--timeout`, and never fails.
/// Every blocking read (stdin, the transcript) runs on a thread of its own
/// that the deadline abandons, and the runtime is shut down without waiting
/// for it, so nothing the agent hands over (a FIFO no one writes, a line
/// with no end) holds the hook past its timeout.
pub fn run_hook(args: HookArgs) {
    let (agent, kind) = (args.agent, args.event);
    let event = kind.agent_event_name(agent);
    let said = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let said = runtime.block_on(within_deadline(args));
            runtime.shutdown_background();
            said
        }
        Err(err) => Err(anyhow!("cannot start its runtime: {err}")),
    };
    let output = match said {
        Ok(Some(Said::Output(output))) => Some(output.to_string()),
        Ok(Some(Said::Notice(message))) => {
            eprintln!("{message}");
            Some(notice_line(agent, kind, &message))
        }
        Ok(None) => None,
        Err(err) => {
            let message = format!("handoff hook {event}: {err:#}; the session goes on without it");
            eprintln!("{message}");
            Some(notice_line(agent, kind, &message))
        }
    };
    if let Some(output) = output {
        println!("{output}");
    }
}

/// The hook's work, given up at `--timeout` (and a panic in it is an error,
/// not a crash).
async fn within_deadline(args: HookArgs) -> anyhow::Result<Option<Said>> {
    let timeout = args.timeout;
    let work = tokio::spawn(async move {
        let input = off_thread(read_input).await??;
        hook(&args, &input).await
    });
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(said)) => said,
        Ok(Err(failed)) => Err(anyhow!("it stopped unexpectedly: {failed}")),
        Err(_) => Err(anyhow!("gave up after {timeout:?}")),
    }
}

/// The event's JSON from stdin, at most [`MAX_INPUT_BYTES`].
fn read_input() -> anyhow::Result<String> {
    let mut input = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut input)
        .context("cannot read the hook's input")?;
    if input.len() as u64 > MAX_INPUT_BYTES {
        bail!("the hook's input is longer than {MAX_INPUT_BYTES} bytes: not an agent's event");
    }
    String::from_utf8(input).context("the hook's input is not UTF-8")
}

/// Runs blocking `work` on a thread of its own, which the deadline can
/// abandon (tokio's blocking pool would make the runtime wait for it).
async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("handoff-hook-io".to_owned())
        .spawn(move || {
            // The receiver is gone only when the deadline passed.
            let _ = done.send(work());
        })
        .context("cannot start a thread")?;
    result
        .await
        .map_err(|_| anyhow!("its reading thread stopped"))
}

/// What a hook answers.
enum Said {
    /// The agent's JSON.
    Output(Value),
    /// One line for the agent's user.
    Notice(String),
}

async fn hook(args: &HookArgs, input: &str) -> anyhow::Result<Option<Said>> {
    let payload: Payload = if input.trim().is_empty() {
        Payload::default()
    } else {
        serde_json::from_str(input).context("the hook's input is not the agent's JSON")?
    };
    let wanted = args.event.agent_event_name(args.agent);
    if let Some(name) = payload.hook_event_name.as_deref().filter(|n| *n != wanted) {
        bail!("this is the {wanted} hook, and the agent sent {name:?}: check the hook wiring");
    }
    let key = std::env::var(KEY_VAR)
        .ok()
        .or_else(|| args.key.clone())
        .filter(|k| !k.trim().is_empty());
    let Some(key) = key else {
        eprintln!("handoff hook {wanted}: no continuation key ({KEY_VAR} or --key): nothing to do");
        return Ok(None);
    };
    let link = Link::from_env(args.link.namespace.as_deref(), &args.link.profile).await?;
    let existing = get(&link, &key).await?;
    if args.event == Event::SessionStart {
        return Ok(existing.map(|h| {
            let context = capped_context(&h, args.agent.context_limit());
            Said::Output(args.agent.context_answer(wanted, &context))
        }));
    }
    let transcript = payload.settled_transcript(args.agent).await?;
    let started = match transcript.clone() {
        Some(path) => off_thread(move || rescue::started_at(&path)).await?,
        None => None,
    };
    if let Plan::Keep(_) = plan(existing.as_ref(), started) {
        return Ok(None);
    }
    let agent_wrote = existing
        .as_ref()
        .is_some_and(|h| !rescue::is_rescued(&h.body));
    if let (Some(path), true) = (transcript.clone(), agent_wrote) {
        let (agent, wanted) = (args.agent, key.clone());
        let wrote = off_thread(move || {
            writes::file_wrote_handoff(agent, &path, &wanted, MAX_TRANSCRIPT_BYTES)
        })
        .await?;
        if wrote {
            return Ok(None);
        }
    }
    if args.event == Event::Stop && !payload.stop_hook_active {
        return Ok(Some(Said::Output(
            json!({"decision": "block", "reason": stop_reason(&key)}),
        )));
    }
    let Some(transcript) = transcript else {
        match &payload.transcript_path {
            Some(path) => bail!(
                "no handoff for `{key}`, and its transcript_path {} is not a regular file to rescue one from",
                path.display()
            ),
            None => bail!(
                "no handoff for `{key}`, and no transcript to rescue one from (no transcript_path, \
                 and no session of this agent with the hook's session id)"
            ),
        }
    };
    let (agent, session) = (args.agent, payload.session_id.clone());
    let path = transcript.clone();
    let outcome = off_thread(move || {
        read_file_tail(
            agent,
            &path,
            session.as_deref(),
            Budget::UNLIMITED,
            MAX_TRANSCRIPT_BYTES,
        )
    })
    .await?
    .map_err(|e| anyhow!("{e}"))?
    .ok_or_else(|| anyhow!("{}: no such transcript", transcript.display()))?;
    let source = Source {
        agent: args.agent,
        session: payload.session_id.as_deref(),
        started,
    };
    let written = write_rescue(&link, &key, &outcome, source, &args.target, existing).await?;
    Ok(Some(Said::Notice(format!(
        "handoff: no handoff was written for `{key}` in this session; {}, a rescued one was \
         extracted from the transcript ({written})",
        occasion(args.event, &payload)
    ))))
}

/// Pure: when a rescue is written, in the agent's words.
fn occasion(event: Event, payload: &Payload) -> String {
    let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".to_owned());
    match event {
        Event::PreCompact => format!(
            "before compaction (trigger {})",
            or_unknown(&payload.trigger)
        ),
        Event::SessionEnd => format!(
            "at the session's end (reason {})",
            or_unknown(&payload.reason)
        ),
        Event::Stop | Event::SessionStart => "at the second stop".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use handoff_transcript::ContextLimit;
    use jiff::Timestamp;

    use super::*;

    fn stored(body: &str, updated: Option<&str>) -> Stored {
        Stored {
            handoff_key: "acme/api#42".into(),
            project: "shop".into(),
            repo: None,
            kind: Some("issue".into()),
            body: body.into(),
            created_by: Some("system:serviceaccount:agents:implement".into()),
            updated_at: updated.map(str::to_owned),
            revision: Some(3),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_freshness_rule() {
        let start = Some(ts("2026-12-01T10:00:00Z"));
        let rescued = format!("{}: from a transcript", rescue::RESCUE_MARK);
        let cases = [
            (None, start, true),
            (
                Some(stored("## State\nx", Some("2026-12-01T09:59:59Z"))),
                start,
                true,
            ),
            (
                Some(stored("## State\nx", Some("2026-12-01T10:00:00Z"))),
                start,
                false,
            ),
            (
                Some(stored("## State\nx", Some("2026-12-01T11:00:00Z"))),
                start,
                false,
            ),
            (
                Some(stored(&rescued, Some("2026-12-01T11:00:00Z"))),
                start,
                true,
            ),
            (
                Some(stored("## State\nx", Some("2020-01-01T00:00:00Z"))),
                None,
                false,
            ),
            (Some(stored("## State\nx", None)), start, false),
            // Written within the session's first second: the apiserver's
            // whole second is not older than the transcript's milliseconds.
            (
                Some(stored("## State\nx", Some("2026-12-01T10:00:00Z"))),
                Some(ts("2026-12-01T10:00:00.900Z")),
                false,
            ),
            (
                Some(stored("## State\nx", Some("2026-12-01T09:59:59Z"))),
                Some(ts("2026-12-01T10:00:00.900Z")),
                true,
            ),
            (
                Some(stored("## State\nx", Some("2026-12-01T10:00:00.100Z"))),
                Some(ts("2026-12-01T10:00:00.900Z")),
                true,
            ),
        ];
        for (i, (existing, started, write)) in cases.into_iter().enumerate() {
            let got = plan(existing.as_ref(), started);
            assert_eq!(got == Plan::Write, write, "case {i}: {got:?}");
        }
    }

    #[test]
    fn the_session_context_is_fenced_with_author_revision_and_time() {
        let h = stored(
            "## State\n~~~\nnot a fence end\n~~~~\n",
            Some("2026-12-01T10:00:00Z"),
        );
        let c = session_context(&h);
        assert!(c.contains("revision 3, written by system:serviceaccount:agents:implement, updated 2026-12-01T10:00:00Z"), "{c}");
        assert!(c.contains("~~~~~markdown prior-handoff\n## State\n"), "{c}");
        assert!(c.ends_with("~~~~\n~~~~~\n"), "{c}");
    }

    #[test]
    fn a_long_context_keeps_its_head_and_ends_with_the_way_to_the_rest() {
        let line = "- a line of the handoff's Done section, long enough to count\n";
        let long = format!(
            "## State\nhalf done\n## Next\n- go on\n## Done\n{}",
            line.repeat(200)
        );
        let wide = format!("## State\n{}", "é€😀".repeat(4_000));
        let one_line = "x".repeat(20_000);
        let (utf16, bytes) = (ContextLimit::Utf16, ContextLimit::Bytes);
        let cases: [(&str, Option<ContextLimit>, bool); 10] = [
            ("## State\nshort", Some(utf16(10_000)), false),
            ("## State\nshort", Some(bytes(10_000)), false),
            (&long, None, false),
            (&long, Some(utf16(10_000)), true),
            (&long, Some(utf16(2_000)), true),
            (&wide, Some(utf16(10_000)), true),
            (&one_line, Some(utf16(10_000)), true),
            (&long, Some(bytes(10_000)), true),
            // Wide characters: fewer UTF-16 units than bytes.
            (&wide, Some(bytes(10_000)), true),
            (&one_line, Some(bytes(10_000)), true),
        ];
        for (i, (body, limit, cut)) in cases.into_iter().enumerate() {
            let h = stored(body, Some("2026-12-01T10:00:00Z"));
            let got = capped_context(&h, limit);
            let Some(limit) = limit.filter(|_| cut) else {
                assert_eq!(got, session_context(&h), "case {i}");
                continue;
            };
            let size = limit.size(&got);
            assert!(size <= limit.most(), "case {i}: {size} of {limit:?}");
            assert!(
                size > limit.most() - 200,
                "case {i}: only {size} of {limit:?}"
            );
            assert!(
                got.starts_with("Prior handoff for continuation key `acme/api#42`"),
                "case {i}"
            );
            assert!(
                got.contains("~~~markdown prior-handoff\n## State\n")
                    || got.contains("~~~markdown prior-handoff\nxxx"),
                "case {i}"
            );
            assert!(
                got.ends_with("Call get_handoff with handoff_key `acme/api#42` for the rest.\n"),
                "case {i}: {got}"
            );
        }
        let h = stored(&long, None);
        let got = capped_context(&h, Some(utf16(2_000)));
        let shown = got
            .split("prior-handoff\n")
            .nth(1)
            .and_then(|rest| rest.split("\n~~~\n").next())
            .unwrap_or_default();
        assert!(
            shown.ends_with("long enough to count"),
            "cut after a whole line: {shown:?}"
        );
    }

    #[test]
    fn notices_are_system_messages_where_the_agent_shows_them() {
        let json = r#"{"systemMessage":"m"}"#;
        let cases = [
            (AgentKind::Claude, Event::Stop, json),
            (AgentKind::Claude, Event::SessionStart, json),
            (AgentKind::Claude, Event::PreCompact, "m"),
            (AgentKind::Claude, Event::SessionEnd, "m"),
            (AgentKind::Codex, Event::PreCompact, json),
            (AgentKind::Codex, Event::Stop, json),
            (AgentKind::Gemini, Event::Stop, json),
            (AgentKind::Gemini, Event::SessionEnd, json),
        ];
        for (agent, event, want) in cases {
            assert_eq!(notice_line(agent, event, "m"), want, "{agent:?} {event:?}");
        }
    }

    #[test]
    fn gemini_cli_events_carry_its_own_names() {
        let cases = [
            (Event::SessionStart, "SessionStart"),
            (Event::Stop, "AfterAgent"),
            (Event::PreCompact, "PreCompress"),
            (Event::SessionEnd, "SessionEnd"),
        ];
        for (event, name) in cases {
            assert_eq!(event.agent_event_name(AgentKind::Gemini), name);
            let claude = event.agent_event_name(AgentKind::Claude);
            assert_eq!(claude, event.hook_event_name());
        }
    }

    #[test]
    fn the_stop_reason_asks_for_the_skill_sections() {
        let r = stop_reason("k");
        for part in [
            "write_handoff",
            "`k`",
            "## State",
            "## Done",
            "## Next",
            "## Open questions",
            "## Refs",
        ] {
            assert!(r.contains(part), "{part}");
        }
    }

    #[test]
    fn occasions_name_the_trigger_and_the_reason() {
        let payload = |trigger: Option<&str>, reason: Option<&str>| Payload {
            trigger: trigger.map(str::to_owned),
            reason: reason.map(str::to_owned),
            ..Payload::default()
        };
        let cases = [
            (
                Event::PreCompact,
                payload(Some("auto"), None),
                "before compaction (trigger auto)",
            ),
            (
                Event::PreCompact,
                payload(None, None),
                "before compaction (trigger unknown)",
            ),
            (
                Event::SessionEnd,
                payload(None, Some("logout")),
                "at the session's end (reason logout)",
            ),
            (Event::Stop, payload(None, None), "at the second stop"),
        ];
        for (event, p, want) in cases {
            assert_eq!(occasion(event, &p), want);
        }
    }

    #[test]
    fn budgets_below_the_minimum_are_refused() {
        assert_eq!(max_tokens("2000"), Ok(2000));
        assert!(max_tokens("10").unwrap_err().contains("below 300"));
        assert!(max_tokens("lots").unwrap_err().contains("\"lots\""));
    }
}
