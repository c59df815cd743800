//! Where a hook's session transcript is, and when it may be read.
//!
//! Claude Code and Codex name the transcript (`transcript_path`) and have
//! written it when they run a hook. Copilot CLI's `sessionStart` and
//! `sessionEnd` payloads carry only `sessionId`, `cwd` and `timestamp`, so
//! the transcript is found where the agent keeps that session (its
//! format's home: `$COPILOT_HOME/session-state/<sessionId>/events.jsonl`);
//! and Copilot writes that file behind a debounce, so the hook waits (a
//! little) until the file holds the hook's own call, and with it every
//! event before it.

use std::path::PathBuf;
use std::time::Duration;

use handoff_transcript::{AgentKind, Locations, locate};
use serde_json::Value;

use super::{Payload, off_thread};

/// The longest a hook waits for the transcript to reach its own call
/// (Copilot CLI 1.0.102 wrote it within 0.1 s in the agents tier).
const SETTLE: Duration = Duration::from_secs(3);

/// How often the transcript is looked at while waiting.
const POLL: Duration = Duration::from_millis(25);

impl Payload {
    /// The transcript the payload names, else the one `agent` keeps for
    /// its session id where the environment says the agent lives.
    pub fn transcript(&self, agent: AgentKind) -> Option<PathBuf> {
        self.transcript_in(agent, &Locations::from_env())
    }

    /// [`Payload::transcript`] when it is a regular file that holds this
    /// hook call (see the module docs), waiting at most [`SETTLE`] for it;
    /// after that, the file as it is (or `None` when there is none).
    pub async fn settled_transcript(&self, agent: AgentKind) -> anyhow::Result<Option<PathBuf>> {
        let stamp = self.timestamp.as_ref().and_then(Value::as_i64);
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let found = self.transcript(agent).filter(|p| p.is_file());
            let Some(stamp) = stamp else {
                return Ok(found);
            };
            if let Some(path) = found.clone()
                && off_thread(move || agent.holds_hook_start(&path, stamp)).await?
            {
                return Ok(found);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(found);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// [`Payload::transcript`] with explicit locations: the session is
    /// placed with the payload's `cwd`, else this process's; `None` when
    /// neither a path nor a session is known.
    fn transcript_in(&self, agent: AgentKind, locations: &Locations) -> Option<PathBuf> {
        if let Some(path) = &self.transcript_path {
            return Some(path.clone());
        }
        let session = self.session_id.as_deref()?;
        let cwd = self
            .cwd
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        locate(locations, agent, session, &cwd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hook reads the transcript only once it holds the hook's own
    /// call: Copilot appends that event a little after it runs the hook.
    #[tokio::test]
    async fn a_copilot_transcript_is_read_once_it_holds_the_hook_call() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, "{\"type\":\"session.start\",\"data\":{}}\n").expect("events");
        let input = serde_json::json!({"sessionId": "s", "timestamp": 1_796_441_190_525_i64,
            "transcriptPath": path});
        let payload: Payload = serde_json::from_value(input).expect("payload");
        let started = serde_json::json!({"type": "hook.start", "data": {
            "hookType": "sessionEnd", "input": {"sessionId": "s", "timestamp": 1_796_441_190_525_i64}}});
        let appended = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(POLL * 4);
            let mut events = std::fs::read_to_string(&appended).expect("read");
            events.push_str(&format!("{started}\n"));
            std::fs::write(&appended, events).expect("append");
        });
        let found = payload
            .settled_transcript(AgentKind::Copilot)
            .await
            .expect("settles");
        assert_eq!(found.as_deref(), Some(path.as_path()));
        let events = std::fs::read_to_string(&path).expect("read");
        assert!(events.contains("hook.start"), "read too early: {events}");
        writer.join().expect("writer");
    }

    #[test]
    fn a_copilot_session_is_found_from_its_id() {
        let root = tempfile::tempdir().expect("dir");
        let events = root.path().join("session-state/3d2d1305-aca8/events.jsonl");
        std::fs::create_dir_all(events.parent().expect("parent")).expect("dirs");
        std::fs::write(&events, "").expect("events");
        let locations =
            Locations::default().with_root(AgentKind::Copilot, root.path().to_path_buf());
        // (payload, where its transcript is)
        let cases = [
            (
                r#"{"sessionId":"3d2d1305-aca8","timestamp":1796440023551,"cwd":"/w","reason":"complete"}"#,
                Some(events.clone()),
            ),
            (
                r#"{"sessionId":"3d2d1305-aca8","transcriptPath":"/t/events.jsonl"}"#,
                Some(PathBuf::from("/t/events.jsonl")),
            ),
            (r#"{"sessionId":"other","cwd":"/w"}"#, None),
            (r#"{"sessionId":"../../etc","cwd":"/w"}"#, None),
            (r#"{"cwd":"/w"}"#, None),
        ];
        for (input, want) in cases {
            let payload: Payload = serde_json::from_str(input).expect("payload");
            assert_eq!(
                payload.transcript_in(AgentKind::Copilot, &locations),
                want,
                "{input}"
            );
        }
        let payload: Payload =
            serde_json::from_str(r#"{"sessionId":"3d2d1305-aca8"}"#).expect("payload");
        assert_eq!(
            payload.transcript_in(AgentKind::Codex, &locations),
            None,
            "another agent's home is not searched"
        );
    }
}
