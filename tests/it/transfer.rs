//! `handoff export` and `handoff import` as a person runs them: the built
//! binary with the test control plane's kubeconfig, the controller
//! counting into the shared PostgreSQL mirror (for `--history`). Handoffs
//! of two projects, one with three revisions, and a twin made by hand
//! (the shared plane has no admission webhook) go from namespace A to
//! namespace B and are compared field by field; importing again changes
//! no resourceVersion; a credential, a duplicated key or a malformed field
//! refuses the file and writes nothing.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::env;
use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_core::api::{Handoff, HandoffSpec};
use handoff_testkit::controller::{Scene, postgres};
use handoff_testkit::spec::{Fields, counted, spec};
use handoff_testkit::wait::eventually;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

/// An AWS access key id the credential scan finds (not a real one).
const AWS_KEY: &str = "AKIAQZ7HX3MK2WJ5RT4B";

fn handoff(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("HANDOFF_POSTGRES_URL")
        .output()
        .expect("run handoff")
}

fn succeeded(out: &Output) -> (String, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "expected a refusal");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of an export, each as JSON.
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The file of `lines`, with the end line's count set to the entries'.
fn file_of(mut lines: Vec<Value>) -> String {
    let entries = lines.len() - 2;
    let last = lines.len() - 1;
    lines[last]["handoffs"] = Value::from(entries);
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Every handoff of `api`, by name.
async fn objects(api: &Api<Handoff>) -> BTreeMap<String, Handoff> {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|h| (h.name_any(), h))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_goes_to_another_and_back_unchanged_and_bad_files_write_nothing() {
    let env = env();
    let kubeconfig = env.kubeconfig_path();
    let a = Scene::new("export-a").await;
    let (url, _) = postgres().await;
    let counter = a.controller("a").mirror(&url).start(a.client.clone());

    let shop1 = [
        "## State\nstarted\n",
        "## State\nhalf\n",
        "## State\ndone\n## Next\nship\n",
    ];
    for (i, body) in shop1.iter().enumerate() {
        a.store
            .write(
                &spec("shop/1")
                    .repo("org/a")
                    .kind("issue")
                    .body(*body)
                    .by("alice"),
            )
            .await
            .expect("write");
        counted(&a.api, "shop/1", i64::try_from(i + 1).expect("small")).await;
    }
    a.store
        .write(&spec("shop/日本 2").body("## State\nunicode key\n"))
        .await
        .expect("write");
    a.store
        .write(
            &spec("ops/1")
                .project("ops")
                .kind("incident")
                .body("## State\npager\n"),
        )
        .await
        .expect("write");
    counted(&a.api, "shop/日本 2", 1).await;
    counted(&a.api, "ops/1", 1).await;
    // A twin: the key of shop/1 under a name of its own.
    a.api
        .create(
            &PostParams::default(),
            &Handoff::new("my-twin", spec("shop/1").body("## State\nimpostor\n")),
        )
        .await
        .expect("the twin (no webhook on the shared plane)");

    // Export with the mirror's history, once it holds shop/1's three revisions.
    let dir = tempfile::tempdir().expect("tempdir");
    let exported = dir.path().join("a.jsonl");
    let path = exported.to_str().expect("utf-8 path");
    let stderr = eventually(
        "shop/1's 3 revisions in the export",
        Duration::from_secs(60),
        || {
            let out = handoff(
                kubeconfig,
                &[
                    "export",
                    "-n",
                    &a.ns,
                    "-o",
                    path,
                    "--history",
                    "--postgres-url",
                    &url,
                ],
            );
            async move {
                let (_, stderr) = succeeded(&out);
                let text = std::fs::read_to_string(path).expect("the file");
                let history = lines(&text)
                    .iter()
                    .find(|l| l["spec"]["handoffKey"] == "shop/1")
                    .and_then(|l| l["history"].as_array().map(Vec::len));
                (history == Some(3)).then_some(stderr)
            }
        },
    )
    .await;
    assert!(
        stderr.contains(&format!("skipped {}/my-twin", a.ns)) && stderr.contains("a twin or squat"),
        "{stderr}"
    );
    assert!(
        stderr.contains("3 handoff(s) exported, 1 skipped"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&exported).expect("the file");
    let file = lines(&text);
    assert_eq!(file.len(), 5, "header, three entries, end: {text}");
    assert_eq!(file[0]["apiVersion"], "handoff.dev/export/v1");
    assert_eq!(file[0]["namespace"], a.ns.as_str());
    assert_eq!(
        file[4],
        serde_json::json!({"kind": "HandoffExportEnd", "handoffs": 3})
    );
    let source = objects(&a.api).await;
    for entry in &file[1..4] {
        let name = entry["name"].as_str().expect("name");
        let h = &source[name];
        assert_eq!(
            entry["spec"],
            serde_json::to_value(&h.spec).expect("spec"),
            "{name}"
        );
        let status = h.status.as_ref().expect("counted");
        assert_eq!(
            entry["revision"],
            Value::from(status.revision.expect("revision"))
        );
        let updated = status.updated_at.as_ref().expect("updatedAt").0.to_string();
        assert_eq!(entry["updatedAt"], updated.as_str());
    }
    let history = file
        .iter()
        .find(|l| l["spec"]["handoffKey"] == "shop/1")
        .expect("shop/1")["history"]
        .clone();
    let bodies: Vec<&str> = history
        .as_array()
        .expect("history")
        .iter()
        .map(|r| r["body"].as_str().expect("body"))
        .collect();
    assert_eq!(bodies, shop1, "oldest first");
    assert_eq!(history[0]["revision"], 1);
    assert_eq!(history[0]["createdBy"], "alice");

    // One project only.
    let (ops, _) = succeeded(&handoff(
        kubeconfig,
        &["export", "-n", &a.ns, "--project", "ops"],
    ));
    let ops = lines(&ops);
    assert_eq!(ops.len(), 3, "{ops:?}");
    assert_eq!(ops[1]["spec"]["handoffKey"], "ops/1");

    // Import into B: created, then equal to A field by field.
    let b_ns = env.namespace("import-b").await;
    let b: Api<Handoff> = Api::namespaced(a.client.clone(), &b_ns);
    let (dry, _) = succeeded(&handoff(
        kubeconfig,
        &["import", path, "-n", &b_ns, "--dry-run"],
    ));
    assert!(
        dry.contains("dry run: 3 to create, 0 unchanged, 0 to update"),
        "{dry}"
    );
    assert!(objects(&b).await.is_empty(), "a dry run wrote");
    let (out, stderr) = succeeded(&handoff(kubeconfig, &["import", path, "-n", &b_ns]));
    assert!(out.contains("3 created, 0 unchanged, 0 updated"), "{out}");
    assert!(
        stderr.contains("5 history revision(s) are not imported"),
        "{stderr}"
    );
    let copied = objects(&b).await;
    let originals: BTreeMap<String, &Handoff> = source
        .iter()
        .filter(|(n, _)| *n != "my-twin")
        .map(|(n, h)| (n.clone(), h))
        .collect();
    assert_eq!(
        copied.keys().collect::<Vec<_>>(),
        originals.keys().collect::<Vec<_>>()
    );
    for (name, h) in &originals {
        let copy = &copied[name];
        let want = HandoffSpec {
            created_by: None,
            ..h.spec.clone()
        };
        assert_eq!(copy.spec, want, "{name}: the spec, without the writer");
        assert_eq!(name, &name_for_key(&copy.spec.handoff_key));
        assert_eq!(
            copy.metadata.labels.clone().unwrap_or_default(),
            labels_for(&want.project, want.repo.as_deref(), want.kind.as_deref()),
            "{name}"
        );
    }

    // Again: nothing changes.
    let versions = |objects: &BTreeMap<String, Handoff>| -> Vec<Option<String>> {
        objects
            .values()
            .map(ResourceExt::resource_version)
            .collect()
    };
    let before = versions(&copied);
    let (out, _) = succeeded(&handoff(kubeconfig, &["import", path, "-n", &b_ns]));
    assert!(out.contains("0 created, 3 unchanged, 0 updated"), "{out}");
    assert_eq!(
        versions(&objects(&b).await),
        before,
        "a second import wrote"
    );

    // A different body in the target: refused, then replaced with --overwrite.
    let store = handoff_kube::store::HandoffStore::new(a.client.clone(), &b_ns);
    store
        .write(
            &spec("ops/1")
                .project("ops")
                .kind("incident")
                .body("## State\nchanged in B\n"),
        )
        .await
        .expect("write in B");
    let differs = refused(&handoff(kubeconfig, &["import", path, "-n", &b_ns]));
    assert!(
        differs.contains("key `ops/1`: the target holds a different handoff")
            && differs.contains("--overwrite")
            && differs.contains("nothing was written"),
        "{differs}"
    );
    let (out, _) = succeeded(&handoff(
        kubeconfig,
        &["import", path, "-n", &b_ns, "--overwrite"],
    ));
    assert!(out.contains("0 created, 2 unchanged, 1 updated"), "{out}");
    let ops1 = store.get("ops/1").await.expect("get").expect("ops/1");
    assert_eq!(ops1.spec.body, "## State\npager\n");

    // Bad files into C: refused by entry, key and field; nothing written.
    let c_ns = env.namespace("import-c").await;
    let c: Api<Handoff> = Api::namespaced(a.client.clone(), &c_ns);
    let write = |name: &str, lines: Vec<Value>| {
        let bad = dir.path().join(name);
        std::fs::write(&bad, file_of(lines)).expect("write the file");
        bad
    };
    let mut with_secret = file.clone();
    with_secret[2]["spec"]["body"] = Value::from(format!("## State\naws {AWS_KEY}\n"));
    let key2 = with_secret[2]["spec"]["handoffKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let mut twice = file.clone();
    twice.insert(2, file[1].clone());
    let key1 = file[1]["spec"]["handoffKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let mut malformed = file.clone();
    malformed[3]["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("project");
    let key3 = file[3]["spec"]["handoffKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let cases = [
        (
            "a credential in a body",
            write("secret.jsonl", with_secret),
            vec![
                format!("line 3, entry 2, key `{key2}`"),
                "invalid `spec.body`".to_owned(),
                "rule aws-access-token".to_owned(),
                "(not shown)".to_owned(),
            ],
        ),
        (
            "two entries of one key",
            write("twice.jsonl", twice),
            vec![format!(
                "entry 2, key `{key1}`: a twin: entry 1 holds the same key"
            )],
        ),
        (
            "a missing project",
            write("malformed.jsonl", malformed),
            vec![
                format!("line 4, entry 3, key `{key3}`"),
                "invalid `spec.project`: a string; it is missing".to_owned(),
            ],
        ),
    ];
    for (case, bad, fragments) in cases {
        let stderr = refused(&handoff(
            kubeconfig,
            &["import", bad.to_str().expect("utf-8"), "-n", &c_ns],
        ));
        assert!(stderr.contains("nothing was written"), "{case}: {stderr}");
        for fragment in fragments {
            assert!(
                stderr.contains(&fragment),
                "{case}: {fragment:?} not in {stderr}"
            );
        }
        assert!(
            !stderr.contains(AWS_KEY),
            "{case}: the secret is shown: {stderr}"
        );
        assert!(
            objects(&c).await.is_empty(),
            "{case}: something was written"
        );
    }

    // A twin in the target refuses the entry of its key.
    c.create(
        &PostParams::default(),
        &Handoff::new(
            "their-twin",
            spec("ops/1").project("ops").body("## State\nx\n"),
        ),
    )
    .await
    .expect("a twin in C");
    let twin = refused(&handoff(kubeconfig, &["import", path, "-n", &c_ns]));
    assert!(
        twin.contains("key `ops/1`: the target holds this key under the name \"their-twin\""),
        "{twin}"
    );
    assert_eq!(objects(&c).await.len(), 1, "only the twin");
    counter.stop().await;
}
