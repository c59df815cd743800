//! Optimistic concurrency (`write_handoff{expected_revision}` and
//! [`HandoffStore::write_if_at`]): of sixteen writers expecting the same
//! revision exactly one wins and the others get a conflict; a stale
//! expectation writes nothing. With a controller counting revisions, against
//! the real kube-apiserver, through the store API and the real MCP client.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Bridge, agent_token, apply_agent_roles, call, env, err_text, eventually, ok};
use handoff::api::naming::name_for_key;
use handoff::api::{Handoff, HandoffSpec};
use handoff::controller::leader::LeaseConfig;
use handoff::controller::{self, ControllerMetrics, ControllerOptions};
use handoff::schedule::ttl::DefaultTtl;
use handoff::store::{HandoffStore, RevisionConflict, WriteError, WriteOutcome};
use handoff::time::SystemClock;
use kube::api::Api;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A controller counting the revisions of one namespace (and mirroring
/// them when given a PostgreSQL URL), for one test.
pub struct Counter {
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Counter {
    /// Starts a controller for `namespace` (its own Lease there).
    pub fn start(client: &kube::Client, namespace: &str, postgres_url: Option<&str>) -> Self {
        let shutdown = CancellationToken::new();
        let options = ControllerOptions {
            namespace: Some(namespace.to_owned()),
            lease: LeaseConfig {
                name: "handoff-controller".into(),
                namespace: namespace.to_owned(),
                identity: "a".into(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(250),
            },
            concurrency: 8,
            postgres_url: postgres_url.map(str::to_owned),
            resync_interval: Duration::from_secs(2),
            groom_interval: Duration::from_secs(60),
            ttl: Arc::new(DefaultTtl(None)),
            active_agent_selector: handoff::offers::decision::DEFAULT_ACTIVE_SELECTOR.into(),
            offer_retention: handoff::offers::activation::DEFAULT_OFFER_RETENTION,
            history: handoff::mirror::Retention::default(),
        };
        let task = tokio::spawn(controller::run(
            client.clone(),
            options,
            Arc::new(SystemClock),
            ControllerMetrics::new(),
            shutdown.clone(),
        ));
        Self { shutdown, task }
    }

    /// Stops the controller; fails the test if it failed.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("task").expect("controller");
    }
}

/// Waits until the controller has counted the latest write of `key` as
/// `revision`; returns the handoff then.
pub async fn counted(api: &Api<Handoff>, key: &str, revision: i64) -> Handoff {
    eventually(
        &format!("revision {revision} of {key} counted"),
        Duration::from_secs(60),
        || async {
            let h = api.get_opt(&name_for_key(key)).await.expect("get")?;
            let status = h.status.clone()?;
            (status.revision == Some(revision)
                && status.observed_generation == h.metadata.generation)
                .then_some(h)
        },
    )
    .await
}

fn spec(key: &str, body: &str) -> HandoffSpec {
    HandoffSpec {
        handoff_key: key.into(),
        project: "shop".into(),
        repo: Some("org/a".into()),
        kind: Some("issue".into()),
        body: body.into(),
        created_by: Some("writer".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_sixteen_store_writers_expecting_a_revision_wins() {
    let env = env();
    let ns = env.namespace("occ-store").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    let counter = Counter::start(&client, &ns, None);
    let store = HandoffStore::new(client.clone(), &ns);
    store
        .write(&spec("shared", "v1"))
        .await
        .expect("first write");
    counted(&api, "shared", 1).await;

    let writers = (0..16).map(|i| {
        let store = store.clone();
        async move {
            let body = format!("writer {i}");
            (
                body.clone(),
                store.write_if_at(&spec("shared", &body), 1).await,
            )
        }
    });
    let results = futures::future::join_all(writers).await;
    let mut winners = Vec::new();
    let mut conflicts = 0;
    for (body, result) in results {
        match result {
            Ok((WriteOutcome::Updated, stored)) => {
                assert_eq!(stored.spec.body, body);
                winners.push(body);
            }
            Err(WriteError::Conflict(c)) => {
                assert!(
                    matches!(
                        c,
                        RevisionConflict::Uncounted { expected: 1, .. }
                            | RevisionConflict::Moved {
                                expected: 1,
                                current: 2,
                                ..
                            }
                    ),
                    "{c:?}"
                );
                conflicts += 1;
            }
            other => panic!("{body}: {other:?}"),
        }
    }
    assert_eq!((winners.len(), conflicts), (1, 15), "{winners:?}");
    let stored = counted(&api, "shared", 2).await;
    assert_eq!(stored.spec.body, winners[0], "the winner's body is stored");

    // A stale expectation (revision 1, now 2) writes nothing.
    let before = stored.metadata.resource_version.clone();
    let stale = store
        .write_if_at(&spec("shared", "stale"), 1)
        .await
        .expect_err("stale");
    assert_eq!(
        stale.to_string(),
        format!(
            "conflict on `expected_revision`: you expected revision 1 of `shared`, but it is at \
             revision 2, written by writer at {}; nothing was written. Call get_handoff, merge your \
             changes into that revision, and write again with expected_revision 2",
            stored
                .status
                .as_ref()
                .and_then(|s| s.updated_at.as_ref())
                .expect("updatedAt")
                .0
        )
    );
    let after = api.get(&name_for_key("shared")).await.expect("get");
    assert_eq!(after.metadata.resource_version, before, "nothing written");
    assert_eq!(after.spec.body, winners[0]);

    // At the current revision the write goes ahead; on a missing key it cannot.
    let (outcome, _) = store
        .write_if_at(&spec("shared", "v3"), 2)
        .await
        .expect("current");
    assert_eq!(outcome, WriteOutcome::Updated);
    let missing = store
        .write_if_at(&spec("nobody", "x"), 1)
        .await
        .expect_err("missing")
        .to_string();
    assert!(missing.contains("no handoff exists for it"), "{missing}");
    assert!(
        api.get_opt(&name_for_key("nobody"))
            .await
            .expect("get")
            .is_none()
    );
    counter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_sixteen_mcp_writers_expecting_a_revision_wins() {
    let env = env();
    let ns = env.namespace("occ-mcp").await;
    let client = env.client().await;
    let api: Api<Handoff> = Api::namespaced(client.clone(), &ns);
    apply_agent_roles(env);
    let counter = Counter::start(&client, &ns, None);
    let bridge = Bridge::start(env, &ns);
    let token = agent_token(env, &ns, "agent", Some("implement"), Some("handoff-writer")).await;
    let write = |body: &str, expected: Option<i64>| {
        let mut args = json!({"handoff_key": "contended", "project": "shop", "body": body});
        if let Some(expected) = expected {
            args["expected_revision"] = json!(expected);
        }
        args
    };
    ok(&bridge.drive(
        &token,
        "",
        json!([call("write_handoff", write("v1", None))]),
    )[0]);
    counted(&api, "contended", 1).await;
    let got = bridge.drive(
        &token,
        "",
        json!([call("get_handoff", json!({"handoff_key": "contended"}))]),
    );
    assert_eq!(ok(&got[0])["handoff"]["revision"], json!(1));

    let args: Vec<Value> = (0..16)
        .map(|i| write(&format!("writer {i}"), Some(1)))
        .collect();
    let results = bridge.drive(
        &token,
        "",
        json!([{"op": "concurrent", "tool": "write_handoff", "args_list": args}]),
    );
    let answers = results[0]["results"].as_array().expect("results");
    let winners: Vec<&Value> = answers
        .iter()
        .filter(|a| a["is_error"] == json!(false))
        .collect();
    let conflicts = answers
        .iter()
        .filter(|a| {
            a["is_error"] == json!(true)
                && err_text(a).starts_with(
                    "conflict on `expected_revision`: you expected revision 1 of `contended`",
                )
        })
        .count();
    assert_eq!((winners.len(), conflicts), (1, 15), "{answers:?}");
    let winner = winners[0]["structured"]["handoff"]["body"].clone();
    let stored = counted(&api, "contended", 2).await;
    assert_eq!(
        json!(stored.spec.body),
        winner,
        "the winner's body is stored"
    );

    // Another agent's write made revision 1 stale: refused, nothing written.
    let before = stored.metadata.resource_version.clone();
    let stale = bridge.drive(
        &token,
        "",
        json!([call("write_handoff", write("stale", Some(1)))]),
    );
    let message = err_text(&stale[0]);
    assert!(
        message.contains("but it is at revision 2, written by system:serviceaccount:"),
        "{message}"
    );
    let after = api.get(&name_for_key("contended")).await.expect("get");
    assert_eq!(after.metadata.resource_version, before, "nothing written");

    // Refused by name: a revision below 1; without the argument, latest wins.
    let refused = bridge.drive(
        &token,
        "",
        json!([
            call("write_handoff", write("zero", Some(0))),
            call("write_handoff", write("latest", None)),
        ]),
    );
    let zero = err_text(&refused[0]);
    assert!(
        zero.contains("expected_revision") && zero.contains("1 or more") && zero.contains("got 0"),
        "{zero}"
    );
    assert_eq!(ok(&refused[1])["outcome"], json!("updated"));
    counter.stop().await;
}
