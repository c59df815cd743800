//! Reading a transcript: where each agent keeps its sessions
//! ([`Locations`]), and the entry points that hand a session or a file to
//! its kind's [`Format`](crate::formats::Format). Every branch on the kind
//! is the format's: these functions only check what all formats share (a
//! plain session id, a file's length against the window) and bound the
//! reads.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use crate::formats::AgentKind;
use crate::source::FileError;
use crate::{Budget, Outcome};

/// Where each agent keeps its state (`~/.claude`, `~/.codex`, `~/.grok`):
/// no entry when there is neither an override nor a home directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    roots: HashMap<AgentKind, PathBuf>,
}

impl Locations {
    /// From each agent's variable (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
    /// `GROK_HOME`, `GEMINI_CLI_HOME`: a home, whose `.gemini` it is), else
    /// `$HOME`.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = set("HOME");
        let roots = AgentKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let format = kind.format();
                let spot = format.home();
                let root = set(spot.var)
                    .map(|dir| {
                        if format.var_is_home() {
                            dir.join(spot.dir)
                        } else {
                            dir
                        }
                    })
                    .or_else(|| home.as_ref().map(|h| h.join(spot.dir)));
                root.map(|root| (kind, root))
            })
            .collect();
        Locations { roots }
    }

    /// These locations with `kind`'s root replaced by `dir`.
    pub fn with_root(mut self, kind: AgentKind, dir: PathBuf) -> Self {
        self.roots.insert(kind, dir);
        self
    }

    pub fn root(&self, kind: AgentKind) -> Option<&Path> {
        self.roots.get(&kind).map(PathBuf::as_path)
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
    kind.format().read_session(root, session_id, cwd, budget)
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
    kind.format().locate(root, session_id, cwd)
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
    kind.format().read_file(path, session, budget)
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
    kind.format()
        .read_tail(path, session, budget, len, max_bytes)
}

/// Linearizes a stream of JSON lines of `kind` (Grok: one AI SDK message per
/// line, as in its database).
pub fn linearize(kind: AgentKind, mut reader: impl BufRead, budget: Budget) -> Outcome {
    kind.format().linearize(&mut reader, budget)
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
        assert_eq!(home.root(AgentKind::Claude), Some(Path::new("/h/.claude")));
        assert_eq!(home.root(AgentKind::Codex), Some(Path::new("/h/.codex")));
        assert_eq!(home.root(AgentKind::Grok), Some(Path::new("/h/.grok")));
        assert_eq!(home.root(AgentKind::Gemini), Some(Path::new("/h/.gemini")));
        let overridden = Locations::from_vars(vars(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GROK_HOME", ""),
            ("GEMINI_CLI_HOME", "/g"),
        ]));
        assert_eq!(
            overridden.root(AgentKind::Gemini),
            Some(Path::new("/g/.gemini"))
        );
        assert_eq!(overridden.root(AgentKind::Claude), Some(Path::new("/c")));
        assert_eq!(overridden.root(AgentKind::Codex), Some(Path::new("/x")));
        assert_eq!(
            overridden.root(AgentKind::Grok),
            Some(Path::new("/h/.grok"))
        );
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
