//! A scripted Gemini API (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`)
//! for the Gemini CLI, which reaches it through `GOOGLE_GEMINI_BASE_URL`.
//!
//! Why scripted: the agents tier runs the real `gemini` with no network
//! and no Google account, so the model is a list of [`Turn`]s the test
//! writes. Every request is logged (method, path, JSON body): what the
//! model saw (the SessionStart context in the prompt, the answers to its
//! calls, the AfterAgent hook's reason as a new user turn) is then an
//! assertion like any other. One streamed request plays the next turn;
//! anything else is logged and answered 404 (Gemini CLI 0.61 with `-m`
//! and usage statistics off asks for nothing else).
//!
//! The wire shape is what Gemini CLI 0.61 accepts: one server-sent event,
//! `data: <GenerateContentResponse>` and a blank line (CRLF, as Google's
//! servers frame it), whose one candidate ends with `finishReason: STOP`
//! and carries `usageMetadata`, for a text or a function-call answer
//! alike. MCP tools reach the model as `mcp_<server>_<tool>` function
//! declarations; a scripted call of a function the request does not
//! declare is a fault ([`Gemini::faults`]), answered with a text naming it.
//!
//! The framing and the request readers are pure functions with unit tests;
//! the server is the shared shell ([`super::server`]).

use axum::http::StatusCode;
use serde_json::{Value, json};

pub use super::server::Logged;
use super::server::{Reply, Script, Server};

/// The model name the tier passes with `-m` (the server answers any).
pub const MODEL: &str = "gemini-2.5-flash";

/// One answer of the scripted model.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// A model message with this text; the agent's turn ends there.
    Text(String),
    /// A function call; the CLI runs it and asks again with its response.
    Call {
        /// The function's name as declared (`mcp_handoff_write_handoff`).
        name: String,
        /// The arguments (a JSON object).
        args: Value,
    },
    /// The request fails (`400 INVALID_ARGUMENT`, which the CLI does not
    /// retry): the agent's turn ends in an error.
    Fail,
}

impl Turn {
    /// A model message.
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    /// A call of `tool` of the MCP server named `server` in the settings.
    pub fn mcp(server: &str, tool: &str, args: Value) -> Self {
        Self::Call {
            name: format!("mcp_{server}_{tool}"),
            args,
        }
    }
}

/// The answer to a turn past the script's end: visible in the CLI's output.
pub const SCRIPT_ENDED: &str = "(the scripted model has no more turns)";

/// One SSE frame: the JSON on one `data:` line, CRLF-terminated.
pub fn frame(chunk: &Value) -> String {
    format!("data: {chunk}\r\n\r\n")
}

/// The one chunk answering `turn`: a finished candidate with its part,
/// and token counts (for [`Turn::Fail`], the error body instead).
pub fn chunk(turn: &Turn) -> Value {
    let part = match turn {
        Turn::Text(text) => json!({"text": text}),
        Turn::Call { name, args } => json!({"functionCall": {"name": name, "args": args}}),
        Turn::Fail => return failure(),
    };
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [part]},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
        "modelVersion": MODEL,
    })
}

/// The error body of a failed request, as Google's APIs shape it.
pub fn failure() -> Value {
    json!({"error": {
        "code": 400,
        "message": "the scripted model fails this request",
        "status": "INVALID_ARGUMENT",
    }})
}

/// The SSE body answering `turn` (a failed turn is not streamed: see
/// [`reply`]).
pub fn stream(turn: &Turn) -> String {
    frame(&chunk(turn))
}

/// Whether `request` asks the model (`POST …:streamGenerateContent`).
fn is_model_request(request: &Logged) -> bool {
    request.method == "POST"
        && request
            .path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with(":streamGenerateContent"))
}

/// The function names a model request declares, in order.
pub fn declared(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
        .filter_map(|d| d["name"].as_str().map(str::to_owned))
        .collect()
}

/// The last text part of the request's last content: the newest user
/// words (the prompt, with a SessionStart context as `<hook_context>`
/// before it, or an AfterAgent hook's reason). The first content's other
/// part is the CLI's own `<session_context>`.
pub fn last_text(request: &Value) -> String {
    request["contents"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|last| texts(last).last().map(|t| (*t).to_owned()))
        .unwrap_or_default()
}

/// The text parts of one content, in order.
fn texts(content: &Value) -> Vec<&str> {
    content["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// Every user text of the request, in order (each content's parts).
pub fn user_texts(request: &Value) -> Vec<String> {
    request["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["role"] == "user")
        .flat_map(|c| texts(c).into_iter().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// The function responses the request carries (answers to the model's
/// calls), in order: `(name, response)`.
pub fn function_responses(request: &Value) -> Vec<(String, Value)> {
    request["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .filter_map(|p| {
            let r = p.get("functionResponse")?;
            Some((r["name"].as_str()?.to_owned(), r["response"].clone()))
        })
        .collect()
}

/// The answer to one request: the next turn of the script, streamed, for
/// a model request ([`SCRIPT_ENDED`] past its end; a fault and a text for
/// a call of an undeclared function; a 400 for [`Turn::Fail`]); 404 for
/// anything else.
fn reply(request: &Logged, script: &mut Script<Turn>) -> Reply {
    if !is_model_request(request) {
        return Reply::json_with(
            StatusCode::NOT_FOUND,
            &json!({"error": {"code": 404, "message": "not scripted", "status": "NOT_FOUND"}}),
        );
    }
    script.answer_number();
    let turn = match script.next_turn() {
        None => Turn::text(SCRIPT_ENDED),
        Some(Turn::Call { name, .. }) if !declared(&request.body).contains(&name) => {
            let fault = format!("the script calls `{name}`, which the request does not declare");
            script.fault(fault.clone());
            Turn::Text(fault)
        }
        Some(Turn::Fail) => return Reply::json_with(StatusCode::BAD_REQUEST, &failure()),
        Some(turn) => turn,
    };
    Reply::sse(stream(&turn))
}

/// The server: on a free loopback port, on its own thread, until dropped.
pub struct Gemini {
    server: Server<Turn>,
}

impl Gemini {
    /// Starts a server playing `script`.
    pub fn start(script: Vec<Turn>) -> anyhow::Result<Self> {
        Ok(Self {
            server: Server::start("gemini-model", script, reply)?,
        })
    }

    /// `http://127.0.0.1:<port>`: `GOOGLE_GEMINI_BASE_URL`.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    /// Every request so far, in order.
    pub fn log(&self) -> Vec<Logged> {
        self.server.log()
    }

    /// The bodies of the model requests, in order.
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

    /// The turns of the script not played yet.
    pub fn left(&self) -> usize {
        self.server.left()
    }

    /// What went wrong while serving (empty when nothing did).
    pub fn faults(&self) -> Vec<String> {
        self.server.faults()
    }
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

    const STREAM: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";

    fn declaring(names: &[&str]) -> Value {
        let declarations: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        json!({"tools": [{"functionDeclarations": declarations}]})
    }

    #[test]
    fn model_requests_play_the_script_and_the_rest_get_404() {
        let body = declaring(&["mcp_handoff_get_handoff"]);
        // (request, status, content type, what the body holds, turns left, faults)
        let cases = [
            (
                request("GET", "/v1beta/models", Value::Null),
                404,
                "application/json",
                "not scripted",
                4,
                0,
            ),
            (
                request("POST", STREAM, body.clone()),
                200,
                "text/event-stream",
                "\"text\":\"hi\"",
                3,
                0,
            ),
            (
                request("POST", STREAM, body.clone()),
                200,
                "text/event-stream",
                "\"functionCall\":{\"args\":{\"handoff_key\":\"k\"},\"name\":\"mcp_handoff_get_handoff\"}",
                2,
                0,
            ),
            (
                request("POST", STREAM, body.clone()),
                200,
                "text/event-stream",
                "which the request does not declare",
                1,
                1,
            ),
            (
                request(
                    "POST",
                    "/v1beta/models/gemini-2.5-flash:generateContent",
                    body.clone(),
                ),
                404,
                "application/json",
                "NOT_FOUND",
                1,
                1,
            ),
            (
                request("POST", STREAM, body.clone()),
                400,
                "application/json",
                "INVALID_ARGUMENT",
                0,
                1,
            ),
            (
                request("POST", STREAM, body),
                200,
                "text/event-stream",
                "no more turns",
                0,
                1,
            ),
        ];
        let mut script = Script::new(vec![
            Turn::text("hi"),
            Turn::mcp("handoff", "get_handoff", json!({"handoff_key": "k"})),
            Turn::mcp("handoff", "write_handoff", json!({})),
            Turn::Fail,
        ]);
        for (i, (request, status, content_type, holds, left, faults)) in
            cases.into_iter().enumerate()
        {
            let got = reply(&request, &mut script);
            assert_eq!(got.status.as_u16(), status, "case {i}");
            assert_eq!(got.content_type, content_type, "case {i}");
            assert!(got.body.contains(holds), "case {i}: {}", got.body);
            assert_eq!(script.state().0, left, "case {i}");
            assert_eq!(script.state().1.len(), faults, "case {i}");
        }
    }

    #[test]
    fn a_turn_is_one_finished_crlf_framed_event() {
        let cases = [
            (Turn::text("done."), json!({"text": "done."})),
            (
                Turn::mcp("handoff", "write_handoff", json!({"body": "b"})),
                json!({"functionCall": {"name": "mcp_handoff_write_handoff", "args": {"body": "b"}}}),
            ),
        ];
        for (turn, part) in cases {
            let body = stream(&turn);
            assert!(body.starts_with("data: {"), "{body}");
            assert!(body.ends_with("}\r\n\r\n"), "{body}");
            assert_eq!(body.matches("data: ").count(), 1, "{body}");
            let chunk: Value =
                serde_json::from_str(body.trim_start_matches("data: ").trim_end()).expect("JSON");
            let candidate = &chunk["candidates"][0];
            assert_eq!(candidate["finishReason"], "STOP");
            assert_eq!(candidate["content"]["role"], "model");
            assert_eq!(candidate["content"]["parts"], json!([part]));
            assert_eq!(chunk["usageMetadata"]["totalTokenCount"], 12);
        }
    }

    #[test]
    fn requests_are_read_for_what_the_model_saw() {
        let body = json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "<session_context>tree</session_context>"},
                    {"text": "<hook_context>the handoff</hook_context>\n\ngo on"},
                ]},
                {"role": "model", "parts": [{"functionCall": {"name": "mcp_handoff_write_handoff", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {
                    "name": "mcp_handoff_write_handoff", "id": "x",
                    "response": {"output": "written"}}}]},
                {"role": "model", "parts": [{"text": "done."}]},
                {"role": "user", "parts": [{"text": "write the handoff"}]},
            ],
            "tools": [
                {"functionDeclarations": [{"name": "read_file"}, {"name": "mcp_handoff_get_handoff"}]},
                {"functionDeclarations": [{"name": "mcp_handoff_write_handoff"}]},
            ],
        });
        assert_eq!(
            declared(&body),
            [
                "read_file",
                "mcp_handoff_get_handoff",
                "mcp_handoff_write_handoff"
            ]
        );
        assert_eq!(last_text(&body), "write the handoff");
        let first = json!({"contents": [body["contents"][0].clone()]});
        assert_eq!(
            last_text(&first),
            "<hook_context>the handoff</hook_context>\n\ngo on"
        );
        assert_eq!(
            user_texts(&body),
            [
                "<session_context>tree</session_context>",
                "<hook_context>the handoff</hook_context>\n\ngo on",
                "write the handoff",
            ]
        );
        assert_eq!(
            function_responses(&body),
            [(
                "mcp_handoff_write_handoff".to_owned(),
                json!({"output": "written"})
            )]
        );
        let empty = json!({});
        assert!(declared(&empty).is_empty());
        assert_eq!(last_text(&empty), "");
        assert!(user_texts(&empty).is_empty());
        assert!(function_responses(&empty).is_empty());
    }
}
