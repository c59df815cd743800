//! Every write is checked: the credential corpus
//! (`tests/fixtures/secret_corpus.rs`) through the real MCP client (the
//! Python SDK driving `handoff mcp --stdio`) and through the real `kubectl
//! apply` against the generated admission policy of `config/policy`; the
//! lint's warnings in `write_handoff`'s structured content and its `Linted`
//! condition on a handoff written with kubectl, both under the namespace's
//! budget (the ConfigMap `handoff-settings`).
//!
//! Every true positive is refused with the field and the kind named (the
//! bridge also names the line) and without the secret echoed; nothing is
//! stored. Every near miss is accepted.

use crate::common::{self, call, drive_stdio, err_text, eventually, ok};
use crate::install::{installed, kubectl_stdin};

use std::sync::Arc;
use std::time::{Duration, Instant};

use handoff_controller::handoff::LINTED;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer, MAX_BODY_CHARS};
use handoff_core::names::SETTINGS_CONFIGMAP;
use handoff_core::secrets::{self, POLICY_NAME};
use handoff_core::time::SystemClock;
use handoff_kube::settings::BUDGET_KEY;
use handoff_testkit::TestEnv;
use handoff_testkit::controller::InProcess;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::{Value, json};

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/secret_corpus.rs"
));

/// A body holding `text` on line 2.
fn body(text: &str) -> String {
    format!("## State\n{text}")
}

/// Asserts a refusal names every fragment and echoes none of the
/// credentials in `text`.
fn names_without_echo(refusal: &str, fragments: &[&str], text: &str) {
    for fragment in fragments {
        assert!(
            refusal.contains(fragment),
            "{fragment:?} not in the refusal: {refusal}"
        );
    }
    for finding in secrets::find(text) {
        let secret = &text[finding.range];
        assert!(
            !refusal.contains(secret),
            "the refusal echoes the secret {secret:?}: {refusal}"
        );
    }
}

/// The keys `nm-<i>` the near misses are written under, sorted.
fn near_miss_keys(misses: usize) -> Vec<String> {
    let mut keys: Vec<String> = (0..misses).map(|i| format!("nm-{i}")).collect();
    keys.sort();
    keys
}

/// The fields a writer supplies besides the body, each holding a
/// credential in turn, as (field, arguments): the AWS key `aws` in the key,
/// the project and the kind, the password URL `url` in the repo. `key` is
/// the key's name (`handoff_key` for the tools, `handoffKey` in the spec).
fn credential_in_each_field(
    key: &'static str,
    body: &str,
    aws: &str,
    url: &str,
) -> [(&'static str, Value); 4] {
    // The key is `f-<field>`, unless the field is the key.
    let with = |field: &str, value: &str| {
        let mut args = json!({"project": "shop", "body": body});
        args[key] = json!(format!("f-{field}"));
        args[field] = json!(value);
        args
    };
    [
        (key, with(key, &format!("k {aws}"))),
        ("project", with("project", aws)),
        ("repo", with("repo", url)),
        ("kind", with("kind", aws)),
    ]
}

#[tokio::test]
async fn the_secret_corpus_through_the_real_mcp_client() {
    let env = common::env();
    let ns = env.namespace("secrets-mcp").await;
    let offers: Api<HandoffOffer> = Api::namespaced(env.client().await, &ns);
    let positives = true_positives();
    let misses = near_misses();
    let aws = format!("AKIA{}", fill("FAKE2345", 16));
    let url = "https://bot:hunter2fake@git.example.com/org/repo";

    let mut plan: Vec<Value> = Vec::new();
    for (i, (_, text)) in positives.iter().enumerate() {
        plan.push(call(
            "write_handoff",
            json!({"handoff_key": format!("tp-{i}"), "project": "shop", "body": body(text)}),
        ));
    }
    // (field, arguments): the other fields a writer supplies.
    let fields = credential_in_each_field("handoff_key", "## State\nok", &aws, url);
    for (_, args) in &fields {
        plan.push(call("write_handoff", args.clone()));
    }
    let offer_body = body(&positives[0].1);
    plan.push(call(
        "offer_handoff",
        json!({"project": "shop", "to": "dev-lead", "handoff_key": "from", "body": offer_body}),
    ));
    for (i, text) in misses.iter().enumerate() {
        plan.push(call(
            "write_handoff",
            json!({"handoff_key": format!("nm-{i}"), "project": "shop", "body": body(text)}),
        ));
    }
    let results = drive_stdio(env, &ns, "refine", Value::Array(plan));
    let (refused, rest) = results.split_at(positives.len());
    let (refused_fields, rest) = rest.split_at(fields.len());
    let (offer, accepted) = rest.split_at(1);

    for ((kind, text), result) in positives.iter().zip(refused) {
        let line = secrets::find(&body(text))[0].line;
        let named = format!("line {line} holds a credential: {kind} (not shown)");
        names_without_echo(&err_text(result), &["invalid `body`", &named], text);
    }
    for ((field, args), result) in fields.iter().zip(refused_fields) {
        let named = format!("invalid `{field}`");
        let refusal = err_text(result);
        names_without_echo(&refusal, &[&named, "holds a credential"], &args.to_string());
    }
    names_without_echo(
        &err_text(&offer[0]),
        &[
            "invalid `body`",
            &format!("holds a credential: {}", positives[0].0),
        ],
        &offer_body,
    );
    for (text, result) in misses.iter().zip(accepted) {
        assert_eq!(
            ok(result)["outcome"],
            json!("created"),
            "the near miss {text:?} was refused: {result}"
        );
    }

    assert_eq!(
        common::objects::stored_keys(env, &ns).await,
        near_miss_keys(misses.len()),
        "exactly the near misses are stored"
    );
    assert!(
        offers
            .list(&Default::default())
            .await
            .expect("list offers")
            .items
            .is_empty(),
        "no offer is stored"
    );
}

#[tokio::test]
async fn lint_warnings_are_in_the_structured_content_and_the_text() {
    let env = common::env();
    let ns = env.namespace("secrets-lint").await;
    let good = "## State\nparser done\n## Done\n- parser\n## Next\n- CLI\n## Open questions\n- none\n## Refs\n- #42";
    let poor = format!("## State\nparser done\n```\n{}```", "line\n".repeat(30));
    let results = drive_stdio(
        env,
        &ns,
        "implement",
        json!([
            call(
                "write_handoff",
                json!({"handoff_key": "good", "project": "shop", "body": good})
            ),
            call(
                "write_handoff",
                json!({"handoff_key": "poor", "project": "shop", "body": poor})
            ),
        ]),
    );
    let clean = ok(&results[0]);
    assert_eq!(clean["outcome"], json!("created"));
    assert_eq!(clean.get("warnings"), None, "no warnings: no field");
    let warned = ok(&results[1]);
    assert_eq!(warned["outcome"], json!("created"), "warnings never refuse");
    let codes: Vec<&str> = warned["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w["code"].as_str())
        .collect();
    assert_eq!(codes, ["missing-section", "big-code-block"]);
    let message = warned["warnings"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("Done, Next, Open questions, Refs"),
        "{message}"
    );
    let text = results[1]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("Warnings (fix them and write again")
            && text.contains("- big-code-block: a code block of 30 lines"),
        "{text}"
    );
}

/// A Handoff (or, with `offer`, a HandoffOffer) manifest as JSON.
fn manifest(namespace: &str, key: &str, spec: Value) -> String {
    json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
           "metadata": {"name": name_for_key(key), "namespace": namespace},
           "spec": spec})
    .to_string()
}

fn apply(env: &TestEnv, manifest: &str) -> std::process::Output {
    tokio::task::block_in_place(|| kubectl_stdin(env, &["apply", "-f", "-"], manifest))
}

/// Asserts `out` is a refusal by the credentials policy naming `field`
/// and `kind`, without echoing the credentials of `text`.
fn refused_by_policy(out: std::process::Output, field: &str, kind: &str, text: &str) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "admitted: {text:?}");
    names_without_echo(
        &err,
        &[
            &format!(
                "ValidatingAdmissionPolicy '{POLICY_NAME}' with binding '{POLICY_NAME}' denied request"
            ),
            &format!("spec.{field} holds a credential ({kind})"),
        ],
        text,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_corpus_through_kubectl_apply() {
    let env = tokio::task::block_in_place(installed);
    let ns = env.namespace("secrets-kubectl").await;
    let handoffs: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let positives = true_positives();
    let misses = near_misses();

    // The policy loads asynchronously: wait until it refuses the first one.
    let (kind, text) = &positives[0];
    let first = manifest(
        &ns,
        "tp-0",
        json!({"handoffKey": "tp-0", "project": "shop", "body": body(text)}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let out = loop {
        let out = apply(env, &first);
        if String::from_utf8_lossy(&out.stderr).contains(POLICY_NAME) {
            break out;
        }
        assert!(
            Instant::now() < deadline,
            "{POLICY_NAME} does not refuse within 60 s: {out:?}"
        );
        if out.status.success() {
            handoffs
                .delete(&name_for_key("tp-0"), &Default::default())
                .await
                .expect("undo");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    refused_by_policy(out, "body", kind, text);

    for (i, (kind, text)) in positives.iter().enumerate() {
        let key = format!("tp-{i}");
        let m = manifest(
            &ns,
            &key,
            json!({"handoffKey": key, "project": "shop", "body": body(text)}),
        );
        refused_by_policy(apply(env, &m), "body", kind, text);
        assert!(
            handoffs
                .get_opt(&name_for_key(&key))
                .await
                .expect("get")
                .is_none(),
            "{key} was stored"
        );
    }
    let aws = format!("AKIA{}", fill("FAKE2345", 16));
    let url = "https://bot:hunter2fake@git.example.com/org/repo";
    let fields = credential_in_each_field("handoffKey", "ok", &aws, url);
    for (field, spec) in fields {
        let key = spec["handoffKey"].as_str().unwrap_or_default().to_owned();
        let kind = if field == "repo" {
            "password in a URL"
        } else {
            "AWS access key id"
        };
        refused_by_policy(
            apply(env, &manifest(&ns, &key, spec.clone())),
            field,
            kind,
            &spec.to_string(),
        );
        assert!(
            handoffs
                .get_opt(&name_for_key(&key))
                .await
                .expect("get")
                .is_none()
        );
    }
    // An offer carries a copy of handoff text: the same rules hold.
    let offer = json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "HandoffOffer",
        "metadata": {"name": "dev-lead-1", "namespace": ns},
        "spec": {"project": "shop", "to": "dev-lead", "fromKey": "from", "body": body(text)}})
    .to_string();
    refused_by_policy(apply(env, &offer), "body", kind, text);
    let offers: Api<HandoffOffer> = Api::namespaced(env.client().await, &ns);
    assert!(offers.get_opt("dev-lead-1").await.expect("get").is_none());

    for (i, text) in misses.iter().enumerate() {
        let key = format!("nm-{i}");
        let m = manifest(
            &ns,
            &key,
            json!({"handoffKey": key, "project": "shop", "body": body(text)}),
        );
        let out = apply(env, &m);
        assert!(
            out.status.success(),
            "the near miss {text:?} was refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        common::objects::stored_keys(env, &ns).await,
        near_miss_keys(misses.len()),
        "exactly the near misses are stored"
    );

    // The largest body the schema admits is evaluated within CEL's runtime
    // cost budget (every rule runs over all of it: none matches, so no
    // conditional short-cuts). A policy over budget refuses every write.
    let filler = "- checked the parser again; sha 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n";
    let mut largest = body(&filler.repeat(MAX_BODY_CHARS / filler.len()));
    largest.truncate(MAX_BODY_CHARS);
    let m = manifest(
        &ns,
        "largest",
        json!({"handoffKey": "largest", "project": "shop", "body": largest}),
    );
    let out = apply(env, &m);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An UPDATE that adds a credential is refused and changes nothing.
    let before = handoffs.get(&name_for_key("nm-0")).await.expect("get");
    let m = manifest(
        &ns,
        "nm-0",
        json!({"handoffKey": "nm-0", "project": "shop", "body": body(text)}),
    );
    refused_by_policy(apply(env, &m), "body", kind, text);
    let after = handoffs.get(&name_for_key("nm-0")).await.expect("get");
    assert_eq!(after.resource_version(), before.resource_version());
    assert_eq!(after.spec, before.spec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubectl_written_handoff_gets_the_linted_condition() {
    let env = common::env();
    let ns = env.namespace("secrets-linted").await;
    let client = env.client().await;
    let controller = InProcess::new(&ns, "only", Arc::new(SystemClock)).start(client.clone());
    let api: Api<Handoff> = Api::namespaced(client, &ns);
    let name = name_for_key("lint");
    let condition = |want: &'static str| {
        let api = api.clone();
        let name = name.clone();
        async move {
            eventually(
                &format!("Linted {want}"),
                Duration::from_secs(30),
                || async {
                    let h = api.get(&name).await.ok()?;
                    let status = h.status?;
                    let c = status.conditions.into_iter().find(|c| c.type_ == LINTED)?;
                    (c.status == want && c.observed_generation == h.metadata.generation)
                        .then_some(c)
                },
            )
            .await
        }
    };

    let poor = manifest(
        &ns,
        "lint",
        json!({"handoffKey": "lint", "project": "shop", "body": "just notes"}),
    );
    let out = tokio::task::block_in_place(|| kubectl_stdin(env, &["apply", "-f", "-"], &poor));
    assert!(out.status.success(), "{out:?}");
    let warned = condition("False").await;
    assert_eq!(warned.reason, "Warnings");
    assert!(
        warned.message.starts_with(
            "missing-section: the body lacks the section(s) State, Done, Next, Open questions, Refs"
        ),
        "{}",
        warned.message
    );

    let good = "## State\nok\n## Done\n- a\n## Next\n- b\n## Open questions\n- none\n## Refs\n- #1";
    let fixed = manifest(
        &ns,
        "lint",
        json!({"handoffKey": "lint", "project": "shop", "body": good}),
    );
    let out = tokio::task::block_in_place(|| kubectl_stdin(env, &["apply", "-f", "-"], &fixed));
    assert!(out.status.success(), "{out:?}");
    let clean = condition("True").await;
    assert_eq!(clean.reason, "NoWarnings");

    controller.stop().await;
}

/// A body with every section of the skill and about 250 approximate tokens:
/// under the default budget, over a budget of 100.
fn sectioned_body() -> String {
    format!(
        "## State\n{}\n## Done\n- a\n## Next\n- b\n## Open questions\n- none\n## Refs\n- #1",
        "parser done. ".repeat(70)
    )
}

/// Creates the namespace's settings ConfigMap with `lintBudgetTokens` = `value`.
async fn set_budget(env: &TestEnv, namespace: &str, value: &str) {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": SETTINGS_CONFIGMAP},
        "data": {BUDGET_KEY: value},
    }))
    .expect("configmap");
    Api::<ConfigMap>::namespaced(env.client().await, namespace)
        .create(&PostParams::default(), &map)
        .await
        .expect("create the settings ConfigMap");
}

/// The warning codes of a `write_handoff` result.
fn codes(result: &Value) -> Vec<String> {
    ok(result)["warnings"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .filter_map(|w| w["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn write_handoff_lints_under_the_namespace_budget() {
    let env = common::env();
    let body = sectioned_body();
    let write = json!([call(
        "write_handoff",
        json!({"handoff_key": "budget", "project": "shop", "body": body})
    )]);

    let low = env.namespace("secrets-budget-low").await;
    set_budget(env, &low, "100").await;
    let results = drive_stdio(env, &low, "implement", write.clone());
    assert_eq!(codes(&results[0]), ["over-budget"], "{}", results[0]);
    let message = ok(&results[0])["warnings"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("over the budget of 100"),
        "the namespace's budget: {message}"
    );

    let default = env.namespace("secrets-budget-default").await;
    let results = drive_stdio(env, &default, "implement", write.clone());
    assert_eq!(codes(&results[0]), Vec::<String>::new(), "{}", results[0]);

    // A bad value never fails the write: the default budget applies.
    let bad = env.namespace("secrets-budget-bad").await;
    set_budget(env, &bad, "2k").await;
    let results = drive_stdio(env, &bad, "implement", write);
    assert_eq!(ok(&results[0])["outcome"], json!("created"));
    assert_eq!(codes(&results[0]), Vec::<String>::new(), "{}", results[0]);
}

/// The `Linted` condition of a handoff holding `body`, applied with kubectl
/// in `namespace` and counted by a controller run for it.
async fn linted_with_kubectl(env: &TestEnv, namespace: &str, body: &str) -> Condition {
    let client = env.client().await;
    let controller = InProcess::new(namespace, "only", Arc::new(SystemClock)).start(client.clone());
    let manifest = manifest(
        namespace,
        "budget",
        json!({"handoffKey": "budget", "project": "shop", "body": body}),
    );
    let out = apply(env, &manifest);
    assert!(out.status.success(), "{out:?}");
    let api: Api<Handoff> = Api::namespaced(client, namespace);
    let name = name_for_key("budget");
    let condition = eventually("Linted", Duration::from_secs(30), || async {
        let h = api.get(&name).await.ok()?;
        let c = h
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == LINTED)?;
        (c.observed_generation == h.metadata.generation).then_some(c)
    })
    .await;
    controller.stop().await;
    condition
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_linted_condition_honours_the_namespace_budget() {
    let env = common::env();
    let body = sectioned_body();

    let low = env.namespace("secrets-linted-low").await;
    set_budget(env, &low, "100").await;
    let warned = linted_with_kubectl(env, &low, &body).await;
    assert_eq!(
        (warned.status.as_str(), warned.reason.as_str()),
        ("False", "Warnings")
    );
    assert!(
        warned.message.starts_with("over-budget: ")
            && warned.message.contains("over the budget of 100"),
        "{}",
        warned.message
    );

    let default = env.namespace("secrets-linted-default").await;
    let clean = linted_with_kubectl(env, &default, &body).await;
    assert_eq!(
        (clean.status.as_str(), clean.reason.as_str()),
        ("True", "NoWarnings")
    );
    assert_eq!(clean.message, "the body passes the handoff lint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_budget_is_named_in_the_linted_condition_and_the_default_applies() {
    let env = common::env();
    let ns = env.namespace("secrets-linted-bad").await;
    set_budget(env, &ns, "-3").await;
    let condition = linted_with_kubectl(env, &ns, &sectioned_body()).await;
    assert_eq!(
        condition.status, "True",
        "the default budget: {}",
        condition.message
    );
    assert_eq!(
        condition.message,
        "the body passes the handoff lint; ConfigMap handoff-settings key lintBudgetTokens \
         must be a positive integer (approximate tokens): got \"-3\", not positive; the default \
         2000 is used"
    );
}
