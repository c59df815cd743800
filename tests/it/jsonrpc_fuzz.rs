//! A seeded fuzz of JSON-RPC frames against the real `handoff mcp` process,
//! over stdio and over HTTP: every request with a usable id (a string or a
//! 64-bit integer) gets exactly one answer carrying that id (a duplicate id
//! one per frame), every frame that is not a request or a notification
//! (not UTF-8, not JSON, not an object, an unusable id, no method) gets
//! one error with id null, a notification gets none (over HTTP: `202`
//! without a body, or `400` with an id-less error for one the server cannot
//! accept, as Streamable HTTP allows), and the process still serves a tool
//! call at the end.
//!
//! The frames: real and unknown methods with params of every JSON type,
//! deep nesting, raw bytes, huge numbers, duplicate ids, cancellations for
//! ids nobody used and valid calls in between. The generator is SplitMix64
//! on a seed printed at the start: [`DEFAULT_SEED`] unless `FUZZ_SEED`
//! (decimal or 0x-hex) names another. What each frame is due is judged
//! here by JSON-RPC's rules, not by the bridge's code.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common;
use handoff_testkit::rng::Fuzz;
use serde_json::{Value, json};

/// The seed CI runs.
const DEFAULT_SEED: u64 = 0x6a73_6f6e_7270_6321;
/// Frames per transport.
const FRAMES: usize = 400;
/// How long the test waits for due answers: a deadline for "eventually",
/// not a performance bound.
const PATIENCE: Duration = Duration::from_secs(120);

fn seed() -> u64 {
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        })
        .unwrap_or(DEFAULT_SEED);
    eprintln!("jsonrpc fuzz: seed {seed:#x} (FUZZ_SEED to vary)");
    seed
}

/// The characters the fuzz's text mixes in: quotes, backslash, NUL, ESC,
/// CR, tab, a line separator, non-Latin and emoji.
const ODD: &[char] = &[
    '"', '\\', '\0', '\u{1b}', '\r', '\t', '\u{2028}', 'é', '日', '😀',
];

/// Arrays (or objects) nested `depth` deep.
fn nested(rng: &mut Fuzz, depth: usize) -> String {
    let object = rng.below(2) == 0;
    let (open, close) = if object { ("{\"k\":", "}") } else { ("[", "]") };
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

/// What a frame is due, by JSON-RPC's rules.
#[derive(Debug, Clone, PartialEq)]
enum Due {
    /// One answer carrying this id.
    Id(Value),
    /// One error with id null.
    Null,
    /// Nothing (a notification).
    Nothing,
}

/// Judges `frame` as JSON-RPC 2.0 says (serde_json as the JSON parser).
fn due(frame: &[u8]) -> Due {
    let Ok(value) = serde_json::from_slice::<Value>(frame) else {
        return Due::Null;
    };
    let Some(object) = value.as_object() else {
        return Due::Null;
    };
    match (object.get("id"), object.get("method")) {
        (Some(id), _) if id.is_string() || id.as_i64().is_some() => Due::Id(id.clone()),
        (Some(_), _) => Due::Null,
        (None, Some(Value::String(_))) => Due::Nothing,
        (None, _) => Due::Null,
    }
}

const METHODS: [&str; 9] = [
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "completion/complete",
];

/// The `n`th frame (no line ending); `ids` holds the ids used so far.
fn frame(rng: &mut Fuzz, n: usize, ids: &mut Vec<String>) -> Vec<u8> {
    let mut id = if rng.below(2) == 0 {
        (5_000_000 + n).to_string()
    } else {
        Value::String(format!("{}#{n}", rng.text(6))).to_string()
    };
    if !ids.is_empty() && rng.below(12) == 0 {
        id = rng.pick(ids).clone();
    }
    ids.push(id.clone());
    let method = |rng: &mut Fuzz| {
        if rng.below(4) == 0 {
            Value::String(format!("x-fuzz/{}", rng.text(8))).to_string()
        } else {
            Value::String((*rng.pick(&METHODS)).to_owned()).to_string()
        }
    };
    let text = match rng.below(100) {
        // A valid call, between the odd ones.
        0..=14 => match rng.below(4) {
            0 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
            1 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{}}}}"#),
            2 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"get_handoff","arguments":{{"handoff_key":"fuzz-{}"}}}}}}"#,
                rng.below(3)
            ),
            _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"prompts/list"}}"#),
        },
        // A method, real or not, with params of any JSON type.
        15..=44 => {
            let params = rng.literal(3);
            let m = method(rng);
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{m},"params":{params}}}"#)
        }
        // A tool call with odd arguments.
        45..=52 => {
            let name = Value::String(
                rng.pick(&["get_handoff", "list_handoffs", "write_handoff", "nope"])
                    .to_string(),
            );
            let args = rng.literal(2);
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{name},"arguments":{args}}}}}"#
            )
        }
        // Deep nesting, sometimes past what a parser takes.
        53..=58 => {
            let depth = 20 + rng.below(300);
            let nested = nested(rng, depth);
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"k":{nested}}}}}"#)
        }
        // An id no request can carry (huge, fractional, of another type).
        59..=64 => {
            let bad = *rng.pick(&[
                "1e40",
                "123456789012345678901234567890",
                "1.5",
                "true",
                "null",
                "{}",
                "[1]",
            ]);
            format!(r#"{{"jsonrpc":"2.0","id":{bad},"method":"ping"}}"#)
        }
        // A cancellation for an id nobody used, or another notification.
        65..=74 => match rng.below(3) {
            0 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":"nobody-{n}"}}}}"#
            ),
            1 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}}"#,
                rng.literal(1)
            ),
            _ => {
                let m = method(rng);
                format!(
                    r#"{{"jsonrpc":"2.0","method":{m},"params":{}}}"#,
                    rng.literal(2)
                )
            }
        },
        // JSON that is no request: scalars, arrays, objects without a method.
        75..=84 => match rng.below(4) {
            0 => rng.literal(0),
            1 => format!("[{}]", rng.literal(2)),
            2 => rng.literal_object(2),
            _ => format!(r#"{{"jsonrpc":"2.0","method":{}}}"#, rng.literal(1)),
        },
        // A request cut short.
        85..=91 => {
            let whole = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{}}}"#,
                rng.literal_object(2)
            );
            let cut = 1 + rng.below(whole.len() - 1);
            return whole.as_bytes()[..cut].to_vec();
        }
        // Raw bytes, at least one never valid in UTF-8.
        _ => {
            let mut bytes: Vec<u8> = (0..1 + rng.below(48))
                .map(|_| rng.below(256) as u8)
                .map(|b| if b == b'\n' || b == b'\r' { b'?' } else { b })
                .collect();
            let at = rng.below(bytes.len());
            bytes[at] = 0xF8 + rng.below(8) as u8;
            return bytes;
        }
    };
    text.into_bytes()
}

/// `FRAMES` frames and what each is due.
fn frames(seed: u64) -> Vec<(Vec<u8>, Due)> {
    let mut rng = Fuzz::new(seed, ODD);
    let mut ids = Vec::new();
    let all: Vec<(Vec<u8>, Due)> = (0..FRAMES)
        .map(|n| {
            let frame = frame(&mut rng, n, &mut ids);
            let due = due(&frame);
            (frame, due)
        })
        .collect();
    let count = |f: &dyn Fn(&Due) -> bool| all.iter().filter(|(_, d)| f(d)).count();
    let (ids, nulls, silent) = (
        count(&|d| matches!(d, Due::Id(_))),
        count(&|d| *d == Due::Null),
        count(&|d| *d == Due::Nothing),
    );
    assert!(
        ids > FRAMES / 3 && nulls > FRAMES / 10 && silent > FRAMES / 20,
        "seed {seed:#x}: a lopsided mix ({ids} requests, {nulls} id-less, {silent} notifications)"
    );
    all
}

/// Tallies answers: by id (its JSON text), and those with id null.
#[derive(Default, Debug)]
struct Tally {
    by_id: HashMap<String, usize>,
    nulls: usize,
}

impl Tally {
    fn add(&mut self, answer: &Value) {
        match answer.get("id") {
            Some(id) if !id.is_null() => *self.by_id.entry(id.to_string()).or_default() += 1,
            _ => self.nulls += 1,
        }
    }
}

/// What was due and not answered once, as a message (empty when all was).
fn compare(seed: u64, frames: &[(Vec<u8>, Due)], got: &Tally) -> String {
    let mut due = Tally::default();
    for (_, d) in frames {
        match d {
            Due::Id(id) => *due.by_id.entry(id.to_string()).or_default() += 1,
            Due::Null => due.nulls += 1,
            Due::Nothing => {}
        }
    }
    let requests: usize = due.by_id.values().sum();
    let unanswered: usize = due
        .by_id
        .iter()
        .map(|(id, n)| n.saturating_sub(*got.by_id.get(id).unwrap_or(&0)))
        .sum();
    let extra: Vec<(&String, &usize)> = got
        .by_id
        .iter()
        .filter(|(id, n)| due.by_id.get(*id).is_none_or(|want| *n > want))
        .collect();
    if unanswered == 0 && extra.is_empty() && got.nulls == due.nulls {
        return String::new();
    }
    let missing: Vec<String> = frames
        .iter()
        .filter(|(_, d)| match d {
            Due::Id(id) => !got.by_id.contains_key(&id.to_string()),
            _ => false,
        })
        .take(12)
        .map(|(f, _)| String::from_utf8_lossy(f).chars().take(160).collect())
        .collect();
    format!(
        "seed {seed:#x}: {unanswered} of {requests} requests unanswered under their id; \
         {} id-less errors for {} id-less frames; answered more than asked: {extra:?}; \
         first unanswered: {missing:#?}",
        got.nulls, due.nulls
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn every_stdio_frame_gets_its_one_answer_and_the_bridge_keeps_serving() {
    let seed = seed();
    let frames = frames(seed);
    let env = common::env();
    let ns = env.namespace("fuzz-stdio").await;
    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut child = common::mcp_stdio(&ns, env.kubeconfig_path())
        .stderr(log.reopen().expect("log file"))
        .spawn()
        .expect("handoff mcp --stdio");
    let stdout = child.stdout.take().expect("stdout");
    let (lines, answers) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let deadline = Instant::now() + PATIENCE;
    let next = |answers: &mpsc::Receiver<String>| -> Option<Value> {
        let line = answers
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}")))
    };
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"}}});
    writeln!(stdin, "{init}").expect("write");
    let answer = next(&answers).expect("the handshake is answered");
    assert_eq!(answer["id"], json!("init"), "{answer}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("write");

    let mut input = Vec::new();
    for (frame, _) in &frames {
        input.extend_from_slice(frame);
        input.push(b'\n');
    }
    let writer = std::thread::spawn(move || {
        stdin
            .write_all(&input)
            .and_then(|()| stdin.flush())
            .map(|()| stdin)
    });
    let wanted = frames.iter().filter(|(_, d)| *d != Due::Nothing).count();
    let mut got = Tally::default();
    for _ in 0..wanted {
        match next(&answers) {
            Some(answer) => got.add(&answer),
            None => break,
        }
    }
    let mut stdin = writer
        .join()
        .expect("writer")
        .expect("the bridge read its input");
    let report = compare(seed, &frames, &got);
    assert!(report.is_empty(), "over stdio: {report}");
    assert!(matches!(child.try_wait(), Ok(None)), "the bridge exited");

    let last = json!({"jsonrpc": "2.0", "id": "last", "method": "tools/call",
        "params": {"name": "list_handoffs", "arguments": {"project": "fuzz"}}});
    writeln!(stdin, "{last}").expect("write");
    let answer = next(&answers).expect("the last call is answered");
    assert_eq!(
        answer["id"],
        json!("last"),
        "an answer nobody asked for: {answer}"
    );
    assert!(
        answer["result"]["structuredContent"]["handoffs"].is_array(),
        "{answer}"
    );
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

/// A POST of `body` to `/mcp` with `token`, of `content_type`.
fn post(addr: &str, token: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: {content_type}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

#[tokio::test(flavor = "multi_thread")]
async fn every_http_request_gets_one_json_rpc_answer_and_the_bridge_keeps_serving() {
    let seed = seed();
    let frames = frames(seed);
    let served = common::agents::served(common::env(), "fuzz-http", "fuzzer").await;
    let (bridge, token) = (&served.bridge, &served.token);
    let addr = handoff_testkit::http::addr_of(&bridge.url).expect("addr");
    let mut got = Tally::default();
    let mut wrong = Vec::new();
    for (i, (frame, due)) in frames.iter().enumerate() {
        // Every tenth request names another media type: refused, in JSON-RPC.
        let content_type = if i % 10 == 9 {
            "text/plain"
        } else {
            "application/json"
        };
        let answer =
            handoff_testkit::http::exchange(&addr, &post(&addr, token, content_type, frame))
                .await
                .expect("an HTTP answer");
        let shown = String::from_utf8_lossy(frame)
            .chars()
            .take(160)
            .collect::<String>();
        // A notification: 202 without a body, or (one the server cannot
        // accept) 400 with an id-less JSON-RPC error, as Streamable HTTP says.
        if *due == Due::Nothing && content_type == "application/json" {
            let refused = serde_json::from_str::<Value>(&answer.body)
                .is_ok_and(|m| m["id"].is_null() && m["error"]["code"].is_i64());
            let fine = (answer.status == 202 && answer.body.is_empty())
                || (answer.status == 400 && refused);
            if !fine {
                wrong.push(format!(
                    "{shown}: a notification answered {} {:?}",
                    answer.status, answer.body
                ));
            }
            continue;
        }
        let is_json = answer
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json"));
        match serde_json::from_str::<Value>(&answer.body) {
            Ok(message) if is_json && message.get("jsonrpc") == Some(&json!("2.0")) => {
                if content_type != "application/json" && answer.status != 415 {
                    wrong.push(format!(
                        "{shown}: another media type answered {}",
                        answer.status
                    ));
                }
                if content_type == "application/json" {
                    got.add(&message);
                }
            }
            _ => wrong.push(format!(
                "{shown}: answered {} {:?} (not a JSON-RPC message)",
                answer.status, answer.body
            )),
        }
    }
    let asked: Vec<(Vec<u8>, Due)> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 9)
        .map(|(_, f)| f.clone())
        .collect();
    let report = compare(seed, &asked, &got);
    assert!(
        report.is_empty() && wrong.is_empty(),
        "over HTTP: {report}; {} wrong answers, first: {:#?}",
        wrong.len(),
        wrong.iter().take(12).collect::<Vec<_>>()
    );
    let last = bridge.drive(
        token,
        "",
        json!([common::call("list_handoffs", json!({"project": "fuzz"}))]),
    );
    assert!(common::ok(&last[0])["handoffs"].is_array(), "{last:?}");
}
