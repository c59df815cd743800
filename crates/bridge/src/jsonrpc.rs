//! Which incoming JSON-RPC frames rmcp may see, and the one answer to each
//! frame it may not (pure; the stdio guard and the HTTP layer share it).
//!
//! rmcp answers a frame it cannot read as an MCP message with `-32600` and
//! `id` null at best (stdio), or with a plain-text `415` (HTTP); a client
//! waiting for its request's id then waits forever. So every frame is
//! judged here first, with rmcp's own message type
//! ([`ClientJsonRpcMessage`]) as the test of what rmcp reads, and a frame
//! it would not read gets exactly one JSON-RPC answer:
//!
//! - not UTF-8 or not JSON: `-32700` (parse error), `id` null;
//! - JSON that is not an object (a scalar, or an array: MCP has no
//!   batches): `-32600`, `id` null;
//! - an object whose `id` is not a string or an integer that fits 64 bits:
//!   `-32600`, `id` null (the id cannot be answered under);
//! - an object with a usable `id` but no string `method`, another
//!   `jsonrpc` than `"2.0"`, or a `result`/`error` beside the method:
//!   `-32600` under its id;
//! - a request whose `params` are not an object, or do not fit its method:
//!   `-32602` (invalid params) under its id;
//! - a notification (a string `method`, no `id`) gets no answer, as
//!   JSON-RPC says, even when its params are wrong ([`Verdict::Drop`]);
//!   any other object without an id: `-32600`, `id` null.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// What to do with one frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Blank: nothing to do (stdio skips blank lines).
    Blank,
    /// rmcp reads it: pass it on unchanged.
    Forward,
    /// A notification rmcp cannot read: dropped, never answered.
    Drop,
    /// rmcp cannot read it: this JSON-RPC error is its one answer.
    Answer(Refusal),
}

/// The JSON-RPC error answering a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The request's id, or null when it has none that can be answered.
    pub(crate) id: Value,
    /// `-32700`, `-32600`, `-32602` or `-32000` (busy).
    pub(crate) code: i64,
    /// What was wrong, for the client.
    pub(crate) message: String,
}

impl Refusal {
    fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            code,
            message: message.into(),
        }
    }

    /// The error message, as one line of JSON.
    pub(crate) fn to_line(&self) -> String {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}})
            .to_string()
    }
}

/// Parse error: not UTF-8 or not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// Invalid Request: JSON, but not a JSON-RPC request.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// Invalid params: a request whose params do not fit its method.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// Server error (the implementation-defined range): the bridge is busy for
/// this caller (over its fair share, or full); retriable.
pub(crate) const SERVER_BUSY: i64 = -32000;

/// Judges one frame (a stdio line without its line ending, or an HTTP body).
pub(crate) fn judge(frame: &[u8]) -> Verdict {
    let text = match std::str::from_utf8(frame) {
        Ok(text) => text,
        Err(e) => {
            return answer(
                Value::Null,
                PARSE_ERROR,
                format!("Parse error: the message is not UTF-8 ({e})"),
            );
        }
    };
    if text.trim().is_empty() {
        return Verdict::Blank;
    }
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(e) => return answer(Value::Null, PARSE_ERROR, format!("Parse error: {e}")),
    };
    let Value::Object(object) = &value else {
        let what = if value.is_array() {
            "a JSON-RPC message is one JSON object (MCP has no batches), not an array"
        } else {
            "a JSON-RPC message is a JSON object"
        };
        return answer(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: {what}"),
        );
    };
    if serde_json::from_str::<ClientJsonRpcMessage>(text).is_ok() {
        return Verdict::Forward;
    }
    let method = object.get("method");
    let Some(id) = object.get("id") else {
        return match method {
            Some(Value::String(_)) => Verdict::Drop,
            _ => answer(
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request: neither a request (an id and a method) nor a notification (a method)",
            ),
        };
    };
    if !usable_id(id) {
        return answer(
            Value::Null,
            INVALID_REQUEST,
            format!(
                "Invalid Request: the id must be a string or an integer of 64 bits, got {}",
                kind(id)
            ),
        );
    }
    let id = id.clone();
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return answer(
            id,
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\"",
        );
    }
    let Some(Value::String(method)) = method else {
        return answer(
            id,
            INVALID_REQUEST,
            "Invalid Request: a request needs a string method",
        );
    };
    if object.contains_key("result") || object.contains_key("error") {
        return answer(
            id,
            INVALID_REQUEST,
            "Invalid Request: a request carries no result or error",
        );
    }
    match object.get("params") {
        Some(params) if !params.is_object() => answer(
            id,
            INVALID_PARAMS,
            format!(
                "Invalid params: the params of {method} must be an object, got {}",
                kind(params)
            ),
        ),
        _ => answer(
            id,
            INVALID_PARAMS,
            format!("Invalid params: the params do not fit the method {method}"),
        ),
    }
}

fn answer(id: Value, code: i64, message: impl Into<String>) -> Verdict {
    Verdict::Answer(Refusal::new(id, code, message))
}

/// How a frame rmcp reads bears on the requests in flight (stdio tracks
/// them: see [`crate::stdio`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flight {
    /// A request with this id (as JSON text).
    Request(Value),
    /// A cancellation of the request with this id.
    Cancels(Value),
    /// Anything else.
    Other,
}

/// Pure: what `frame` (one rmcp reads) starts or ends.
pub(crate) fn flight(frame: &[u8]) -> Flight {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(frame) else {
        return Flight::Other;
    };
    match (
        object.get("id"),
        object.get("method").and_then(Value::as_str),
    ) {
        (Some(id), Some(_)) if usable_id(id) => Flight::Request(id.clone()),
        (None, Some("notifications/cancelled")) => object
            .get("params")
            .and_then(|p| p.get("requestId"))
            .filter(|id| usable_id(id))
            .map_or(Flight::Other, |id| Flight::Cancels(id.clone())),
        _ => Flight::Other,
    }
}

/// Pure: the id an outgoing line answers (a result or an error), if any.
pub(crate) fn answered(line: &str) -> Option<Value> {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
        return None;
    };
    if !object.contains_key("result") && !object.contains_key("error") {
        return None;
    }
    object.get("id").filter(|id| usable_id(id)).cloned()
}

/// The id of a frame if it has one an answer can carry (for refusals made
/// elsewhere, e.g. HTTP's).
pub(crate) fn id_of(frame: &[u8]) -> Value {
    serde_json::from_slice::<Value>(frame)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .filter(usable_id)
        .unwrap_or(Value::Null)
}

/// A string, or an integer rmcp's `RequestId` holds.
fn usable_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() => "an integer",
        Value::Number(_) => "a number out of range or with a fraction",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id and code a frame is refused with, if it is.
    type Refused = Option<(Value, i64)>;

    #[test]
    fn every_frame_is_forwarded_dropped_or_answered_once() {
        use Verdict::{Blank, Drop, Forward};
        let refused = |id: Value, code: i64| Some((id, code));
        // (frame, verdict: None for Blank/Forward/Drop given beside, else (id, code))
        let cases: Vec<(&[u8], Option<Verdict>, Refused)> = vec![
            (br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, Some(Forward), None),
            (br#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}"#, Some(Forward), None),
            (br#"{"jsonrpc":"2.0","id":2,"method":"x-unknown","params":{"a":1}}"#, Some(Forward), None),
            (br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nobody"}}"#, Some(Forward), None),
            (b"", Some(Blank), None),
            (b" \t\r", Some(Blank), None),
            (br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":""}"#, Some(Drop), None),
            (br#"{"jsonrpc":"2.0","method":"ping","params":[null]}"#, Some(Drop), None),
            (b"\xff\xfe", None, refused(Value::Null, PARSE_ERROR)),
            (b"{garbage", None, refused(Value::Null, PARSE_ERROR)),
            (b"\0", None, refused(Value::Null, PARSE_ERROR)),
            (b"42", None, refused(Value::Null, INVALID_REQUEST)),
            (br#""ping""#, None, refused(Value::Null, INVALID_REQUEST)),
            (b"[]", None, refused(Value::Null, INVALID_REQUEST)),
            (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, None, refused(Value::Null, INVALID_REQUEST)),
            (b"{}", None, refused(Value::Null, INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","method":5}"#, None, refused(Value::Null, INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, None, refused(Value::Null, INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#, None, refused(Value::Null, INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, None, refused(Value::Null, INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, None, refused(Value::Null, INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":7}"#, None, refused(json!(7), INVALID_REQUEST)),
            (br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#, None, refused(json!(7), INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":7,"method":"ping","result":{}}"#, None, refused(json!(7), INVALID_REQUEST)),
            (br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":""}"#, None, refused(json!(1), INVALID_PARAMS)),
            (br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":-1}"#, None, refused(json!(1), INVALID_PARAMS)),
            (br#"{"jsonrpc":"2.0","id":"p","method":"prompts/list","params":[null]}"#, None, refused(json!("p"), INVALID_PARAMS)),
            (br#"{"jsonrpc":"2.0","id":1,"method":"resources/list","params":"x"}"#, None, refused(json!(1), INVALID_PARAMS)),
            (br#"{"jsonrpc":"2.0","id":1,"method":"x-unknown","params":[1,2]}"#, None, refused(json!(1), INVALID_PARAMS)),
            (br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"get_handoff"}"#, None, refused(json!(1), INVALID_PARAMS)),
        ];
        for (frame, verdict, refusal) in cases {
            let shown = String::from_utf8_lossy(frame);
            let got = judge(frame);
            match (verdict, refusal) {
                (Some(want), None) => assert_eq!(got, want, "{shown}"),
                (None, Some((id, code))) => match got {
                    Verdict::Answer(r) => {
                        assert_eq!((r.id, r.code), (id, code), "{shown}: {}", r.message)
                    }
                    other => panic!("{shown}: {other:?}"),
                },
                _ => unreachable!("a case names one outcome"),
            }
        }
    }

    #[test]
    fn refusals_say_what_was_wrong_and_are_json_rpc_errors() {
        let Verdict::Answer(refusal) =
            judge(br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":""}"#)
        else {
            panic!("answered");
        };
        assert_eq!(
            refusal.message,
            "Invalid params: the params of ping must be an object, got a string"
        );
        let line: Value = serde_json::from_str(&refusal.to_line()).expect("JSON");
        assert_eq!(
            line,
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602,
                "message": "Invalid params: the params of ping must be an object, got a string"}})
        );
    }

    #[test]
    fn requests_cancellations_and_answers_are_told_apart() {
        for (frame, want) in [
            (&br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#[..], Flight::Request(json!(1))),
            (br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#, Flight::Cancels(json!("a"))),
            (br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}"#, Flight::Other),
            (br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, Flight::Other),
            (br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, Flight::Other),
        ] {
            assert_eq!(flight(frame), want, "{}", String::from_utf8_lossy(frame));
        }
        for (line, want) in [
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, Some(json!(1))),
            (
                r#"{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}"#,
                Some(json!("x")),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage"}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
                None,
            ),
        ] {
            assert_eq!(answered(line), want, "{line}");
        }
    }

    #[test]
    fn ids_are_found_when_usable() {
        for (frame, id) in [
            (&br#"{"id":"a"}"#[..], json!("a")),
            (br#"{"id":4}"#, json!(4)),
            (br#"{"id":4.5}"#, Value::Null),
            (br#"{"id":null}"#, Value::Null),
            (b"{oops", Value::Null),
            (b"[1]", Value::Null),
        ] {
            assert_eq!(id_of(frame), id, "{}", String::from_utf8_lossy(frame));
        }
    }
}
