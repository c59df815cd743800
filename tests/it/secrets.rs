//! Every write is checked by the one detector (`handoff_core::secrets`):
//! the credential corpus (`tests/fixtures/secrets/`) through the real MCP
//! client (the Python SDK driving `handoff mcp --stdio`) and through the
//! admission webhook (`kubectl create --dry-run=server` for the issue's 26
//! credentials and 14 honest texts, the API for the whole corpus); the
//! lint's warnings in `write_handoff`'s structured content and its `Linted`
//! condition on a handoff written with kubectl, both under the namespace's
//! budget (the ConfigMap `handoff-settings`).
//!
//! Every true positive is refused with the field, the rule id, the line and
//! the column named and without the secret echoed; nothing is stored. Every
//! honest text is accepted.

use crate::common::{self, call, drive_stdio, err_text, ok};
use crate::install::{installed, kubectl_stdin};
use handoff_testkit::wait::eventually;

use std::sync::Arc;
use std::time::Duration;

use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer, MAX_BODY_CHARS};
use handoff_core::handoff::LINTED;
use handoff_core::names::SETTINGS_CONFIGMAP;
use handoff_core::secrets;
use handoff_core::settings::BUDGET_KEY;
use handoff_core::time::SystemClock;
use handoff_testkit::TestEnv;
use handoff_testkit::controller::InProcess;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/secrets/corpus.rs"
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

/// What a refusal of `text` must say: the detector's first finding, by
/// rule id (the corpus's), line and column.
fn place(rule: &str, text: &str) -> String {
    let found = secrets::find(text);
    let first = found
        .first()
        .unwrap_or_else(|| panic!("no finding in {text:?}"));
    assert_eq!(first.rule, rule, "{text:?}");
    format!("a credential at {}", first.describe())
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
    let honest = honest_texts();
    let aws = format!("AKIA{}", fill("QZ7HX3MK2WJ5RT4B", 16));
    let url = "https://bot:hunter2x9@git.shop.internal/org/repo";

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
    for (i, text) in honest.iter().enumerate() {
        plan.push(call(
            "write_handoff",
            json!({"handoff_key": format!("nm-{i}"), "project": "shop", "body": body(text)}),
        ));
    }
    let results = drive_stdio(env, &ns, "refine", Value::Array(plan));
    let (refused, rest) = results.split_at(positives.len());
    let (refused_fields, rest) = rest.split_at(fields.len());
    let (offer, accepted) = rest.split_at(1);

    for ((rule, text), result) in positives.iter().zip(refused) {
        let named = place(rule, &body(text));
        names_without_echo(&err_text(result), &["invalid `body`", &named], text);
    }
    for ((field, args), result) in fields.iter().zip(refused_fields) {
        let named = format!("invalid `{field}`");
        let rule = if *field == "repo" {
            "rule password-in-url"
        } else {
            "rule aws-access-token"
        };
        let refusal = err_text(result);
        names_without_echo(&refusal, &[&named, rule, "(not shown)"], &args.to_string());
    }
    names_without_echo(
        &err_text(&offer[0]),
        &["invalid `body`", &place(positives[0].0, &offer_body)],
        &offer_body,
    );
    for (text, result) in honest.iter().zip(accepted) {
        assert_eq!(
            ok(result)["outcome"],
            json!("created"),
            "the honest text {text:?} was refused: {result}"
        );
    }

    assert_eq!(
        common::objects::stored_keys(env, &ns).await,
        near_miss_keys(honest.len()),
        "exactly the honest texts are stored"
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

/// A Handoff manifest as JSON.
fn manifest(namespace: &str, key: &str, spec: Value) -> Value {
    json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
           "metadata": {"name": name_for_key(key), "namespace": namespace},
           "spec": spec})
}

/// What kubectl prints before the webhook's message.
const DENIED: &str = "admission webhook \"validate.handoff.dev\" denied the request";

/// `kubectl create --dry-run=server -f -` of one object.
fn create_dry_run(env: &TestEnv, object: &Value) -> std::process::Output {
    tokio::task::block_in_place(|| {
        kubectl_stdin(
            env,
            &["create", "--dry-run=server", "-f", "-"],
            &object.to_string(),
        )
    })
}

/// Asserts `message` is the webhook's refusal of `field` holding `text`,
/// named by `rule`, its line and its column, without the secret.
fn refused_by_webhook(message: &str, field: &str, rule: &str, text: &str) {
    names_without_echo(
        message,
        &[
            DENIED,
            &format!("spec.{field}: no credentials"),
            &place(rule, text),
        ],
        text,
    );
}

/// The webhook's refusal of a write through the API, as its message.
fn api_refusal(result: Result<Handoff, kube::Error>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{what}: {status:?}");
            status.message
        }
        other => panic!("{what} was not refused by the webhook: {other:?}"),
    }
}

/// The issue's 26 credentials and 14 honest texts, as a user tried them:
/// `kubectl create --dry-run=server` through the installation's webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issue_cases_through_kubectl_create_dry_run() {
    let env = tokio::task::block_in_place(installed);
    let ns = env.namespace("secrets-kubectl").await;
    for (i, (rule, text)) in issue_credentials().iter().enumerate() {
        let key = format!("tp-{i}");
        let object = manifest(
            &ns,
            &key,
            json!({"handoffKey": key, "project": "shop", "body": body(text)}),
        );
        let out = create_dry_run(env, &object);
        assert!(!out.status.success(), "admitted: {text:?}");
        refused_by_webhook(
            &String::from_utf8_lossy(&out.stderr),
            "body",
            rule,
            &body(text),
        );
    }
    for (i, text) in issue_honest().iter().enumerate() {
        let key = format!("nm-{i}");
        let object = manifest(
            &ns,
            &key,
            json!({"handoffKey": key, "project": "shop", "body": body(text)}),
        );
        let out = create_dry_run(env, &object);
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains("created (server dry run)"),
            "the honest text {text:?} was refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_corpus_through_the_webhook() {
    let env = tokio::task::block_in_place(installed);
    let ns = env.namespace("secrets-webhook").await;
    let handoffs: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let offers: Api<HandoffOffer> = Api::namespaced(env.client().await, &ns);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let object = |key: &str, spec: Value| -> Handoff {
        serde_json::from_value(manifest(&ns, key, spec)).expect("a Handoff")
    };
    let positives = true_positives();
    for (i, (rule, text)) in positives.iter().enumerate() {
        let key = format!("tp-{i}");
        let h = object(
            &key,
            json!({"handoffKey": key, "project": "shop", "body": body(text)}),
        );
        let message = api_refusal(handoffs.create(&dry_run, &h).await, text);
        refused_by_webhook(&format!("{DENIED}: {message}"), "body", rule, &body(text));
    }
    let aws = format!("AKIA{}", fill("QZ7HX3MK2WJ5RT4B", 16));
    let url = "https://bot:hunter2x9@git.shop.internal/org/repo";
    for (field, spec) in credential_in_each_field("handoffKey", "ok", &aws, url) {
        let key = spec["handoffKey"].as_str().unwrap_or_default().to_owned();
        let value = spec[field].as_str().unwrap_or_default().to_owned();
        let rule = if field == "repo" {
            "password-in-url"
        } else {
            "aws-access-token"
        };
        let message = api_refusal(handoffs.create(&dry_run, &object(&key, spec)).await, field);
        refused_by_webhook(&format!("{DENIED}: {message}"), field, rule, &value);
    }
    // An offer carries a copy of handoff text: the same detector holds.
    let (rule, text) = &positives[0];
    let offer: HandoffOffer = serde_json::from_value(json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "HandoffOffer",
        "metadata": {"name": "dev-lead-1", "namespace": ns},
        "spec": {"project": "shop", "to": "dev-lead", "fromKey": "from", "body": body(text)}}))
    .expect("an offer");
    match offers.create(&PostParams::default(), &offer).await {
        Err(kube::Error::Api(status)) => {
            refused_by_webhook(
                &format!("{DENIED}: {}", status.message),
                "body",
                rule,
                &body(text),
            );
        }
        other => panic!("the offer was not refused: {other:?}"),
    }
    assert!(offers.get_opt("dev-lead-1").await.expect("get").is_none());

    let honest = honest_texts();
    for (i, text) in honest.iter().enumerate() {
        let key = format!("nm-{i}");
        let h = object(
            &key,
            json!({"handoffKey": key, "project": "shop", "body": body(text)}),
        );
        if let Err(err) = handoffs.create(&PostParams::default(), &h).await {
            panic!("the honest text {text:?} was refused: {err}");
        }
    }
    assert_eq!(
        common::objects::stored_keys(env, &ns).await,
        near_miss_keys(honest.len()),
        "exactly the honest texts are stored"
    );

    // The largest body the schema admits is scanned and admitted.
    let filler = "- checked the parser again; sha 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n";
    let mut largest = body(&filler.repeat(MAX_BODY_CHARS / filler.len()));
    largest.truncate(MAX_BODY_CHARS);
    let h = object(
        "largest",
        json!({"handoffKey": "largest", "project": "shop", "body": largest}),
    );
    handoffs
        .create(&PostParams::default(), &h)
        .await
        .expect("the largest body is admitted");

    // An UPDATE that adds a credential is refused and changes nothing.
    let before = handoffs.get(&name_for_key("nm-0")).await.expect("get");
    let mut edited = before.clone();
    edited.spec.body = body(text);
    let message = api_refusal(
        handoffs
            .replace(&name_for_key("nm-0"), &PostParams::default(), &edited)
            .await,
        "the update",
    );
    refused_by_webhook(&format!("{DENIED}: {message}"), "body", rule, &body(text));
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
    let out = tokio::task::block_in_place(|| {
        kubectl_stdin(env, &["apply", "-f", "-"], &poor.to_string())
    });
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
    let out = tokio::task::block_in_place(|| {
        kubectl_stdin(env, &["apply", "-f", "-"], &fixed.to_string())
    });
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
    let out = tokio::task::block_in_place(|| {
        kubectl_stdin(env, &["apply", "-f", "-"], &manifest.to_string())
    });
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
