//! A scripted OpenAI Responses API (`POST {base_url}/responses`, streamed
//! as server-sent events) for the Codex CLI.
//!
//! Why scripted: the agents tier runs the real `codex` binary with no
//! network and no login, so the model is a list of [`Turn`]s the test
//! writes. Every request the CLI makes is logged (method, path, JSON
//! body): what the model saw is then an assertion like any other. One
//! request to `/responses` plays the next turn; anything else the CLI asks
//! for is logged and answered with an empty JSON object.
//!
//! The wire shape follows what Codex 0.171 reads: `response.created`,
//! `response.output_item.added` / `.done` per output item, then
//! `response.completed` with usage. MCP tools reach the model as a
//! `namespace` tool (`mcp__<server>`) holding the server's functions, so a
//! call names both (`namespace`, `name`), as Codex presents them.
//!
//! The HTTP side is minimal on purpose (one request per connection,
//! `Connection: close`, `Content-Length` bodies, which is what the CLI
//! sends); the framing is pure functions with unit tests.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One answer of the scripted model.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// An assistant message with this text; the turn ends there.
    Text(String),
    /// A function call; the CLI runs it and asks again with its output.
    Call {
        /// The tool's namespace as the CLI presents it (`mcp__handoff`), if any.
        namespace: Option<String>,
        /// The function's name inside it (`write_handoff`).
        name: String,
        /// The arguments (sent as a JSON string, as the API does).
        arguments: Value,
    },
}

impl Turn {
    /// An assistant message.
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    /// A call of `tool` of the MCP server named `server` in the CLI's config.
    pub fn mcp(server: &str, tool: &str, arguments: Value) -> Self {
        Self::Call {
            namespace: Some(format!("mcp__{server}")),
            name: tool.to_owned(),
            arguments,
        }
    }
}

/// A request the CLI made.
#[derive(Debug, Clone)]
pub struct Logged {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target (`/v1/responses`).
    pub path: String,
    /// The body as JSON (`Value::Null` when empty or not JSON).
    pub body: Value,
}

/// The answer to a turn past the script's end: visible in the CLI's output.
pub const SCRIPT_ENDED: &str = "(the scripted model has no more turns)";

/// One SSE frame: `event: <type>` and the JSON on one `data:` line.
pub fn frame(event: &Value) -> String {
    let kind = event["type"].as_str().unwrap_or("message");
    format!("event: {kind}\ndata: {event}\n\n")
}

/// The output item of `turn`, the `n`-th answer of the server.
pub fn item(turn: &Turn, n: usize) -> Value {
    match turn {
        Turn::Text(text) => json!({
            "type": "message",
            "role": "assistant",
            "id": format!("msg_{n}"),
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        Turn::Call {
            namespace,
            name,
            arguments,
        } => {
            let mut call = json!({
                "type": "function_call",
                "id": format!("fc_{n}"),
                "call_id": format!("call_{n}"),
                "name": name,
                "arguments": arguments.to_string(),
                "status": "completed",
            });
            if let Some(ns) = namespace {
                call["namespace"] = json!(ns);
            }
            call
        }
    }
}

/// The events of the `n`-th answer, playing `turn`.
pub fn events(turn: &Turn, n: usize) -> Vec<Value> {
    let id = format!("resp_{n}");
    let item = item(turn, n);
    vec![
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": id, "usage": {
            "input_tokens": 1, "input_tokens_details": null,
            "output_tokens": 1, "output_tokens_details": null, "total_tokens": 2}}}),
    ]
}

/// The SSE body of the `n`-th answer.
pub fn stream(turn: &Turn, n: usize) -> String {
    events(turn, n).iter().map(frame).collect()
}

/// The end of the header block and the body's declared length, once the
/// headers are complete in `buf`.
fn head_of(buf: &[u8]) -> Option<(usize, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]);
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    Some((end, length))
}

/// Method, path and body of one complete request.
pub fn parse_request(buf: &[u8]) -> Option<Logged> {
    let (end, length) = head_of(buf)?;
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut first = head.lines().next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let body = buf.get(end..end + length)?;
    Some(Logged {
        method,
        path,
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    })
}

/// A full HTTP/1.1 answer.
fn answer(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[derive(Default)]
struct State {
    script: Vec<Turn>,
    played: usize,
    log: Vec<Logged>,
}

/// The server: on a free loopback port, on its own thread, until dropped.
pub struct Responses {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Responses {
    /// Starts a server playing `script`.
    pub fn start(script: Vec<Turn>) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            script,
            ..State::default()
        }));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = state.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => {
                            if let Ok((stream, _)) = accepted {
                                tokio::spawn(serve(stream, shared.clone()));
                            }
                        }
                    }
                }
            });
        });
        Ok(Self {
            addr,
            state,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:<port>/v1`: a `model_providers` entry's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request so far, in order.
    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().map(|s| s.log.clone()).unwrap_or_default()
    }

    /// The bodies of the model requests (`POST …/responses`), in order.
    pub fn model_requests(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/responses"))
            .map(|r| r.body)
            .collect()
    }

    /// Replaces the script (and restarts it) for the CLI's next session.
    pub fn play(&self, script: Vec<Turn>) {
        if let Ok(mut s) = self.state.lock() {
            s.script = script;
            s.played = 0;
            s.log.clear();
        }
    }
}

impl Drop for Responses {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Reads one request, logs it, answers it.
async fn serve(mut conn: TcpStream, state: Arc<Mutex<State>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let request = loop {
        if let Some(r) = parse_request(&buf) {
            break r;
        }
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let model = request.method == "POST" && request.path.ends_with("/responses");
    let reply = {
        let Ok(mut s) = state.lock() else { return };
        s.log.push(request);
        if model {
            let n = s.played;
            s.played += 1;
            let turn = s
                .script
                .get(n)
                .cloned()
                .unwrap_or_else(|| Turn::text(SCRIPT_ENDED));
            answer("200 OK", "text/event-stream", &stream(&turn, n + 1))
        } else {
            answer("200 OK", "application/json", "{}")
        }
    };
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_name_the_event_and_carry_one_data_line() {
        let cases = [
            (
                json!({"type": "response.created", "response": {"id": "r"}}),
                "event: response.created\ndata: {\"response\":{\"id\":\"r\"},\"type\":\"response.created\"}\n\n",
            ),
            (
                json!({"type": "x", "text": "two\nlines"}),
                "event: x\ndata: {\"text\":\"two\\nlines\",\"type\":\"x\"}\n\n",
            ),
            (json!({}), "event: message\ndata: {}\n\n"),
        ];
        for (event, want) in cases {
            assert_eq!(frame(&event), want);
        }
    }

    #[test]
    fn a_turn_streams_created_items_and_completed() {
        let cases = [
            (Turn::text("hi"), "message"),
            (
                Turn::mcp("handoff", "write_handoff", json!({"key": "k"})),
                "function_call",
            ),
        ];
        for (turn, kind) in cases {
            let types: Vec<_> = events(&turn, 3)
                .iter()
                .map(|e| e["type"].as_str().unwrap_or("").to_owned())
                .collect();
            assert_eq!(
                types,
                [
                    "response.created",
                    "response.output_item.added",
                    "response.output_item.done",
                    "response.completed"
                ]
            );
            assert_eq!(item(&turn, 3)["type"], kind);
            assert_eq!(stream(&turn, 3).matches("\n\n").count(), 4);
        }
    }

    #[test]
    fn a_call_carries_its_namespace_and_string_arguments() {
        let call = item(&Turn::mcp("handoff", "get_handoff", json!({"key": "k"})), 2);
        assert_eq!(call["namespace"], "mcp__handoff");
        assert_eq!(call["name"], "get_handoff");
        assert_eq!(call["call_id"], "call_2");
        assert_eq!(call["arguments"], "{\"key\":\"k\"}");
        let plain = item(
            &Turn::Call {
                namespace: None,
                name: "exec_command".into(),
                arguments: json!({}),
            },
            1,
        );
        assert!(plain.get("namespace").is_none());
    }

    /// What a request parses to: method, path, body.
    type Parsed = Option<(&'static str, &'static str, Value)>;

    #[test]
    fn requests_parse_once_complete() {
        let full = b"POST /v1/responses HTTP/1.1\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        let cases: [(&[u8], Parsed); 4] = [
            (full, Some(("POST", "/v1/responses", json!({"a": 1})))),
            (&full[..full.len() - 1], None),
            (
                b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
                Some(("GET", "/v1/models", Value::Null)),
            ),
            (b"GET /v1/models HTTP/1.1\r\n", None),
        ];
        for (bytes, want) in cases {
            let got = parse_request(bytes).map(|r| (r.method, r.path, r.body));
            let want = want.map(|(m, p, b)| (m.to_owned(), p.to_owned(), b));
            assert_eq!(got, want);
        }
    }
}
