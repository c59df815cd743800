//! A scripted Anthropic Messages API on 127.0.0.1, so that the real Claude
//! Code CLI runs whole sessions (`ANTHROPIC_BASE_URL`) with no network and
//! no account, and a test reads exactly what the model was sent.
//!
//! Each agent turn (a `POST /v1/messages` that offers tools: the CLI's main
//! loop) takes the next [`Turn`] of the script: a text, or a call of a tool
//! named by its MCP name (`write_handoff`, matched against the request's
//! tools, which Claude Code prefixes with `mcp__<server>__`). Streaming
//! requests are answered with the documented SSE events (`message_start`,
//! `content_block_start`/`_delta`/`_stop`, a tool's input as
//! `input_json_delta` pieces, `message_delta` with the `stop_reason`,
//! `message_stop`); the others with one JSON message. Side requests (no
//! tools: titles, summaries) get a short text and leave the script alone;
//! `count_tokens` gets an estimate. Every request, whatever its path, is
//! logged with its body. The framing is pure ([`events`], [`frame`]) and
//! unit-tested; the server is the shared shell ([`super::server`]).

use axum::http::StatusCode;
use serde_json::{Value, json};

pub use super::server::Logged;
use super::server::{Reply, Script, Server};

/// One answer of the scripted model.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Says `text` and ends the turn (`end_turn`).
    Text(String),
    /// Calls the tool whose name is `name` or ends with `__name`, with
    /// `input` (`tool_use`).
    Tool { name: String, input: Value },
}

impl Turn {
    /// A text turn.
    pub fn text(text: &str) -> Turn {
        Turn::Text(text.to_owned())
    }

    /// A tool call.
    pub fn tool(name: &str, input: Value) -> Turn {
        Turn::Tool {
            name: name.to_owned(),
            input,
        }
    }
}

/// A logged request read as a Messages request.
impl Logged {
    /// Whether this is an agent turn: a `POST /v1/messages` offering tools.
    pub fn is_turn(&self) -> bool {
        self.is_post_to(MESSAGES) && !tool_names(&self.body).is_empty()
    }

    /// The names of the tools the request offers.
    pub fn tools(&self) -> Vec<String> {
        tool_names(&self.body)
    }

    /// Every text of the request (system prompt, messages, tool results),
    /// joined by newlines: what the model saw.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        texts(&self.body["system"], &mut out);
        texts(&self.body["messages"], &mut out);
        out.join("\n")
    }

    /// The tool calls (`tool_use` blocks) of the conversation so far:
    /// `(name, input)`, in order.
    pub fn tool_uses(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for message in self.body["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_use" {
                    let name = block["name"].as_str().unwrap_or_default().to_owned();
                    out.push((name, block["input"].clone()));
                }
            }
        }
        out
    }
}

/// Collects the strings under `text` and `content` keys of `v`.
fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| texts(i, out)),
        Value::Object(map) => {
            for key in ["text", "content"] {
                if let Some(inner) = map.get(key) {
                    texts(inner, out);
                }
            }
        }
        _ => {}
    }
}

/// Where the CLI sends its model requests.
const MESSAGES: &str = "/v1/messages";

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Pure: the offered tool that `wanted` names (itself, or `…__wanted`).
pub fn resolve_tool(offered: &[String], wanted: &str) -> Option<String> {
    let suffix = format!("__{wanted}");
    offered
        .iter()
        .find(|n| *n == wanted || n.ends_with(&suffix))
        .cloned()
}

/// A content block of an answer, the tool resolved to its offered name.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

impl Block {
    fn stop_reason(&self) -> &'static str {
        match self {
            Block::Text(_) => "end_turn",
            Block::ToolUse { .. } => "tool_use",
        }
    }

    fn whole(&self) -> Value {
        match self {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }
}

/// Pure: `text` cut into at most `n` pieces on character boundaries (at
/// least one piece, empty for an empty text), as a stream would send it.
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Pure: the SSE events (name, data) of a streamed answer with `block`.
pub fn events(id: &str, model: &str, block: &Block) -> Vec<(&'static str, Value)> {
    let start = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }});
    let (opening, deltas): (Value, Vec<Value>) = match block {
        Block::Text(text) => (
            json!({"type": "text", "text": ""}),
            pieces(text, 3)
                .into_iter()
                .map(|p| json!({"type": "text_delta", "text": p}))
                .collect(),
        ),
        Block::ToolUse { id, name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            pieces(&input.to_string(), 3)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect(),
        ),
    };
    let mut out = vec![
        ("message_start", start),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": opening}),
        ),
    ];
    out.extend(deltas.into_iter().map(|delta| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        )
    }));
    out.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    out.push((
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": block.stop_reason(), "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
    ));
    out.push(("message_stop", json!({"type": "message_stop"})));
    out
}

/// Pure: one SSE event on the wire.
pub fn frame(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Pure: the whole (non-streamed) message with `block`.
pub fn message(id: &str, model: &str, block: &Block) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": [block.whole()], "stop_reason": block.stop_reason(),
        "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1},
    })
}

/// Pure: the block that answers a turn, given the tools the request offers.
pub fn answer(turn: &Turn, offered: &[String], n: usize) -> Result<Block, String> {
    match turn {
        Turn::Text(text) => Ok(Block::Text(text.clone())),
        Turn::Tool { name, input } => match resolve_tool(offered, name) {
            Some(resolved) => Ok(Block::ToolUse {
                id: format!("toolu_{n:04}"),
                name: resolved,
                input: input.clone(),
            }),
            None => Err(format!(
                "the script calls {name}, and the request offers only {offered:?}"
            )),
        },
    }
}

/// What a side request (or a turn past the script's end) is answered.
const SIDE_TEXT: &str = "ok";

/// The scripted Anthropic Messages API, serving until dropped.
pub struct Anthropic {
    server: Server<Turn>,
}

impl Anthropic {
    /// Starts serving on a free port of 127.0.0.1 with `script`.
    pub fn start(script: Vec<Turn>) -> anyhow::Result<Anthropic> {
        Ok(Anthropic {
            server: Server::start("anthropic-model", script, reply)?,
        })
    }

    /// Starts serving on a free port of `ip`, an address of this host: the
    /// e2e node's Pods reach its pod network's gateway, and nothing beyond
    /// this machine reaches that bridge address.
    pub fn start_on(ip: std::net::IpAddr, script: Vec<Turn>) -> anyhow::Result<Anthropic> {
        Ok(Anthropic {
            server: Server::start_on("anthropic-model", ip, script, reply)?,
        })
    }

    /// `http://<ip>:<port>`, the CLI's `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    /// Replaces what is left of the script (the next session's turns) and
    /// clears the log.
    pub fn play(&self, script: Vec<Turn>) {
        self.server.play(script);
    }

    /// Every request received since the start or the last [`play`](Self::play).
    pub fn log(&self) -> Vec<Logged> {
        self.server.log()
    }

    /// The agent turns of [`log`](Self::log), in order.
    pub fn turns(&self) -> Vec<Logged> {
        self.log().into_iter().filter(Logged::is_turn).collect()
    }

    /// The turns of the script not played yet.
    pub fn left(&self) -> usize {
        self.server.left()
    }

    /// What went wrong while serving (empty when nothing did).
    pub fn faults(&self) -> Vec<String> {
        self.server.faults()
    }
}

/// The answer to one request: a token count, the next turn of the script
/// for an agent turn (streamed or whole), [`SIDE_TEXT`] for a side
/// request, 404 for any other path.
fn reply(request: &Logged, script: &mut Script<Turn>) -> Reply {
    if request.is_post_to("/v1/messages/count_tokens") {
        let tokens = request.body.to_string().len().div_ceil(4);
        return Reply::json(&json!({"input_tokens": tokens}));
    }
    if !request.is_post_to(MESSAGES) {
        return Reply::json_with(
            StatusCode::NOT_FOUND,
            &json!({"type": "error", "error": {"type": "not_found_error", "message": "not scripted"}}),
        );
    }
    let model = request.body["model"].as_str().unwrap_or("scripted");
    let offered = request.tools();
    let n = script.answer_number();
    let next = if request.is_turn() {
        script.next_turn()
    } else {
        None
    };
    let block = match next.map(|t| answer(&t, &offered, n)) {
        Some(Ok(block)) => block,
        Some(Err(fault)) => {
            script.fault(fault);
            Block::Text(SIDE_TEXT.to_owned())
        }
        None => Block::Text(SIDE_TEXT.to_owned()),
    };
    let id = format!("msg_{n:04}");
    if request.body["stream"] != json!(true) {
        return Reply::json(&message(&id, model, &block));
    }
    Reply::sse(
        events(&id, model, &block)
            .iter()
            .map(|(name, data)| frame(name, data))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, path: &str, body: Value) -> Logged {
        Logged {
            method: method.into(),
            path: path.into(),
            body,
        }
    }

    #[test]
    fn each_request_gets_its_answer_and_only_turns_play_the_script() {
        let tools = json!([{"name": "mcp__s__write_handoff"}]);
        let turn =
            |stream: bool| json!({"model": "m", "stream": stream, "tools": tools, "messages": []});
        // (request, status, content type, what the body holds, turns left,
        // faults): the fault is the script's call of a tool not offered,
        // answered with the side text.
        let cases = [
            (
                request("POST", "/v1/messages/count_tokens", json!({"a": "bcd"})),
                200,
                "application/json",
                "input_tokens",
                2,
                0,
            ),
            (
                request("GET", "/v1/models", Value::Null),
                404,
                "application/json",
                "not_found_error",
                2,
                0,
            ),
            (
                request(
                    "POST",
                    "/v1/messages",
                    json!({"model": "m", "messages": []}),
                ),
                200,
                "application/json",
                "\"text\":\"ok\"",
                2,
                0,
            ),
            (
                request("POST", "/v1/messages?beta=true", turn(true)),
                200,
                "text/event-stream",
                "mcp__s__write_handoff",
                1,
                0,
            ),
            (
                request("POST", "/v1/messages", turn(false)),
                200,
                "application/json",
                "\"text\":\"ok\"",
                0,
                1,
            ),
            (
                request("POST", "/v1/messages", turn(true)),
                200,
                "text/event-stream",
                "text_delta",
                0,
                1,
            ),
        ];
        let mut script = Script::new(vec![
            Turn::tool("write_handoff", json!({"handoff_key": "k"})),
            Turn::tool("get_handoff", json!({})),
        ]);
        for (request, status, content_type, holds, left, faults) in cases {
            let got = reply(&request, &mut script);
            let what = format!("{} {}", request.method, request.path);
            assert_eq!(got.status.as_u16(), status, "{what}");
            assert_eq!(got.content_type, content_type, "{what}");
            assert!(got.body.contains(holds), "{what}: {}", got.body);
            let (turns_left, found) = script.state();
            assert_eq!((turns_left, found.len()), (left, faults), "{what}");
        }
    }

    #[test]
    fn pieces_cut_on_character_boundaries() {
        let cases: [(&str, usize, &[&str]); 5] = [
            ("", 3, &[""]),
            ("abc", 3, &["a", "b", "c"]),
            ("abcd", 3, &["ab", "cd"]),
            ("é€x", 2, &["é€", "x"]),
            ("ab", 0, &["ab"]),
        ];
        for (text, n, want) in cases {
            assert_eq!(pieces(text, n), want, "{text:?} in {n}");
        }
    }

    #[test]
    fn a_frame_is_an_event_line_a_data_line_and_a_blank_line() {
        assert_eq!(
            frame("message_stop", &json!({"type": "message_stop"})),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
    }

    #[test]
    fn tools_resolve_by_their_mcp_name() {
        let offered = vec![
            "Read".to_owned(),
            "mcp__plugin_handoff_handoff__write_handoff".to_owned(),
        ];
        let cases = [
            (
                "write_handoff",
                Some("mcp__plugin_handoff_handoff__write_handoff"),
            ),
            ("Read", Some("Read")),
            ("get_handoff", None),
            ("handoff", None),
        ];
        for (wanted, want) in cases {
            assert_eq!(resolve_tool(&offered, wanted).as_deref(), want, "{wanted}");
        }
    }

    #[test]
    fn a_text_answer_streams_in_order_and_ends_the_turn() {
        let got = events("msg_1", "m", &Block::Text("hello".into()));
        let names: Vec<_> = got.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let text: String = got
            .iter()
            .filter_map(|(_, d)| d["delta"]["text"].as_str())
            .collect();
        assert_eq!(text, "hello");
        assert_eq!(got[6].1["delta"]["stop_reason"], "end_turn");
        assert_eq!(got[0].1["message"]["id"], "msg_1");
    }

    #[test]
    fn a_tool_input_streams_as_json_deltas_that_join_to_the_input() {
        let input = json!({"handoff_key": "k", "body": "## State\néé"});
        let block = Block::ToolUse {
            id: "toolu_1".into(),
            name: "mcp__h__write_handoff".into(),
            input: input.clone(),
        };
        let got = events("msg_2", "m", &block);
        assert_eq!(got[1].1["content_block"]["type"], "tool_use");
        assert_eq!(got[1].1["content_block"]["name"], "mcp__h__write_handoff");
        assert_eq!(got[1].1["content_block"]["input"], json!({}));
        let joined: String = got
            .iter()
            .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect();
        let parsed: Value = serde_json::from_str(&joined).unwrap();
        assert_eq!(parsed, input);
        let last = &got[got.len() - 2].1;
        assert_eq!(last["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn answers_resolve_tools_or_say_what_was_offered() {
        let offered = vec!["mcp__s__get_handoff".to_owned()];
        let cases = [
            (Turn::text("hi"), Ok(Block::Text("hi".into()))),
            (
                Turn::tool("get_handoff", json!({"handoff_key": "k"})),
                Ok(Block::ToolUse {
                    id: "toolu_0007".into(),
                    name: "mcp__s__get_handoff".into(),
                    input: json!({"handoff_key": "k"}),
                }),
            ),
        ];
        for (turn, want) in cases {
            assert_eq!(answer(&turn, &offered, 7), want);
        }
        let err = answer(&Turn::tool("write_handoff", json!({})), &offered, 1).unwrap_err();
        assert!(err.contains("mcp__s__get_handoff"), "{err}");
    }

    #[test]
    fn a_logged_request_gives_its_texts_and_tool_uses() {
        let logged = Logged {
            method: "POST".into(),
            path: "/v1/messages?beta=true".into(),
            body: json!({
                "system": [{"type": "text", "text": "sys"}],
                "tools": [{"name": "t"}],
                "messages": [
                    {"role": "user", "content": "hello"},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "name": "t", "input": {"a": 1}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "content": [{"type": "text", "text": "res"}]}]},
                ],
            }),
        };
        assert!(logged.is_turn());
        assert_eq!(logged.text(), "sys\nhello\nres");
        assert_eq!(logged.tool_uses(), vec![("t".to_owned(), json!({"a": 1}))]);
        let side = Logged {
            body: json!({"messages": []}),
            ..logged
        };
        assert!(!side.is_turn());
    }
}
