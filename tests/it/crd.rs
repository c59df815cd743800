//! The `Handoff` CRD against a real kube-apiserver: applied with `kubectl` and
//! the kube client, found by label and by field selector, documented for
//! `kubectl explain`, and bad objects refused with clear messages and nothing
//! stored.

use std::io::Write;
use std::process::{Output, Stdio};

use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_core::api::{Handoff, HandoffSpec, MAX_BODY_CHARS};
use handoff_core::names::LOCAL_FIELD_MANAGER as FIELD_MANAGER;
use handoff_testkit as testing;
use handoff_testkit::spec::{Fields, spec};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

fn handoff(key: &str, project: &str, repo: Option<&str>) -> Handoff {
    let mut spec = spec(key)
        .project(project)
        .kind("issue")
        .body(format!("## State\nworking on {key}\n## Next\n- finish"))
        .by("system:serviceaccount:agents:implement");
    spec.repo = repo.map(str::to_owned);
    let mut h = Handoff::new(&name_for_key(key), spec.clone());
    h.metadata.labels = Some(labels_for(
        &spec.project,
        spec.repo.as_deref(),
        spec.kind.as_deref(),
    ));
    h
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = testing::shared().kubectl();
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl output")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn kubectl_apply_and_label_listing_show_the_columns() {
    let env = testing::shared();
    let ns = env.namespace("crd-kubectl").await;
    let h = handoff("acme/api#42", "shop", Some("acme-api"));
    let yaml = serde_saphyr::to_string(&h).expect("yaml");
    let out = kubectl(&["apply", "-n", &ns, "-f", "-"], Some(&yaml));
    assert!(out.status.success(), "kubectl apply: {}", text(&out));

    let other = handoff("other#1", "other-project", None);
    let out = kubectl(
        &["apply", "-n", &ns, "-f", "-"],
        Some(&serde_saphyr::to_string(&other).expect("yaml")),
    );
    assert!(out.status.success(), "kubectl apply: {}", text(&out));

    let out = kubectl(&["get", "handoffs", "-n", &ns, "-l", "project=shop"], None);
    assert!(out.status.success(), "{}", text(&out));
    let listing = String::from_utf8_lossy(&out.stdout);
    let header: Vec<_> = listing
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME", "KEY", "PROJECT", "REPO", "KIND", "UPDATED", "REVISION", "TOKENS", "LINT",
            "AGE"
        ],
        "{listing}"
    );
    assert!(
        listing.contains("acme/api#42") && listing.contains("acme-api"),
        "{listing}"
    );
    assert!(
        !listing.contains("other#1"),
        "label selector leaked another project: {listing}"
    );

    // The status the controller writes, shown by the columns: revision,
    // tokens, the Linted condition's reason (a filtered JSONPath) and, with
    // -o wide, the writer and the origin.
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let status = serde_json::json!({"status": {
        "updatedAt": "2026-01-01T00:00:00Z",
        "revision": 3,
        "approxTokens": 17,
        "origin": "Rescued",
        "conditions": [
            {"type": "Mirrored", "status": "True", "reason": "RowCurrent", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Linted", "status": "False", "reason": "Warnings", "message": "no Next section",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    }});
    api.patch_status(
        &name_for_key("acme/api#42"),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .expect("status");
    let wide = text(&kubectl(
        &["get", "ho", "-n", &ns, "-l", "project=shop", "-o", "wide"],
        None,
    ));
    let rows: Vec<Vec<&str>> = wide
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows.first().map(|h| h[6..].to_vec()),
        Some(vec![
            "REVISION", "TOKENS", "LINT", "WRITER", "ORIGIN", "AGE"
        ]),
        "{wide}"
    );
    assert_eq!(
        rows.get(1).map(|r| r[6..11].to_vec()),
        Some(vec![
            "3",
            "17",
            "Warnings",
            "system:serviceaccount:agents:implement",
            "Rescued"
        ]),
        "{wide}"
    );

    let by_category = text(&kubectl(&["get", "agents", "-n", &ns], None));
    assert!(
        by_category.contains("acme/api#42"),
        "category `agents`: {by_category}"
    );
}

#[tokio::test]
async fn kube_client_apply_and_field_selector_on_a_non_label_repo() {
    let env = testing::shared();
    let ns = env.namespace("crd-fields").await;
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let params = PatchParams::apply(FIELD_MANAGER);
    for h in [
        handoff("k1", "shop", Some("org/repo")),
        handoff("k2", "shop", Some("org/other")),
    ] {
        api.patch(
            &h.metadata.name.clone().unwrap_or_default(),
            &params,
            &Patch::Apply(&h),
        )
        .await
        .expect("server-side apply");
    }
    let stored = api.get(&name_for_key("k1")).await.expect("get");
    assert_eq!(stored.spec.repo.as_deref(), Some("org/repo"));
    assert!(
        !stored
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("repo"),
        "org/repo is no label value"
    );

    let out = kubectl(
        &[
            "get",
            "handoffs",
            "-n",
            &ns,
            "--field-selector",
            "spec.repo=org/repo",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        listing.lines().count(),
        2,
        "header + one row expected: {listing}"
    );
    assert!(
        listing.contains("k1") && !listing.contains("k2"),
        "{listing}"
    );

    let by_key = api
        .list(&ListParams::default().fields("spec.handoffKey=k2"))
        .await
        .expect("list");
    assert_eq!(by_key.items.len(), 1);
    assert_eq!(by_key.items[0].spec.handoff_key, "k2");
}

#[test]
fn kubectl_explain_shows_the_field_docs() {
    let out = kubectl(&["explain", "handoff.spec.body"], None);
    assert!(out.status.success(), "{}", text(&out));
    let doc = String::from_utf8_lossy(&out.stdout);
    assert!(
        doc.contains("A summary, not a log") && doc.contains("32768"),
        "{doc}"
    );
    let key_doc = text(&kubectl(&["explain", "handoffs.spec.handoffKey"], None));
    assert!(
        key_doc.contains("cannot") && key_doc.contains("change after creation"),
        "{key_doc}"
    );
}

/// Each case: a spec change, the words the apiserver's refusal must contain.
#[tokio::test]
async fn invalid_handoffs_are_refused_clearly_and_nothing_is_stored() {
    let env = testing::shared();
    let ns = env.namespace("crd-invalid").await;
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    type Mutate = fn(&mut HandoffSpec);
    let cases: [(&str, Mutate, &[&str]); 9] = [
        (
            "project not a label value",
            |s| s.project = "Not A Label!".into(),
            &["spec.project", "valid label value"],
        ),
        (
            "project too long",
            |s| s.project = "p".repeat(64),
            &["spec.project", "63"],
        ),
        (
            "empty project",
            |s| s.project = String::new(),
            &["spec.project"],
        ),
        (
            "body over the limit",
            |s| s.body = "x".repeat(MAX_BODY_CHARS + 1),
            &["spec.body", "32768"],
        ),
        ("empty body", |s| s.body = String::new(), &["spec.body"]),
        (
            "NUL in body",
            |s| s.body = "a\0b".into(),
            &["spec.body", "NUL"],
        ),
        (
            "newline in key",
            |s| s.handoff_key = "a\nb".into(),
            &["spec.handoffKey", "control characters"],
        ),
        (
            "key over 1024 characters",
            |s| s.handoff_key = "k".repeat(1025),
            &["spec.handoffKey", "1024"],
        ),
        (
            "key of 513 characters but 1026 bytes",
            |s| s.handoff_key = "é".repeat(513),
            &["spec.handoffKey", "at most 1024 bytes of UTF-8"],
        ),
    ];
    for (what, mutate, expected) in cases {
        let mut h = handoff("refused", "shop", None);
        mutate(&mut h.spec);
        h.metadata.labels = None;
        let err = api
            .create(&PostParams::default(), &h)
            .await
            .expect_err(what);
        let msg = err.to_string();
        for word in expected {
            assert!(msg.contains(word), "{what}: {word:?} missing from {msg}");
        }
        assert!(
            api.get_opt(&name_for_key("refused"))
                .await
                .expect("get")
                .is_none(),
            "{what}: stored anyway"
        );
    }

    let missing_project = serde_json::json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
        "metadata": {"name": "no-project"},
        "spec": {"handoffKey": "no-project", "body": "x"},
    });
    let out = kubectl(
        &["create", "-n", &ns, "-f", "-"],
        Some(&missing_project.to_string()),
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("spec.project: Required value"),
        "{}",
        text(&out)
    );
    assert!(api.get_opt("no-project").await.expect("get").is_none());
}

#[tokio::test]
async fn handoff_key_is_immutable() {
    let env = testing::shared();
    let ns = env.namespace("crd-immutable").await;
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let h = handoff("stable-key", "shop", None);
    let name = name_for_key("stable-key");
    api.create(&PostParams::default(), &h)
        .await
        .expect("create");

    let patch = serde_json::json!({"spec": {"handoffKey": "another-key", "body": "changed"}});
    let err = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("key change must be refused");
    assert!(err.to_string().contains("handoffKey is immutable"), "{err}");

    let stored = api.get(&name).await.expect("get");
    assert_eq!(stored.spec.handoff_key, "stable-key");
    assert_eq!(
        stored.spec.body, h.spec.body,
        "the refused patch changed the body"
    );
}

#[tokio::test]
async fn a_thousand_character_key_round_trips_through_kubectl() {
    let env = testing::shared();
    let ns = env.namespace("crd-long-key").await;
    let key = format!("s3://bucket/{}", "conversation/".repeat(76));
    assert!(
        key.chars().count() >= 1000 && key.len() <= 1024,
        "{}",
        key.len()
    );
    let name = name_for_key(&key);
    let manifest = serde_json::json!({
        "apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff",
        "metadata": {"name": name},
        "spec": {"handoffKey": key, "project": "shop", "body": "state: a long key"},
    });
    let out = kubectl(
        &["apply", "--server-side", "-n", &ns, "-f", "-"],
        Some(&manifest.to_string()),
    );
    assert!(
        out.status.success(),
        "apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(
        &[
            "get",
            "handoff",
            &name,
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.handoffKey}",
        ],
        None,
    );
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), key);
}
