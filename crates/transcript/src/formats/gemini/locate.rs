//! Where Gemini CLI keeps a session: `<root>/tmp/<project id>/chats/`,
//! as `session-<YYYY-MM-DDTHH-MM>-<first 8 of the session id>.jsonl`
//! (`.json` before 0.39), a sub-agent's as
//! `chats/<parent session id>/<session id>.jsonl`. The project id is the
//! slug `<root>/projects.json` maps the working directory to (since
//! 0.29), else the SHA-256 of the directory's path in hex (before). Several
//! sessions can share 8 characters, so a file is the session's only when
//! its header's `sessionId` is the whole id.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The session files' directory under a project's.
const CHATS: &str = "chats";
/// Bytes read from a session file's start to find its `sessionId`.
const HEADER_BYTES: u64 = 4 << 10;
/// The file of every project's prompts (interactive sessions).
pub(super) const LOGS: &str = "logs.json";

/// The session file of `session` (see the module docs): in the project
/// directory of `cwd`, else in any project's.
pub(super) fn locate(root: &Path, session: &str, cwd: &Path) -> Option<PathBuf> {
    let tmp = root.join("tmp");
    let mine: Vec<PathBuf> = project_ids(root, cwd)
        .into_iter()
        .map(|id| tmp.join(id))
        .collect();
    mine.iter()
        .find_map(|dir| in_project(dir, session))
        .or_else(|| {
            projects(&tmp)
                .into_iter()
                .filter(|dir| !mine.contains(dir))
                .find_map(|dir| in_project(&dir, session))
        })
}

/// The project directories under `tmp`, by name.
pub(super) fn projects(tmp: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(tmp)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// The project ids of `cwd`: its slug in `projects.json` (as given and
/// with its links resolved), then its path's SHA-256.
pub(super) fn project_ids(root: &Path, cwd: &Path) -> Vec<String> {
    let mut paths = vec![cwd.to_path_buf()];
    if let Ok(real) = cwd.canonicalize()
        && real != cwd
    {
        paths.push(real);
    }
    let registry = std::fs::read(root.join("projects.json")).ok();
    let mut ids: Vec<String> = paths
        .iter()
        .filter_map(|path| slug(registry.as_deref()?, &path.to_string_lossy()))
        .collect();
    ids.extend(paths.iter().map(|path| sha256_hex(&path.to_string_lossy())));
    ids.dedup();
    ids
}

/// The slug `projects.json` (`{"projects": {"<path>": "<slug>"}}`) gives
/// `path`, when it is a plain directory name.
fn slug(registry: &[u8], path: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Registry {
        projects: std::collections::HashMap<String, Value>,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Slug(String),
        Other(serde::de::IgnoredAny),
    }
    let registry: Registry = serde_json::from_slice(registry).ok()?;
    match registry.projects.get(path)? {
        Value::Slug(slug) if is_plain_name(slug) => Some(slug.clone()),
        _ => None,
    }
}

/// A name that stays one directory below `tmp`.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The SHA-256 of `text` in lowercase hex (the older project id).
pub(super) fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The file of `session` in one project directory: a session file whose
/// name ends with the id's first 8 characters and whose header is the
/// session's, else a sub-agent's `chats/<parent>/<session>.jsonl`. Of
/// several, the one written last: a resumed session goes on in its first
/// file, while the CLI starts a new file of the same session (its header
/// and context only) when it resumes; a `.json` it migrates is older than
/// its `.jsonl`.
fn in_project(dir: &Path, session: &str) -> Option<PathBuf> {
    let chats = dir.join(CHATS);
    let entries: Vec<_> = std::fs::read_dir(&chats)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    entries
        .iter()
        .filter(|entry| is_session_file_of(&entry.file_name().to_string_lossy(), session))
        .map(|entry| entry.path())
        .filter(|path| path.is_file() && header_session(path).as_deref() == Some(session))
        .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
        .max()
        .map(|(_, path)| path)
        .or_else(|| {
            entries
                .iter()
                .map(|entry| entry.path().join(format!("{session}.jsonl")))
                .find(|path| path.is_file())
        })
}

/// Whether `name` is `session-<timestamp>-<first 8 of session>.jsonl` (or
/// `.json`).
pub(super) fn is_session_file_of(name: &str, session: &str) -> bool {
    let short = session.get(..8).unwrap_or(session);
    let stem = name
        .strip_suffix(".jsonl")
        .or_else(|| name.strip_suffix(".json"));
    stem.and_then(|stem| stem.strip_prefix("session-"))
        .and_then(|rest| rest.strip_suffix(short))
        .is_some_and(|rest| rest.ends_with('-'))
}

/// The `sessionId` a session file starts with: its header line, or the
/// first field of an older single-document file.
fn header_session(path: &Path) -> Option<String> {
    let mut start = Vec::new();
    File::open(path)
        .ok()?
        .take(HEADER_BYTES)
        .read_to_end(&mut start)
        .ok()?;
    first_session_id(&String::from_utf8_lossy(&start)).map(str::to_owned)
}

/// The value of the first `"sessionId"` key in `text` (the start of a
/// JSON document, possibly cut); a session id holds no escapes.
pub(super) fn first_session_id(text: &str) -> Option<&str> {
    const KEY: &str = "\"sessionId\"";
    let after = &text[text.find(KEY)? + KEY.len()..];
    let value = after
        .trim_start()
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    value.find('"').map(|end| &value[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4cfa479a-e6f6-4e9e-9523-9081eaaae968";

    #[test]
    fn session_file_names() {
        let cases = [
            ("session-2026-12-05T02-20-4cfa479a.jsonl", ID, true),
            ("session-2026-12-05T02-20-4cfa479a.json", ID, true),
            ("session-2026-12-05T02-20-4cfa479b.jsonl", ID, false),
            ("session-2026-12-05T02-20-4cfa479a.txt", ID, false),
            ("chat-2026-12-05T02-20-4cfa479a.jsonl", ID, false),
            ("session-4cfa479a.jsonl", ID, false),
            ("session-x-abc.jsonl", "abc", true),
        ];
        for (name, session, want) in cases {
            assert_eq!(is_session_file_of(name, session), want, "{name}");
        }
    }

    #[test]
    fn first_session_ids() {
        let cases = [
            (r#"{"sessionId":"a-1","projectHash":"h"}"#, Some("a-1")),
            (
                "{\n  \"sessionId\": \"a-2\",\n  \"projectHash\"",
                Some("a-2"),
            ),
            (r#"{"projectHash":"h","sessionId" : "a-3"}"#, Some("a-3")),
            (r#"{"sessionId":"a-4"#, None),
            (r#"{"sessionId":7}"#, None),
            (r#"{"id":"x"}"#, None),
        ];
        for (text, want) in cases {
            assert_eq!(first_session_id(text), want, "{text}");
        }
    }

    #[test]
    fn project_hashes_are_the_path_sha256() {
        // The real CLI's header for /tmp/gem/proj.
        assert_eq!(
            sha256_hex("/tmp/gem/proj"),
            "dd569c8908ed7c1fc71c3d59e4920be5ea2cfc0aeeba1f98c86f3f408cdab39f"
        );
    }

    #[test]
    fn slugs_come_from_the_registry() {
        let registry = br#"{"projects":{"/w/app":"app","/w/bad":"../x","/w/num":3}}"#;
        let cases = [
            ("/w/app", Some("app")),
            ("/w/bad", None),
            ("/w/num", None),
            ("/w/none", None),
        ];
        for (path, want) in cases {
            assert_eq!(slug(registry, path).as_deref(), want, "{path}");
        }
        assert_eq!(slug(b"not json", "/w/app"), None);
    }

    fn header(id: &str) -> String {
        format!("{{\"sessionId\":\"{id}\",\"projectHash\":\"h\"}}\n")
    }

    #[test]
    fn sessions_are_found_by_header() {
        let root = tempfile::tempdir().expect("dir");
        let root = root.path();
        std::fs::write(
            root.join("projects.json"),
            r#"{"projects":{"/w/app":"app"}}"#,
        )
        .expect("registry");
        let chats = root.join("tmp/app/chats");
        std::fs::create_dir_all(chats.join(ID)).expect("dirs");
        let other = "4cfa479a-0000-4000-8000-000000000000";
        // Written at `at` seconds after the epoch.
        let write = |name: &str, id: &str, at: u64| {
            let path = chats.join(name);
            std::fs::write(&path, header(id)).expect("write");
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(at);
            let file = std::fs::File::options()
                .write(true)
                .open(&path)
                .expect("open");
            file.set_modified(when).expect("mtime");
        };
        write("session-2026-12-05T03-00-4cfa479a.jsonl", other, 50);
        // A resumed session: its first file goes on, after the CLI started
        // a new one of the same session; and the `.json` it migrated.
        write("session-2026-12-05T02-20-4cfa479a.jsonl", ID, 40);
        write("session-2026-12-05T03-10-4cfa479a.jsonl", ID, 30);
        write("session-2026-12-05T02-20-4cfa479a.json", ID, 20);
        std::fs::write(chats.join(ID).join("sub-9.jsonl"), header("sub-9")).expect("sub");
        let old = root.join("tmp").join(sha256_hex("/w/old")).join(CHATS);
        std::fs::create_dir_all(&old).expect("old");
        std::fs::write(
            old.join("session-2025-01-01T00-00-old12345.json"),
            "{\n  \"sessionId\": \"old12345-x\"\n}",
        )
        .expect("old");
        let cwd = Path::new("/w/app");
        let cases = [
            (
                ID,
                cwd,
                Some(chats.join("session-2026-12-05T02-20-4cfa479a.jsonl")),
            ),
            (
                other,
                cwd,
                Some(chats.join("session-2026-12-05T03-00-4cfa479a.jsonl")),
            ),
            ("sub-9", cwd, Some(chats.join(ID).join("sub-9.jsonl"))),
            (
                "old12345-x",
                Path::new("/w/old"),
                Some(old.join("session-2025-01-01T00-00-old12345.json")),
            ),
            // Another working directory: every project is searched.
            (
                ID,
                Path::new("/elsewhere"),
                Some(chats.join("session-2026-12-05T02-20-4cfa479a.jsonl")),
            ),
            ("4cfa479a-ffff", cwd, None),
        ];
        for (session, cwd, want) in cases {
            assert_eq!(
                locate(root, session, cwd),
                want,
                "{session} in {}",
                cwd.display()
            );
        }
    }
}
