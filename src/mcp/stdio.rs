//! A guarded stdio transport. rmcp silently drops a line that is not
//! JSON-RPC; an agent (or a human typing into the pipe) would then wait
//! forever. This guard sits between stdin/stdout and rmcp: every malformed
//! line is answered with a JSON-RPC error (`-32700` parse error, `-32600`
//! invalid request, or too long), valid lines pass through, and one task owns
//! stdout so answers never interleave.

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec, LinesCodecError};

/// Longest accepted line: far above any valid request (a body is at most
/// 32 Ki characters), small enough to bound memory.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

const PIPE_BYTES: usize = 256 * 1024;

/// `(reader, writer)` for rmcp, guarding the process's stdin and stdout.
pub fn guarded_stdio() -> (DuplexStream, DuplexStream) {
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
    tokio::spawn(read_input(input, feed, errors_tx));
    tokio::spawn(write_output(answers, errors_rx, output));
    (server_reader, server_writer)
}

async fn read_input<I: AsyncRead + Unpin>(
    input: I,
    mut feed: DuplexStream,
    errors: mpsc::Sender<String>,
) {
    let mut lines = FramedRead::new(input, LinesCodec::new_with_max_length(MAX_LINE_BYTES));
    while let Some(line) = lines.next().await {
        let verdict = match line {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => check(&line).map(|()| line),
            Err(LinesCodecError::MaxLineLengthExceeded) => Err(rpc_error(
                -32600,
                &format!("Invalid Request: a line longer than {MAX_LINE_BYTES} bytes"),
            )),
            Err(LinesCodecError::Io(_)) => break,
        };
        match verdict {
            Ok(line) => {
                if feed
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Err(answer) => {
                if errors.send(answer).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = feed.shutdown().await;
}

/// `Ok` for a JSON object or array (rmcp judges the rest); otherwise the
/// JSON-RPC error to answer with.
pub fn check(line: &str) -> Result<(), String> {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(v) if v.is_object() || v.is_array() => Ok(()),
        Ok(_) => Err(rpc_error(
            -32600,
            "Invalid Request: a JSON-RPC message is a JSON object",
        )),
        Err(e) => Err(rpc_error(-32700, &format!("Parse error: {e}"))),
    }
}

fn rpc_error(code: i64, message: &str) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
        .to_string()
}

async fn write_output<O: AsyncWrite + Unpin>(
    answers: DuplexStream,
    mut errors: mpsc::Receiver<String>,
    output: O,
) {
    let mut answers = FramedRead::new(answers, LinesCodec::new());
    let mut out = FramedWrite::new(output, LinesCodec::new());
    let mut errors_open = true;
    loop {
        let line = tokio::select! {
            answer = answers.next() => match answer {
                Some(Ok(line)) => line,
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
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

    #[test]
    fn classification() {
        assert!(check(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(check("[]").is_ok());
        assert!(check("{garbage").expect_err("parse").contains("-32700"));
        assert!(check("42").expect_err("not an object").contains("-32600"));
    }

    #[tokio::test]
    async fn malformed_lines_are_answered_and_valid_ones_pass() {
        let (mut client_in, input) = tokio::io::duplex(4096);
        let (output, client_out) = tokio::io::duplex(4096);
        let (mut server_reader, mut server_writer) = guard(input, output);
        client_in
            .write_all(b"{garbage\n\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await
            .expect("write");
        drop(client_in);

        let mut forwarded = String::new();
        server_reader
            .read_to_string(&mut forwarded)
            .await
            .expect("read");
        assert_eq!(
            forwarded,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
        );

        server_writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
            .await
            .expect("answer");
        drop(server_writer);
        let mut lines = BufReader::new(client_out).lines();
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.expect("line") {
            seen.push(line);
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen.iter().any(|l| l.contains("-32700")));
        assert!(seen.iter().any(|l| l.contains("\"result\"")));
    }
}
