//! A bad-input corpus through the MCP tools (the real Python client over
//! stdio) and through `kubectl apply`: every case gets a clear error or a
//! correct result, nothing half-written is left, and the processes stay up.

mod common;

use common::{call, drive_stdio, env};
use handoff::api::naming::name_for_key;
use handoff::api::{Handoff, MAX_BODY_CHARS, MAX_KEY_CHARS};
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
            write(json!(long(MAX_KEY_CHARS + 1)), json!("p"), json!("b")),
            "1 too many",
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
    let plan: Vec<Value> = cases.iter().map(|(_, step, _)| step.clone()).collect();
    let mut plan = plan;
    plan.push(write(
        json!("still-alive"),
        json!("p"),
        json!("the process stayed up"),
    ));
    let results = drive_stdio(env, &ns, "refine", Value::Array(plan));
    for ((case, _, words), result) in cases.iter().zip(&results) {
        assert_eq!(
            result["is_error"],
            json!(true),
            "{case}: not refused: {result}"
        );
        let text = result["text"].as_str().unwrap_or_default();
        assert!(text.contains(words), "{case}: {words:?} not in {text:?}");
    }
    assert_eq!(
        results.last().expect("last")["structured"]["outcome"],
        json!("created"),
        "the bridge stayed up"
    );
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let stored: Vec<String> = api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|h| h.spec.handoff_key)
        .collect();
    assert_eq!(
        stored,
        ["still-alive"],
        "a refused input left something behind"
    );
}

#[tokio::test]
async fn odd_but_valid_keys_get_correct_results() {
    let env = env();
    let ns = env.namespace("bad-input-odd").await;
    let longest = "a".repeat(MAX_KEY_CHARS);
    let keys = [
        "../../etc/passwd",
        "'; DROP TABLE handoffs; --",
        "Foo/Bar",
        "foo-bar",
        "FOO BAR",
        "日本語",
        "%00",
        longest.as_str(),
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
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    assert_eq!(
        api.list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        keys.len() + 1
    );
    for key in keys {
        assert!(
            api.get_opt(&name_for_key(key))
                .await
                .expect("get")
                .is_some(),
            "{key}"
        );
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
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    assert!(
        api.list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "something was stored"
    );
}
