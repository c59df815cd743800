//! Handoff documents on disk.
//!
//! A document is written to a file because a file has no size limit, and
//! the destination is told to read it. Transcripts can hold secrets, so the
//! files are private (0600, in a 0700 directory) under the user's state
//! directory, and `sweep` removes the expired ones. Only files named like
//! ours (`handoff-<agent>-*.md`) are ever removed.

use std::ffi::OsString;
use std::fs::{self, DirBuilder};
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow, bail};

use super::AgentKind;

const PREFIX: &str = "handoff-";
const SUFFIX: &str = ".md";

/// `$XDG_STATE_HOME/handoff/transcripts`, else
/// `$HOME/.local/state/handoff/transcripts`.
pub(crate) fn state_dir() -> Option<PathBuf> {
    state_dir_from(|name| std::env::var_os(name))
}

fn state_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |name: &str| {
        var(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))
        .map(|state| state.join("handoff/transcripts"))
}

fn require_state_dir() -> anyhow::Result<PathBuf> {
    state_dir().ok_or_else(|| {
        anyhow!("no state directory: set XDG_STATE_HOME or HOME (or pass --state-dir)")
    })
}

/// Writes `content` to a new file in the state directory; returns its path.
pub fn write_file(content: &str, source: AgentKind) -> anyhow::Result<PathBuf> {
    write_file_in(&require_state_dir()?, content, source)
}

/// Writes `content` to a new private file in `dir` (created when missing).
pub fn write_file_in(dir: &Path, content: &str, source: AgentKind) -> anyhow::Result<PathBuf> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let mut file = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{source}-"))
        .suffix(SUFFIX)
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    file.write_all(content.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("writing {}", file.path().display()))?;
    let (_, path) = file
        .keep()
        .with_context(|| format!("keeping a file in {}", dir.display()))?;
    Ok(path)
}

/// Removes the documents in the state directory older than `max_age`;
/// returns the removed paths.
pub fn sweep_files(max_age: Duration) -> anyhow::Result<Vec<PathBuf>> {
    sweep_files_in(&require_state_dir()?, max_age, SystemTime::now())
}

/// Removes our documents in `dir` last modified more than `max_age` before
/// `now`. A missing directory holds nothing to sweep. Every file is tried;
/// the failures are reported together.
pub fn sweep_files_in(
    dir: &Path,
    max_age: Duration,
    now: SystemTime,
) -> anyhow::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("listing {}", dir.display())),
    };
    let mut removed = Vec::new();
    let mut failures = Vec::new();
    for entry in entries {
        let path = match entry {
            Ok(entry) => entry.path(),
            Err(err) => {
                failures.push(format!("listing {}: {err}", dir.display()));
                continue;
            }
        };
        match sweep_one(&path, max_age, now) {
            Ok(true) => removed.push(path),
            Ok(false) => {}
            Err(err) => failures.push(format!("{}: {err}", path.display())),
        }
    }
    if !failures.is_empty() {
        bail!(
            "sweep removed {} files but failed on {}: {}",
            removed.len(),
            failures.len(),
            failures.join("; ")
        );
    }
    Ok(removed)
}

/// Removes `path` if it is one of our documents and expired. A file that
/// vanished meanwhile was swept by someone else.
fn sweep_one(path: &Path, max_age: Duration, now: SystemTime) -> io::Result<bool> {
    if !is_document_name(path) {
        return Ok(false);
    }
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err),
    };
    if !metadata.is_file() || !is_expired(metadata.modified()?, max_age, now) {
        return Ok(false);
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

fn is_document_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with(PREFIX) && name.ends_with(SUFFIX))
}

/// Older than `max_age` at `now`; a time in the future is not expired.
fn is_expired(modified: SystemTime, max_age: Duration, now: SystemTime) -> bool {
    now.duration_since(modified).is_ok_and(|age| age > max_age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_prefers_xdg_then_home() {
        let dir = |xdg: Option<&str>, home: Option<&str>| {
            state_dir_from(|name| match name {
                "XDG_STATE_HOME" => xdg.map(OsString::from),
                "HOME" => home.map(OsString::from),
                _ => None,
            })
        };
        let cases = [
            (Some("/x"), Some("/h"), Some("/x/handoff/transcripts")),
            (
                None,
                Some("/h"),
                Some("/h/.local/state/handoff/transcripts"),
            ),
            (
                Some("relative"),
                Some("/h"),
                Some("/h/.local/state/handoff/transcripts"),
            ),
            (Some(""), None, None),
            (None, None, None),
        ];
        for (xdg, home, want) in cases {
            assert_eq!(dir(xdg, home), want.map(PathBuf::from), "{xdg:?} {home:?}");
        }
    }

    #[test]
    fn document_names() {
        let cases = [
            ("handoff-claude-abc.md", true),
            ("/d/handoff-grok-x.md", true),
            ("handoff-claude-abc.md.bak", false),
            ("notes.md", false),
            ("handoff-", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_document_name(Path::new(name)), want, "{name}");
        }
    }

    #[test]
    fn expiry_cases() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let age = Duration::from_secs(100);
        let cases = [
            (9_800, true),
            (9_900, false),
            (9_950, false),
            (20_000, false),
        ];
        for (modified, want) in cases {
            let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(modified);
            assert_eq!(is_expired(modified, age, now), want, "{modified:?}");
        }
    }
}
