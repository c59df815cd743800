//! A bad-input corpus through the MCP tools (the real Python client over
//! stdio), through raw bytes on `handoff mcp --stdio` (and a seeded fuzz of
//! JSON-RPC lines) and through `kubectl apply`: every case gets a clear error
//! or a correct result, nothing half-written is left, and the processes stay
//! up.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{call, drive_stdio, env};
use handoff_bridge::stdio::MAX_LINE_BYTES;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, MAX_BODY_CHARS, MAX_KEY_BYTES};
use handoff_testkit::TestEnv;
use handoff_testkit::rng::Fuzz;
use kube::api::Api;
use serde_json::{Value, json};

fn write(key: Value, project: Value, body: Value) -> Value {
    call(
        "write_handoff",
        json!({"handoff_key": key, "project": project, "body": body}),
    )
}

/// (case, step, words the error must contain)
fn refused_cases() -> Vec<(&'static str, Value, &'static str)> {
    let long = |n: usize| "x".repeat(n);
    vec![
        (
            "empty key",
            write(json!(""), json!("p"), json!("b")),
            "invalid `handoff_key`",
        ),
        (
            "blank key",
            write(json!("   "), json!("p"), json!("b")),
            "it is empty",
        ),
        (
            "oversize key",
            write(json!(long(MAX_KEY_BYTES + 1)), json!("p"), json!("b")),
            "over the limit of 1024 bytes",
        ),
        (
            "multi-byte key over 1024 bytes (513 characters)",
            write(json!("é".repeat(513)), json!("p"), json!("b")),
            "got 1026 bytes (513 characters), over the limit of 1024 bytes",
        ),
        (
            "NUL in key",
            write(json!("a\u{0}b"), json!("p"), json!("b")),
            "U+0000",
        ),
        (
            "newline in key",
            write(json!("a\nb"), json!("p"), json!("b")),
            "U+000A",
        ),
        (
            "tab in key",
            write(json!("a\tb"), json!("p"), json!("b")),
            "U+0009",
        ),
        (
            "DEL in key",
            write(json!("a\u{7f}b"), json!("p"), json!("b")),
            "U+007F",
        ),
        (
            "empty project",
            write(json!("k"), json!(""), json!("b")),
            "invalid `project`",
        ),
        (
            "project with a space",
            write(json!("k"), json!("my project"), json!("b")),
            "valid label value",
        ),
        (
            "64-char project",
            write(json!("k"), json!(long(64)), json!("b")),
            "64 characters",
        ),
        (
            "project starting with -",
            write(json!("k"), json!("-p"), json!("b")),
            "invalid `project`",
        ),
        (
            "unicode project",
            write(json!("k"), json!("projekt-ü"), json!("b")),
            "invalid `project`",
        ),
        (
            "SQL-looking project",
            write(json!("k"), json!("p'; DROP TABLE handoffs;--"), json!("b")),
            "invalid `project`",
        ),
        (
            "path project",
            write(json!("k"), json!("../etc"), json!("b")),
            "invalid `project`",
        ),
        (
            "empty body",
            write(json!("k"), json!("p"), json!("")),
            "invalid `body`",
        ),
        (
            "blank body",
            write(json!("k"), json!("p"), json!(" \n\t ")),
            "it is empty",
        ),
        (
            "oversize body",
            write(json!("k"), json!("p"), json!(long(MAX_BODY_CHARS + 1))),
            "1 too many",
        ),
        (
            "oversize emoji body",
            write(
                json!("k"),
                json!("p"),
                json!("😀".repeat(MAX_BODY_CHARS + 1)),
            ),
            "invalid `body`",
        ),
        (
            "NUL in body",
            write(json!("k"), json!("p"), json!("a\u{0}b")),
            "NUL",
        ),
        (
            "control char in repo",
            call(
                "write_handoff",
                json!({"handoff_key": "k", "project": "p", "repo": "a\u{1}b", "body": "b"}),
            ),
            "invalid `repo`",
        ),
        (
            "oversize repo",
            call(
                "write_handoff",
                json!({"handoff_key": "k", "project": "p", "repo": long(254), "body": "b"}),
            ),
            "invalid `repo`",
        ),
        (
            "oversize kind",
            call(
                "write_handoff",
                json!({"handoff_key": "k", "project": "p", "kind": long(64), "body": "b"}),
            ),
            "invalid `kind`",
        ),
        (
            "number key",
            write(json!(42), json!("p"), json!("b")),
            "invalid type: integer `42`",
        ),
        (
            "object body",
            write(json!("k"), json!("p"), json!({"text": "b"})),
            "invalid type: map",
        ),
        (
            "array project",
            write(json!("k"), json!(["p"]), json!("b")),
            "invalid type: sequence",
        ),
        (
            "bool repo",
            call(
                "write_handoff",
                json!({"handoff_key": "k", "project": "p", "repo": true, "body": "b"}),
            ),
            "invalid type: boolean",
        ),
        (
            "null key",
            write(Value::Null, json!("p"), json!("b")),
            "invalid type: null",
        ),
        (
            "missing key",
            call("write_handoff", json!({"project": "p", "body": "b"})),
            "missing field `handoff_key`",
        ),
        (
            "missing body",
            call("write_handoff", json!({"handoff_key": "k", "project": "p"})),
            "missing field `body`",
        ),
        (
            "extra field",
            call(
                "write_handoff",
                json!({"handoff_key": "k", "project": "p", "body": "b", "createdBy": "root"}),
            ),
            "unknown field `createdBy`",
        ),
        (
            "list limit 0",
            call("list_handoffs", json!({"project": "p", "limit": 0})),
            "invalid `limit`",
        ),
        (
            "list limit huge",
            call("list_handoffs", json!({"project": "p", "limit": 10_000})),
            "invalid `limit`",
        ),
        (
            "negative limit",
            call("list_handoffs", json!({"project": "p", "limit": -1})),
            "invalid value: integer `-1`",
        ),
        (
            "garbage cursor",
            call(
                "list_handoffs",
                json!({"project": "p", "cursor": "../../x"}),
            ),
            "invalid `cursor`",
        ),
        (
            "string include_body",
            call(
                "list_handoffs",
                json!({"project": "p", "include_body": "yes"}),
            ),
            "invalid type: string",
        ),
        (
            "bad list project",
            call("list_handoffs", json!({"project": "a b"})),
            "invalid `project`",
        ),
        (
            "null get key",
            call("get_handoff", json!({"handoff_key": null})),
            "invalid type: null",
        ),
        (
            "empty delete key",
            call("delete_handoff", json!({"handoff_key": ""})),
            "invalid `handoff_key`",
        ),
        (
            "offer to a non-label agent",
            call(
                "offer_handoff",
                json!({"project": "p", "to": "dev lead", "handoff_key": "k"}),
            ),
            "invalid `to`",
        ),
        (
            "reject a missing offer",
            call("reject_offer", json!({"offer": "nope-1"})),
            "no offer named nope-1",
        ),
    ]
}

#[tokio::test]
async fn the_mcp_corpus_refuses_clearly_and_writes_nothing() {
    let env = env();
    let ns = env.namespace("bad-input-mcp").await;
    let cases = refused_cases();
    assert!(cases.len() >= 40, "the corpus has {} cases", cases.len());
    let steps = cases.iter().map(|(_, step, _)| step.clone()).collect();
    let results = refused_then_alive(env, &ns, steps).await;
    for ((case, _, words), result) in cases.iter().zip(&results) {
        assert_eq!(
            result["is_error"],
            json!(true),
            "{case}: not refused: {result}"
        );
        let text = result["text"].as_str().unwrap_or_default();
        assert!(text.contains(words), "{case}: {words:?} not in {text:?}");
    }
}

/// Drives `steps` over stdio as a `refine` agent, then one valid write,
/// and checks that write was created and is all the namespace holds (the
/// bridge stayed up; the refused steps stored nothing). The answers, the
/// valid write's last.
async fn refused_then_alive(env: &TestEnv, ns: &str, mut steps: Vec<Value>) -> Vec<Value> {
    steps.push(write(
        json!("still-alive"),
        json!("p"),
        json!("the process stayed up"),
    ));
    let results = drive_stdio(env, ns, "refine", Value::Array(steps));
    assert_eq!(
        results.last().expect("last")["structured"]["outcome"],
        json!("created"),
        "the bridge stayed up"
    );
    assert_eq!(
        common::objects::stored_keys(env, ns).await,
        ["still-alive"],
        "a refused input left something behind"
    );
    results
}

/// Every string argument of every tool (read from the tools' schemas)
/// with a NUL and with ESC in it: each call is refused with a tool error
/// naming that argument, nothing is stored, no answer carries PostgreSQL's
/// text, and the bridge stays up. (The same calls through a bridge with
/// the PostgreSQL mirror: tests/it/search.rs.)
#[tokio::test]
async fn a_hidden_character_in_any_string_argument_is_refused_by_name() {
    let env = env();
    let ns = env.namespace("bad-input-hidden").await;
    let cases = common::bad_args::hidden_character_calls();
    // 27 string arguments of 10 tools, each with a NUL and with ESC.
    assert!(cases.len() >= 54, "only {} cases", cases.len());
    let steps = cases.iter().map(|(_, step, _)| step.clone()).collect();
    let results = refused_then_alive(env, &ns, steps).await;
    for ((case, _, field), result) in cases.iter().zip(&results) {
        let text = common::err_text(result);
        assert!(
            text.starts_with(&format!("invalid `{field}`")),
            "{case}: the refusal does not name `{field}` first: {text}"
        );
        common::bad_args::assert_no_postgres_text(case, &result.to_string());
    }
}

#[tokio::test]
async fn odd_but_valid_keys_get_correct_results() {
    let env = env();
    let ns = env.namespace("bad-input-odd").await;
    let longest = "a".repeat(MAX_KEY_BYTES);
    let longest_multibyte = "é".repeat(MAX_KEY_BYTES / 2);
    let keys = [
        "../../etc/passwd",
        "'; DROP TABLE handoffs; --",
        "Foo/Bar",
        "foo-bar",
        "FOO BAR",
        "日本語",
        "%00",
        longest.as_str(),
        longest_multibyte.as_str(),
    ];
    let mut plan = Vec::new();
    for key in keys {
        plan.push(write(
            json!(key),
            json!("shop"),
            json!(format!("body of {key}")),
        ));
    }
    for key in keys {
        plan.push(call("get_handoff", json!({"handoff_key": key})));
    }
    plan.push(write(
        json!("max-body"),
        json!("shop"),
        json!("é".repeat(MAX_BODY_CHARS)),
    ));
    let results = drive_stdio(env, &ns, "refine", Value::Array(plan));
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            results[i]["structured"]["outcome"],
            json!("created"),
            "{key}: {}",
            results[i]
        );
        let got = &results[keys.len() + i]["structured"]["handoff"];
        assert_eq!(got["handoff_key"], json!(key));
        assert_eq!(
            got["body"],
            json!(format!("body of {key}")),
            "keys that fold alike keep their own bodies"
        );
    }
    assert_eq!(
        results.last().expect("last")["structured"]["outcome"],
        json!("created"),
        "a body at the limit is fine"
    );
    let mut want: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    want.push("max-body".to_owned());
    want.sort();
    assert_eq!(common::objects::stored_keys(env, &ns).await, want);
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    for key in keys {
        let stored = api
            .get_opt(&name_for_key(key))
            .await
            .expect("get")
            .unwrap_or_else(|| panic!("{key} is not stored"));
        assert_eq!(stored.spec.handoff_key, key);
        assert_eq!(stored.spec.body, format!("body of {key}"));
    }
}

#[tokio::test]
async fn kubectl_apply_refuses_bad_objects_and_stores_nothing() {
    let env = env();
    let ns = env.namespace("bad-input-kubectl").await;
    let object = |spec: Value| json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff", "metadata": {"name": "bad"}, "spec": spec});
    let cases = [
        (
            "no spec",
            json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff", "metadata": {"name": "bad"}}),
            "spec: Required value",
        ),
        (
            "slash in project",
            object(json!({"handoffKey": "k", "project": "org/p", "body": "b"})),
            "valid label value",
        ),
        (
            "oversize body",
            object(
                json!({"handoffKey": "k", "project": "p", "body": "x".repeat(MAX_BODY_CHARS + 1)}),
            ),
            "spec.body",
        ),
        (
            "empty key",
            object(json!({"handoffKey": "", "project": "p", "body": "b"})),
            "spec.handoffKey",
        ),
        (
            "number body",
            object(json!({"handoffKey": "k", "project": "p", "body": 5})),
            "spec.body",
        ),
        (
            "unknown field",
            object(json!({"handoffKey": "k", "project": "p", "body": "b", "owner": "x"})),
            "field not declared in schema",
        ),
        (
            "NUL in body",
            object(json!({"handoffKey": "k", "project": "p", "body": "a\u{0}b"})),
            "NUL",
        ),
        (
            "newline in key",
            object(json!({"handoffKey": "a\nb", "project": "p", "body": "b"})),
            "control characters",
        ),
    ];
    for (case, manifest, words) in cases {
        let mut child = env
            .kubectl()
            .args(["apply", "--server-side", "-n", &ns, "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(manifest.to_string().as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("kubectl output");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{case}: accepted: {text}");
        assert!(text.contains(words), "{case}: {words:?} not in {text}");
    }
    assert_eq!(
        common::objects::stored_keys(env, &ns).await,
        Vec::<String>::new(),
        "something was stored"
    );
}

/// How long a raw-stdio test waits for its answers: a deadline for
/// "eventually", not a performance bound.
const PATIENCE: Duration = Duration::from_secs(180);

/// `handoff mcp --stdio` written to with raw bytes; its stdout is read line
/// by line on a thread, its log kept in a file. Killed on drop if still up.
struct RawStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<String>,
    log: tempfile::NamedTempFile,
}

impl RawStdio {
    /// Starts the bridge for `namespace` and completes the MCP handshake.
    fn start(env: &TestEnv, namespace: &str) -> Self {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let mut child = common::mcp_stdio(namespace, env.kubeconfig_path())
            .stderr(log.reopen().expect("log file"))
            .spawn()
            .expect("handoff mcp --stdio");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut bridge = Self {
            child,
            stdin,
            answers,
            log,
        };
        let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bad-input", "version": "1"}}});
        bridge.send(format!("{init}\n").as_bytes());
        let answer = bridge.next(Instant::now() + PATIENCE);
        assert_eq!(answer["id"], json!("init"), "{answer}");
        assert_eq!(answer["result"]["serverInfo"]["name"], json!("handoff"));
        bridge.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        bridge
    }

    fn send(&mut self, bytes: &[u8]) {
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin.write_all(bytes).and_then(|()| stdin.flush()),
            None => panic!("stdin is closed"),
        };
        if let Err(e) = written {
            panic!("the bridge stopped reading ({e}); {}", self.state());
        }
    }

    /// The next answer, parsed; fails past `deadline`.
    fn next(&mut self, deadline: Instant) -> Value {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.answers.recv_timeout(wait) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("an answer is not JSON ({e}): {line:?}")),
            Err(e) => panic!("no answer ({e}); {}", self.state()),
        }
    }

    fn state(&mut self) -> String {
        let log = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        match self.child.try_wait() {
            Ok(Some(status)) => format!("the bridge exited ({status}); its log:\n{log}"),
            Ok(None) => format!("the bridge is running; its log:\n{log}"),
            Err(e) => format!("the bridge's state is unknown ({e})"),
        }
    }

    fn assert_alive(&mut self, when: &str) {
        assert!(
            matches!(self.child.try_wait(), Ok(None)),
            "{when}: {}",
            self.state()
        );
    }

    /// Closes stdin: the bridge exits with success before `deadline`, says
    /// nothing more, and logs that its input ended.
    fn finish(mut self, deadline: Instant) {
        drop(self.stdin.take());
        let status = loop {
            match self.child.try_wait().expect("wait") {
                Some(status) => break status,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                None => panic!("the bridge did not exit on EOF; {}", self.state()),
            }
        };
        assert!(status.success(), "{}", self.state());
        let mut extra = Vec::new();
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(wait) {
                Ok(line) => extra.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("stdout stayed open after exit"),
            }
        }
        assert!(extra.is_empty(), "answers nobody asked for: {extra:?}");
        let log = std::fs::read_to_string(self.log.path()).expect("log");
        assert!(log.contains("stdin closed"), "the end is not logged: {log}");
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn request(id: Value, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method})
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[tokio::test]
async fn raw_bytes_on_stdio_are_answered_and_the_bridge_keeps_serving() {
    let env = env();
    let ns = env.namespace("bad-input-bytes").await;
    let ping = |id: &str| request(json!(id), "ping").to_string();
    let cases: Vec<(&str, Vec<u8>, &[i64])> = vec![
        ("the bytes FF FE", b"\xff\xfe".to_vec(), &[-32700]),
        (
            "invalid UTF-8 inside a JSON string",
            [
                &br#"{"jsonrpc":"2.0","id":"utf8","method":"ping","params":{"a":""#[..],
                b"\xc3(",
                br#""}}"#,
            ]
            .concat(),
            &[-32700],
        ),
        ("a NUL byte", b"\0".to_vec(), &[-32700]),
        (
            "a NUL after a request",
            [ping("nul").as_bytes(), b"\0"].concat(),
            &[-32700],
        ),
        (
            "a lone CR between two requests",
            format!("{}\r{}", ping("cr-1"), ping("cr-2")).into_bytes(),
            &[-32700],
        ),
        (
            "an over-long line",
            vec![b'x'; MAX_LINE_BYTES + 1],
            &[-32600],
        ),
        ("a blank line", b" \t\r".to_vec(), &[]),
    ];
    let deadline = Instant::now() + PATIENCE;
    let mut bridge = RawStdio::start(env, &ns);
    for (i, (case, bad, codes)) in cases.iter().enumerate() {
        let id = json!(format!("after-{i}"));
        let list = request(id.clone(), "tools/list").to_string();
        bridge.send(&[bad.as_slice(), b"\n", list.as_bytes(), b"\n"].concat());
        let answers: Vec<Value> = (0..=codes.len()).map(|_| bridge.next(deadline)).collect();
        let (listed, errors): (Vec<&Value>, Vec<&Value>) =
            answers.iter().partition(|a| a["id"] == id);
        assert_eq!(listed.len(), 1, "{case}: the next request: {answers:?}");
        let tools = listed[0]["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{case}: not a tool list: {}", listed[0]));
        assert!(
            tools.iter().any(|t| t["name"] == json!("get_handoff")),
            "{case}: {tools:?}"
        );
        for error in &errors {
            assert_eq!(error.get("id"), Some(&Value::Null), "{case}: {error}");
        }
        let got: Vec<i64> = errors.iter().map(|e| error_code(e)).collect();
        assert_eq!(&got, codes, "{case}: {answers:?}");
        bridge.assert_alive(case);
    }
    bridge.finish(deadline);
}

/// The characters `text` mixes in: quotes and backslashes, control
/// characters, line and paragraph separators, non-Latin and emoji.
const ODD: &[char] = &[
    '"', '\\', '\0', '\r', '\n', '\t', '\u{7f}', '\u{2028}', 'é', '日', '😀',
];

/// What one fuzz line must get back.
#[derive(Debug)]
enum Expect {
    /// One answer carrying this id.
    Answer(Value),
    /// One error without a usable id (absent or null), with this code.
    Error(i64),
    /// Nothing: a notification or a blank line.
    Nothing,
}

/// The `n`th fuzz line (without its line ending) and what it must get back.
fn fuzz_line(rng: &mut Fuzz, n: usize) -> (Vec<u8>, Expect) {
    let id = if rng.below(2) == 0 {
        json!(1_000_000 + n)
    } else {
        json!(format!("{}#{n}", rng.text(10)))
    };
    match rng.below(1000) {
        // A request: answered under its id, with a result or an error.
        0..=299 => {
            let message = match rng.below(7) {
                0 => request(id.clone(), "ping"),
                1 => request(id.clone(), "tools/list"),
                2 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": rng.text(16), "arguments": rng.object(2)}}),
                3 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": rng.pick(&["get_handoff", "list_handoffs"]),
                               "arguments": rng.object(2)}}),
                4 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "get_handoff",
                               "arguments": {"handoff_key": format!("fuzz-{}", rng.below(5))}}}),
                5 => {
                    let method = *rng.pick(&["resources/list", "prompts/list"]);
                    request(id.clone(), method)
                }
                _ => {
                    let mut message = request(id.clone(), &format!("x-fuzz/{}", rng.text(12)));
                    if rng.below(2) == 0 {
                        message["params"] = rng.object(2);
                    }
                    message
                }
            };
            let pad = *rng.pick(&["", " ", "\t", "  \t"]);
            (
                format!("{pad}{message}{pad}").into_bytes(),
                Expect::Answer(id),
            )
        }
        // A notification: no answer.
        300..=399 => {
            let message = match rng.below(4) {
                0 => json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": format!("nobody-{n}")}}),
                1 => json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
                2 => {
                    json!({"jsonrpc": "2.0", "method": format!("notifications/x-fuzz-{}", rng.text(8)),
                    "params": rng.object(1)})
                }
                _ => json!({"jsonrpc": "2.0", "method": format!("x-fuzz/{}", rng.text(8))}),
            };
            (message.to_string().into_bytes(), Expect::Nothing)
        }
        // A request cut short (maybe inside a UTF-8 sequence): not JSON.
        400..=549 => {
            let whole = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": rng.text(8), "arguments": rng.object(2)}})
            .to_string()
            .into_bytes();
            let cut = 1 + rng.below(whole.len() - 1);
            (whole[..cut].to_vec(), Expect::Error(-32700))
        }
        // Printable text that cannot start a JSON value.
        550..=599 => {
            let start = *rng.pick(&['#', '}', ']', ':', ',', '<', '@', 'x', 'Z']);
            let rest: String = rng.text(30).chars().filter(|c| !c.is_control()).collect();
            (format!("{start}{rest}").into_bytes(), Expect::Error(-32700))
        }
        // JSON that is not an object or array.
        600..=649 => {
            let scalar = match rng.below(4) {
                0 => json!(rng.text(10)),
                1 => json!(rng.next_u64() as i64),
                2 => json!(rng.below(2) == 0),
                _ => Value::Null,
            };
            (format!(" {scalar} ").into_bytes(), Expect::Error(-32600))
        }
        // Random bytes, at least one never valid in UTF-8.
        650..=799 => {
            let mut bytes: Vec<u8> = (0..1 + rng.below(64))
                .map(|_| rng.below(256) as u8)
                .map(|b| if b == b'\n' { b'?' } else { b })
                .collect();
            let at = rng.below(bytes.len());
            bytes[at] = 0xF8 + rng.below(8) as u8;
            (bytes, Expect::Error(-32700))
        }
        // A request with a NUL somewhere in it.
        800..=829 => {
            let mut bytes = request(id, "ping").to_string().into_bytes();
            let at = rng.below(bytes.len() + 1);
            bytes.insert(at, 0);
            (bytes, Expect::Error(-32700))
        }
        // Two requests joined by a lone CR: one malformed line.
        830..=859 => {
            let second = json!(format!("{n}-second"));
            let line = format!("{}\r{}", request(id, "ping"), request(second, "ping"));
            (line.into_bytes(), Expect::Error(-32700))
        }
        // A JSON object or array that is not an MCP message: the guard
        // answers Invalid Request (or Invalid params, for by-position
        // params, which JSON-RPC allows and MCP does not) under the id when
        // the message has a usable one, else without an id.
        860..=949 => match rng.below(7) {
            0 => (b"{}".to_vec(), Expect::Error(-32600)),
            1 => (
                json!({"jsonrpc": "2.0", "id": id}).to_string().into_bytes(),
                Expect::Answer(id),
            ),
            2 => (
                json!({"jsonrpc": "2.0", "id": id, "method": "ping", "result": {}})
                    .to_string()
                    .into_bytes(),
                Expect::Answer(id),
            ),
            3 => (
                json!({"jsonrpc": "1.0", "id": id, "method": "ping"})
                    .to_string()
                    .into_bytes(),
                Expect::Answer(id),
            ),
            4 => (
                json!([request(id, "ping")]).to_string().into_bytes(),
                Expect::Error(-32600),
            ),
            5 => (
                json!({"jsonrpc": "2.0", "id": id, "method": format!("x-fuzz/{}", rng.text(12)),
                    "params": [rng.value(1), rng.value(1)]})
                .to_string()
                .into_bytes(),
                Expect::Answer(id),
            ),
            _ => (
                json!({rng.text(6): rng.value(2)}).to_string().into_bytes(),
                Expect::Error(-32600),
            ),
        },
        // Blank lines.
        950..=997 => (
            rng.pick(&["", " ", "\t", "\r", " \r"]).as_bytes().to_vec(),
            Expect::Nothing,
        ),
        // Rarely (it is 4 MiB), a line over the limit.
        _ => (vec![b'{'; MAX_LINE_BYTES + 1], Expect::Error(-32600)),
    }
}

#[tokio::test]
async fn a_seeded_fuzz_of_json_rpc_lines_gets_one_answer_per_request() {
    const SEED: u64 = 0x0068_616e_646f_6666;
    const LINES: usize = 3_000;
    let env = env();
    let ns = env.namespace("bad-input-fuzz").await;
    let mut rng = Fuzz::new(SEED, ODD);
    let mut input = Vec::new();
    let mut answers_due: HashMap<String, String> = HashMap::new();
    let mut errors_due: HashMap<i64, usize> = HashMap::new();
    let mut silent = 0;
    let mut too_long = 0;
    for n in 0..LINES {
        let (line, expect) = fuzz_line(&mut rng, n);
        too_long += usize::from(line.len() > MAX_LINE_BYTES);
        input.extend_from_slice(&line);
        input.extend_from_slice(if rng.below(4) == 0 { b"\r\n" } else { b"\n" });
        match expect {
            Expect::Answer(id) => {
                let repeated = answers_due
                    .insert(id.to_string(), String::from_utf8_lossy(&line).into_owned())
                    .is_some();
                assert!(!repeated, "the generator repeated the id {id}");
            }
            Expect::Error(code) => *errors_due.entry(code).or_default() += 1,
            Expect::Nothing => silent += 1,
        }
    }
    let due = answers_due.len() + errors_due.values().sum::<usize>();
    assert!(
        answers_due.len() > LINES / 5 && silent > LINES / 20 && too_long > 0,
        "seed {SEED:#x}: the mix is lopsided ({} requests, {silent} silent, {too_long} over-long)",
        answers_due.len()
    );

    let deadline = Instant::now() + PATIENCE;
    let mut bridge = RawStdio::start(env, &ns);
    let mut stdin = bridge.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let written = stdin.write_all(&input).and_then(|()| stdin.flush());
        (stdin, written)
    });
    let mut answered: HashMap<String, usize> = HashMap::new();
    let mut errors: HashMap<i64, usize> = HashMap::new();
    for _ in 0..due {
        let answer = bridge.next(deadline);
        match answer.get("id") {
            Some(id) if !id.is_null() => *answered.entry(id.to_string()).or_default() += 1,
            _ => *errors.entry(error_code(&answer)).or_default() += 1,
        }
    }
    let (stdin, written) = writer.join().expect("writer");
    if let Err(e) = written {
        panic!("the bridge stopped reading ({e}); {}", bridge.state());
    }
    bridge.stdin = Some(stdin);
    let unanswered: Vec<&String> = answers_due
        .iter()
        .filter(|(id, _)| !answered.contains_key(*id))
        .map(|(_, line)| line)
        .collect();
    let unasked: Vec<(&String, &usize)> = answered
        .iter()
        .filter(|(id, n)| !answers_due.contains_key(*id) || **n != 1)
        .collect();
    assert!(
        unanswered.is_empty() && unasked.is_empty(),
        "seed {SEED:#x}: unanswered {unanswered:#?}; answered wrongly {unasked:?}; id-less errors {errors:?}"
    );
    assert_eq!(errors, errors_due, "seed {SEED:#x}: id-less errors by code");
    bridge.assert_alive("after the fuzz");

    let last = json!("last");
    bridge.send(format!("{}\n", request(last.clone(), "ping")).as_bytes());
    let answer = bridge.next(deadline);
    assert_eq!(answer["id"], last, "an answer nobody asked for: {answer}");
    bridge.finish(deadline);
}
