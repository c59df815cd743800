//! A guarded stdio transport. rmcp drops or answers without an id a line
//! it cannot read as an MCP message; an agent (or a human typing into the
//! pipe) would then wait forever for its request's answer. This guard sits
//! between stdin/stdout and rmcp: every line is judged first
//! ([`crate::jsonrpc::judge`]): one rmcp reads passes through, a
//! notification it cannot read is dropped (JSON-RPC answers no
//! notification), and every other line (not UTF-8, not JSON, not an
//! object, bad params, too long) is answered with one JSON-RPC error, under
//! the request's id when it has a usable one (`-32700` parse error,
//! `-32600` invalid request, `-32602` invalid params). A request reusing
//! the id of one not answered yet (MCP: an id is never reused in a
//! session) is answered `-32600` under that id instead of reaching rmcp,
//! which would answer the two only once; the ids in flight are those
//! forwarded and neither answered nor cancelled. One task owns stdout
//! so answers never interleave. Input is framed as bytes, so no byte
//! sequence ends the session: only the end of stdin or an error reading it
//! does.

use futures::{SinkExt, StreamExt};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::jsonrpc::{Flight, INVALID_REQUEST, Refusal, Verdict, answered, flight, judge};

/// The ids (as JSON text) of requests forwarded to rmcp and not yet
/// answered nor cancelled.
type InFlight = Arc<Mutex<HashSet<String>>>;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::{Decoder, FramedRead, FramedWrite, LinesCodec};

/// Longest accepted line (not counting its `\n`): far above any valid
/// request (a body is at most 32 Ki characters), small enough to bound
/// memory.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

const PIPE_BYTES: usize = 256 * 1024;

/// `(reader, writer)` for rmcp, guarding the process's stdin and stdout.
pub(crate) fn guarded_stdio() -> (DuplexStream, DuplexStream) {
    guard(tokio::io::stdin(), tokio::io::stdout())
}

/// [`guarded_stdio`] over any byte streams (tests use in-memory pipes).
pub fn guard<I, O>(input: I, output: O) -> (DuplexStream, DuplexStream)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (server_reader, feed) = tokio::io::duplex(PIPE_BYTES);
    let (server_writer, answers) = tokio::io::duplex(PIPE_BYTES);
    let (errors_tx, errors_rx) = mpsc::channel::<String>(64);
    let in_flight = InFlight::default();
    tokio::spawn(read_input(input, feed, errors_tx, in_flight.clone()));
    tokio::spawn(write_output(answers, errors_rx, output, in_flight));
    (server_reader, server_writer)
}

/// One line of input as [`LineFraming`] cuts it.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// The bytes of a line, without its `\n` (nor the `\r` of a `\r\n`).
    /// Nothing is checked: any bytes may be in it.
    Line(Bytes),
    /// A line longer than the limit; its bytes were dropped, never kept.
    TooLong,
}

/// Cuts bytes into lines at `\n`. Unlike `LinesCodec` it neither decodes
/// UTF-8 nor fails on content (a `FramedRead` ends after the first decode
/// error), so its only errors are the reader's.
struct LineFraming {
    max: usize,
    /// How far the buffer is known to hold no `\n`.
    scanned: usize,
    /// Dropping the rest of a line already reported as [`Frame::TooLong`].
    discarding: bool,
}

impl LineFraming {
    fn new(max: usize) -> Self {
        Self {
            max,
            scanned: 0,
            discarding: false,
        }
    }
}

impl Decoder for LineFraming {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        if self.discarding {
            match buf.iter().position(|b| *b == b'\n') {
                Some(newline) => {
                    buf.advance(newline + 1);
                    self.discarding = false;
                }
                None => {
                    buf.clear();
                    return Ok(None);
                }
            }
        }
        // A line within the limit has its `\n` among the first `max + 1`
        // bytes; no more than that is ever searched or kept.
        let window = buf.len().min(self.max.saturating_add(1));
        let from = self.scanned.min(window);
        match buf[from..window].iter().position(|b| *b == b'\n') {
            Some(offset) => {
                let end = from + offset;
                self.scanned = 0;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                Ok(Some(Frame::Line(without_cr(line))))
            }
            None if buf.len() > self.max => {
                buf.advance(window);
                self.scanned = 0;
                self.discarding = true;
                Ok(Some(Frame::TooLong))
            }
            None => {
                self.scanned = window;
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.scanned = 0;
        self.discarding = false;
        if buf.is_empty() {
            return Ok(None);
        }
        // The last line, without a `\n`.
        Ok(Some(Frame::Line(without_cr(buf.split()))))
    }
}

fn without_cr(mut line: BytesMut) -> Bytes {
    if line.last() == Some(&b'\r') {
        line.truncate(line.len() - 1);
    }
    line.freeze()
}

async fn read_input<I: AsyncRead + Unpin>(
    input: I,
    mut feed: DuplexStream,
    errors: mpsc::Sender<String>,
    in_flight: InFlight,
) {
    let mut frames = FramedRead::new(input, LineFraming::new(MAX_LINE_BYTES));
    loop {
        let frame = match frames.next().await {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                tracing::error!(error = %e, "reading stdin failed; the MCP session ends");
                break;
            }
            None => {
                tracing::info!("stdin closed; the MCP session ends");
                break;
            }
        };
        let verdict = match &frame {
            Frame::Line(line) => check(line).and_then(|forward| match forward {
                Some(message) => admit(&in_flight, message).map(|()| Some(message)),
                None => Ok(None),
            }),
            Frame::TooLong => Err(Refusal {
                id: serde_json::Value::Null,
                code: INVALID_REQUEST,
                message: format!("Invalid Request: a line longer than {MAX_LINE_BYTES} bytes"),
            }
            .to_line()),
        };
        match verdict {
            Ok(None) => {}
            Ok(Some(message)) => {
                let mut framed = Vec::with_capacity(message.len() + 1);
                framed.extend_from_slice(message);
                framed.push(b'\n');
                if let Err(e) = feed.write_all(&framed).await {
                    tracing::info!(error = %e, "the MCP server stopped reading; stdin is no longer read");
                    break;
                }
            }
            Err(answer) => {
                if errors.send(answer).await.is_err() {
                    tracing::info!("stdout is closed; stdin is no longer read");
                    break;
                }
            }
        }
    }
    let _ = feed.shutdown().await;
}

/// Judges one line (without its line ending): `Ok(None)` for a blank line
/// (skipped) or a notification rmcp cannot read (dropped), `Ok(Some(line))`
/// for a message rmcp reads; otherwise the one JSON-RPC error to answer
/// with (see [`crate::jsonrpc`]).
pub fn check(line: &[u8]) -> Result<Option<&[u8]>, String> {
    match judge(line) {
        Verdict::Forward => Ok(Some(line)),
        Verdict::Blank => Ok(None),
        Verdict::Drop => {
            tracing::debug!("a notification that is not an MCP message was dropped");
            Ok(None)
        }
        Verdict::Answer(refusal) => Err(refusal.to_line()),
    }
}

/// Records a request rmcp is to read as in flight, or refuses it when
/// its id already is; a cancellation ends its request's flight.
fn admit(in_flight: &InFlight, message: &[u8]) -> Result<(), String> {
    let Ok(mut ids) = in_flight.lock() else {
        return Ok(());
    };
    match flight(message) {
        Flight::Request(id) => {
            if ids.insert(id.to_string()) {
                return Ok(());
            }
            Err(Refusal {
                message: format!(
                    "Invalid Request: the id {id} is already used by a request not answered yet \
                     (an id is never reused in a session)"
                ),
                id,
                code: INVALID_REQUEST,
            }
            .to_line())
        }
        Flight::Cancels(id) => {
            ids.remove(&id.to_string());
            Ok(())
        }
        Flight::Other => Ok(()),
    }
}

async fn write_output<O: AsyncWrite + Unpin>(
    answers: DuplexStream,
    mut errors: mpsc::Receiver<String>,
    output: O,
    in_flight: InFlight,
) {
    let mut answers = FramedRead::new(answers, LinesCodec::new());
    let mut out = FramedWrite::new(output, LinesCodec::new());
    let mut errors_open = true;
    loop {
        let line = tokio::select! {
            answer = answers.next() => match answer {
                Some(Ok(line)) => {
                    if let (Some(id), Ok(mut ids)) = (answered(&line), in_flight.lock()) {
                        ids.remove(&id.to_string());
                    }
                    line
                }
                _ => break,
            },
            error = errors.recv(), if errors_open => match error {
                Some(line) => line,
                None => { errors_open = false; continue; }
            },
        };
        if out.send(line).await.is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

    const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

    fn line(bytes: &[u8]) -> Frame {
        Frame::Line(Bytes::copy_from_slice(bytes))
    }

    /// Every frame of `input`, fed to the framing in chunks of `chunk` bytes
    /// (as reads of any size would), then ended.
    fn frames(max: usize, input: &[u8], chunk: usize) -> Vec<Frame> {
        let mut framing = LineFraming::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(frame) = framing.decode(&mut buf).expect("decode") {
                out.push(frame);
            }
        }
        while let Some(frame) = framing.decode_eof(&mut buf).expect("decode_eof") {
            out.push(frame);
        }
        out
    }

    #[test]
    fn framing_cuts_any_bytes_into_lines() {
        let cases: Vec<(&str, &[u8], Vec<Frame>)> = vec![
            ("no input", b"", vec![]),
            ("two lines", b"a\nb\n", vec![line(b"a"), line(b"b")]),
            ("CRLF", b"a\r\nb\r\n", vec![line(b"a"), line(b"b")]),
            ("lone CR stays in its line", b"a\rb\n", vec![line(b"a\rb")]),
            ("CR then CRLF", b"a\r\r\n", vec![line(b"a\r")]),
            (
                "empty lines",
                b"\n\r\n\n",
                vec![line(b""), line(b""), line(b"")],
            ),
            (
                "invalid UTF-8",
                b"\xff\xfe\nok\n",
                vec![line(b"\xff\xfe"), line(b"ok")],
            ),
            ("NUL", b"a\0b\n", vec![line(b"a\0b")]),
            (
                "last line without newline",
                b"a\nbc",
                vec![line(b"a"), line(b"bc")],
            ),
            ("last line with a CR", b"bc\r", vec![line(b"bc")]),
            (
                "a line at the limit",
                b"12345678\n",
                vec![line(b"12345678")],
            ),
            (
                "over-long line, then a valid one",
                b"123456789\nok\n",
                vec![Frame::TooLong, line(b"ok")],
            ),
            (
                "far over-long line, then a valid one",
                b"123456789012345678901234\nok",
                vec![Frame::TooLong, line(b"ok")],
            ),
            ("over-long line at EOF", b"123456789", vec![Frame::TooLong]),
            (
                "two over-long lines",
                b"123456789\n123456789\n",
                vec![Frame::TooLong, Frame::TooLong],
            ),
        ];
        for (case, input, want) in cases {
            for chunk in [1, 3, input.len().max(1)] {
                assert_eq!(frames(8, input, chunk), want, "{case} (chunks of {chunk})");
            }
        }
    }

    #[test]
    fn classification() {
        let cases: Vec<(&str, &[u8], Option<i64>)> = vec![
            ("a request", PING.as_bytes(), None),
            ("an array (MCP has no batches)", b"[]", Some(-32600)),
            ("not JSON", b"{garbage", Some(-32700)),
            ("a number", b"42", Some(-32600)),
            ("a string", br#""ping""#, Some(-32600)),
            ("invalid UTF-8", b"\xff\xfe", Some(-32700)),
            (
                "a truncated UTF-8 sequence",
                b"{\"a\":\"\xc3\"}",
                Some(-32700),
            ),
            ("a UTF-16 surrogate", b"\xed\xa0\x80", Some(-32700)),
            ("NUL", b"\0", Some(-32700)),
            ("NUL after a request", b"{}\0", Some(-32700)),
            ("a lone CR between requests", b"{}\r{}", Some(-32700)),
        ];
        for (case, input, want) in cases {
            let got = check(input).err().map(|answer| {
                let answer: Value = serde_json::from_str(&answer).expect("answer is JSON");
                assert_eq!(answer["id"], Value::Null, "{case}");
                answer["error"]["code"].as_i64().expect("code")
            });
            assert_eq!(got, want, "{case}");
        }
        // A request whose params do not fit is answered under its own id.
        for params in [r#""""#, "-1", "[null]", r#""x""#] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{params}}}"#);
            let answer = check(line.as_bytes()).expect_err("refused");
            let answer: Value = serde_json::from_str(&answer).expect("answer is JSON");
            assert_eq!(
                (answer["id"].as_i64(), answer["error"]["code"].as_i64()),
                (Some(9), Some(-32602)),
                "{params}: {answer}"
            );
        }
        for blank in [&b""[..], b"  ", b"\t", b"\r"] {
            assert_eq!(check(blank), Ok(None), "{blank:?}");
        }
    }

    /// Runs `input` through the guard: what rmcp was fed, and the codes of
    /// the guard's answers (each with `id` null). rmcp's one answer passes
    /// through to the output too.
    async fn through_guard(input: Vec<u8>) -> (String, Vec<i64>) {
        let (mut client_in, stdin) = tokio::io::duplex(4096);
        let (stdout, client_out) = tokio::io::duplex(4096);
        let (mut server_reader, mut server_writer) = guard(stdin, stdout);
        let writer = tokio::spawn(async move {
            client_in.write_all(&input).await.expect("write");
        });
        let answers = tokio::spawn(async move {
            let mut lines = BufReader::new(client_out).lines();
            let (mut codes, mut results) = (Vec::new(), Vec::new());
            while let Some(line) = lines.next_line().await.expect("line") {
                let answer: Value = serde_json::from_str(&line).expect("answer is JSON");
                if answer.get("result").is_some() {
                    results.push(answer);
                    continue;
                }
                assert_eq!(answer["id"], Value::Null, "{answer}");
                codes.push(answer["error"]["code"].as_i64().expect("code"));
            }
            assert_eq!(
                results,
                [serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}})]
            );
            codes
        });
        let mut forwarded = String::new();
        server_reader
            .read_to_string(&mut forwarded)
            .await
            .expect("read");
        writer.await.expect("writer");
        server_writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
            .await
            .expect("answer");
        drop(server_writer);
        (forwarded, answers.await.expect("answers"))
    }

    #[tokio::test]
    async fn every_malformed_line_is_answered_and_the_next_one_served() {
        let ping = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let over_long = "x".repeat(MAX_LINE_BYTES + 1);
        let cases: Vec<(&str, Vec<u8>, String, Vec<i64>)> = vec![
            (
                "invalid UTF-8",
                [b"\xff\xfe\n", ping(1).as_bytes(), b"\n"].concat(),
                ping(1),
                vec![-32700],
            ),
            (
                "NUL",
                format!("\0\n{}\0\n{}\n", ping(1), ping(2)).into_bytes(),
                ping(2),
                vec![-32700, -32700],
            ),
            (
                "lone CR",
                format!("{}\r{}\n{}\n", ping(1), ping(2), ping(3)).into_bytes(),
                ping(3),
                vec![-32700],
            ),
            (
                "CRLF",
                format!("{}\r\n{}\r\n", ping(1), ping(2)).into_bytes(),
                format!("{}\n{}", ping(1), ping(2)),
                vec![],
            ),
            (
                "over-long line, then a valid one",
                format!("{over_long}\n{}\n", ping(1)).into_bytes(),
                ping(1),
                vec![-32600],
            ),
            (
                "empty lines",
                format!("\n\r\n \t\n{}\n\n", ping(1)).into_bytes(),
                ping(1),
                vec![],
            ),
            (
                "invalid UTF-8 at EOF",
                [ping(1).as_bytes(), b"\n\xc3"].concat(),
                ping(1),
                vec![-32700],
            ),
        ];
        for (case, input, forwarded, codes) in cases {
            let (got, got_codes) = through_guard(input).await;
            assert_eq!(got, format!("{forwarded}\n"), "{case}: forwarded");
            assert_eq!(got_codes, codes, "{case}: answers");
        }
    }

    #[tokio::test]
    async fn a_reused_id_in_flight_is_refused_under_it_and_free_once_answered() {
        let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        let (mut client_in, stdin) = tokio::io::duplex(4096);
        let (stdout, client_out) = tokio::io::duplex(4096);
        let (server_reader, mut server_writer) = guard(stdin, stdout);
        let mut forwarded = BufReader::new(server_reader).lines();
        let mut answers = BufReader::new(client_out).lines();
        let mut next = async || -> Value {
            let line = answers.next_line().await.expect("read").expect("a line");
            serde_json::from_str(&line).expect("JSON")
        };
        // A third request marks the end of what is forwarded.
        let other = r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#;
        client_in
            .write_all(format!("{ping}\n{ping}\n{other}\n").as_bytes())
            .await
            .expect("write");
        let mut passed = Vec::new();
        while let Some(line) = forwarded.next_line().await.expect("read") {
            let last = line == other;
            passed.push(line);
            if last {
                break;
            }
        }
        assert_eq!(passed, [ping, other], "the reused id is not forwarded");
        let refusal = next().await;
        assert_eq!(
            (refusal["id"].as_i64(), refusal["error"]["code"].as_i64()),
            (Some(7), Some(-32600)),
            "{refusal}"
        );
        server_writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n")
            .await
            .expect("answer");
        assert_eq!(next().await["result"], serde_json::json!({}));
        client_in
            .write_all(format!("{ping}\n").as_bytes())
            .await
            .expect("write");
        assert_eq!(
            forwarded.next_line().await.expect("read").as_deref(),
            Some(ping),
            "answered, the id is free again"
        );
    }
}
