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
//! `response.completed` with the output and usage. MCP tools reach the model as a
//! `namespace` tool (`mcp__<server>`) holding the server's functions, so a
//! call names both (`namespace`, `name`), as Codex presents them.
//!
//! The framing is pure functions with unit tests; the server is the shared
//! shell ([`super::server`]).

use serde_json::{Value, json};

pub use super::server::Logged;
use super::server::{Reply, Script, Server};

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
    /// The response fails (`response.failed`, a server error): the CLI's
    /// turn ends in an error.
    Fail,
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

/// The answer to a turn past the script's end: visible in the CLI's output.
pub const SCRIPT_ENDED: &str = "(the scripted model has no more turns)";

/// One SSE frame: `event: <type>` and the JSON on one `data:` line.
pub fn frame(event: &Value) -> String {
    let kind = event["type"].as_str().unwrap_or("message");
    format!("event: {kind}\ndata: {event}\n\n")
}

/// The output item of `turn`, the `n`-th answer of the server (none for
/// a failed response).
pub fn item(turn: &Turn, n: usize) -> Option<Value> {
    Some(match turn {
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
        Turn::Fail => return None,
    })
}

/// The events of the `n`-th answer, playing `turn`.
pub fn events(turn: &Turn, n: usize) -> Vec<Value> {
    let id = format!("resp_{n}");
    let Some(item) = item(turn, n) else {
        return vec![
            json!({"type": "response.created", "response": {"id": id}}),
            json!({"type": "response.failed", "response": {"id": id, "status": "failed",
                "error": {"code": "server_error", "message": "the scripted model fails this response"}}}),
        ];
    };
    vec![
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        // The whole output again, as the API sends it: Copilot CLI reads the
        // message from here, Codex from the items.
        json!({"type": "response.completed", "response": {"id": id, "output": [item], "usage": {
            "input_tokens": 1, "input_tokens_details": null,
            "output_tokens": 1, "output_tokens_details": null, "total_tokens": 2}}}),
    ]
}

/// The SSE body of the `n`-th answer.
pub fn stream(turn: &Turn, n: usize) -> String {
    events(turn, n).iter().map(frame).collect()
}

/// Whether `request` asks the model (`POST …/responses`).
fn is_model_request(request: &Logged) -> bool {
    request.method == "POST" && request.path.ends_with("/responses")
}

/// The answer to one request: the next turn of the script, streamed, for
/// a model request ([`SCRIPT_ENDED`] past its end); `{}` for anything else.
fn reply(request: &Logged, script: &mut Script<Turn>) -> Reply {
    if !is_model_request(request) {
        return Reply::json(&json!({}));
    }
    let n = script.answer_number();
    let turn = script
        .next_turn()
        .unwrap_or_else(|| Turn::text(SCRIPT_ENDED));
    Reply::sse(stream(&turn, n))
}

/// The server: on a free loopback port, on its own thread, until dropped.
pub struct Responses {
    server: Server<Turn>,
}

impl Responses {
    /// Starts a server playing `script`.
    pub fn start(script: Vec<Turn>) -> anyhow::Result<Self> {
        Ok(Self {
            server: Server::start("responses-model", script, reply)?,
        })
    }

    /// `http://127.0.0.1:<port>/v1`: a `model_providers` entry's `base_url`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// Every request so far, in order.
    pub fn log(&self) -> Vec<Logged> {
        self.server.log()
    }

    /// The bodies of the model requests (`POST …/responses`), in order.
    pub fn model_requests(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(is_model_request)
            .map(|r| r.body)
            .collect()
    }

    /// Replaces the script (and restarts it) for the CLI's next session.
    pub fn play(&self, script: Vec<Turn>) {
        self.server.play(script);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_requests_play_the_script_and_the_rest_get_an_empty_object() {
        let request = |method: &str, path: &str| Logged {
            method: method.into(),
            path: path.into(),
            body: Value::Null,
        };
        // (request, content type, what the body holds, turns left)
        let cases = [
            (request("GET", "/v1/models"), "application/json", "{}", 1),
            (
                request("POST", "/v1/responses"),
                "text/event-stream",
                "\"text\":\"hi\"",
                0,
            ),
            (
                request("POST", "/v1/responses"),
                "text/event-stream",
                "no more turns",
                0,
            ),
            (request("POST", "/v1/other"), "application/json", "{}", 0),
        ];
        let mut script = Script::new(vec![Turn::text("hi")]);
        for (request, content_type, holds, left) in cases {
            let got = reply(&request, &mut script);
            assert_eq!(got.content_type, content_type, "{}", request.path);
            assert!(got.body.contains(holds), "{}: {}", request.path, got.body);
            assert_eq!(script.state().0, left, "{}", request.path);
        }
    }

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
            assert_eq!(item(&turn, 3).expect("an item")["type"], kind);
            assert_eq!(stream(&turn, 3).matches("\n\n").count(), 4);
        }
    }

    #[test]
    fn a_failed_turn_streams_created_then_failed() {
        let events = events(&Turn::Fail, 3);
        let types: Vec<_> = events.iter().map(|e| e["type"].clone()).collect();
        assert_eq!(types, [json!("response.created"), json!("response.failed")]);
        assert_eq!(events[1]["response"]["error"]["code"], "server_error");
        assert_eq!(item(&Turn::Fail, 3), None);
    }

    #[test]
    fn a_call_carries_its_namespace_and_string_arguments() {
        let call =
            item(&Turn::mcp("handoff", "get_handoff", json!({"key": "k"})), 2).expect("an item");
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
        )
        .expect("an item");
        assert!(plain.get("namespace").is_none());
    }
}
