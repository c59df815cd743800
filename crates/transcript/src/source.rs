//! A transcript file as the formats read it: a JSON-lines file whole
//! ([`read_jsonl`]) or its last bytes from a whole line on
//! ([`read_jsonl_tail`], [`open_tail`]), and why a file cannot be read as
//! a transcript ([`FileError`]). A leaf: the formats and the read entry
//! points use it, it knows no format (each passes its own linearizer).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::{Outcome, linear};

/// Why a file cannot be read as a transcript of a kind.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FileError {
    #[error("a Grok database holds many sessions: give the session id (--session)")]
    SessionRequired,
    #[error("a Gemini CLI logs.json holds many sessions: give the session id (--session)")]
    LogsSessionRequired,
    #[error(
        "{0}: a Grok transcript file is a .db database, a session's chat_history.jsonl or a legacy .json session"
    )]
    UnsupportedGrokFile(PathBuf),
}

/// Streams a JSON-lines transcript file through `linearize` (a format's);
/// `None` when it does not exist.
pub(crate) fn read_jsonl(
    path: &Path,
    linearize: impl FnOnce(&mut dyn BufRead) -> Outcome,
) -> Option<Outcome> {
    match File::open(path) {
        Ok(file) => Some(linearize(&mut BufReader::with_capacity(1 << 16, file))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => Some(Outcome::unreadable(path, &err)),
    }
}

/// The last `max_bytes` of a JSON-lines file of `len` bytes, from the first
/// whole line in that window, through `linearize` (a format's).
pub(crate) fn read_jsonl_tail(
    path: &Path,
    len: u64,
    max_bytes: u64,
    linearize: impl FnOnce(&mut dyn BufRead) -> Outcome,
) -> Outcome {
    let Tail { mut reader, cut } = match open_tail(path, max_bytes) {
        Ok(tail) => tail,
        Err(err) => return Outcome::unreadable(path, &err),
    };
    let start = len.saturating_sub(max_bytes);
    let mut outcome = linearize(&mut reader);
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
