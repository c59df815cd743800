//! The release on a real node, in the order a platform team meets it:
//!
//! 1. `kubectl apply -f install.yaml` (no cert-manager, nothing made by
//!    hand): every Deployment rolls out, an honest write is admitted and a
//!    twin refused by its reason, through kubectl. Then it is deleted.
//! 2. `helm install` of the packaged chart: the same.
//! 3. `helm upgrade` to a new image (the release re-tagged) while writers
//!    write continuously through the API and through the bridge: no write
//!    fails, none is lost, every one is counted by the controller, and the
//!    leader hands over to a Pod of the new image.
//! 4. `helm uninstall`: the CRDs and every handoff stay (docs/install.md).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::handoff::view::counted;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};

use crate::dist::{self, Dist, NEXT_TAG, REPOSITORY};
use crate::harness::{SYSTEM, e2e, kubectl, kubectl_stdin, must};
use crate::load::{BridgeWriter, Load, Tally};
use crate::writes::lease_holder;
use handoff_testkit::wait::eventually;

/// The Deployments an installation rolls out.
const DEPLOYMENTS: [&str; 3] = ["handoff-webhook", "handoff-controller", "handoff-bridge"];

/// The Helm release's name.
const RELEASE: &str = "handoff";

/// Writers through the API during the upgrade (plus one through the bridge).
const API_WRITERS: usize = 3;

// Multi-threaded: the writers must go on while helm and kubectl block.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_release_installs_upgrades_under_load_and_uninstalls_keeping_the_handoffs() {
    let dist = dist::built();
    dist::import(&dist);
    let helm = dist::tool("helm");

    eprintln!(
        "release tier: {} built and imported; kubectl apply -f install.yaml",
        dist.version
    );
    let manifest = dist.file("install.yaml");
    let manifest = manifest.to_string_lossy();
    must(
        kubectl(&["apply", "--server-side", "-f", &manifest]),
        "kubectl apply -f install.yaml",
    );
    rolled_out("install.yaml");
    admits_honest_writes_and_refuses_twins("install.yaml").await;
    // While the controller runs to release their finalizers, as an operator
    // empties an installation before deleting it (docs/install.md).
    must(
        kubectl(&[
            "-n",
            SYSTEM,
            "delete",
            "handoffs",
            "--all",
            "--wait",
            "--timeout=60s",
        ]),
        "delete the handoffs of the install.yaml installation",
    );
    must(
        kubectl(&["delete", "-f", &manifest, "--wait", "--timeout=180s"]),
        "kubectl delete -f install.yaml",
    );
    eprintln!("release tier: helm install");

    must(
        helm_run(
            &helm,
            &[
                "install",
                RELEASE,
                &dist.chart().to_string_lossy(),
                "--namespace",
                SYSTEM,
                "--create-namespace",
                "--wait",
                "--timeout=180s",
            ],
        ),
        "helm install",
    );
    rolled_out("the chart");
    admits_honest_writes_and_refuses_twins("the chart").await;

    let tally = upgrade_under_load(&helm, &dist).await;
    let lost = lost(&tally).await;
    let through_bridge = tally
        .written
        .keys()
        .filter(|k| k.starts_with("upgrade/mcp"))
        .count();
    println!(
        "upgrade under load: {} writes attempted, {} failed, {} handoffs written ({} through the bridge), {} lost",
        tally.attempted,
        tally.failed.len(),
        tally.written.len(),
        through_bridge,
        lost.len()
    );
    assert!(
        tally.failed.is_empty(),
        "writes failed during the upgrade: {:#?}",
        tally.failed
    );
    assert!(
        lost.is_empty(),
        "handoffs lost during the upgrade: {lost:#?}"
    );
    assert!(through_bridge > 0, "the bridge's writer wrote nothing");
    let before_uninstall = keys(&handoffs().await);
    eprintln!("release tier: helm uninstall");

    must(
        helm_run(
            &helm,
            &[
                "uninstall",
                RELEASE,
                "--namespace",
                SYSTEM,
                "--wait",
                "--timeout=180s",
            ],
        ),
        "helm uninstall",
    );
    let crds = must(kubectl(&["get", "crd", "-o", "name"]), "list the CRDs");
    assert!(
        crds.contains("handoffs.handoff.dev"),
        "helm uninstall keeps the CRDs: {crds}"
    );
    assert_eq!(
        keys(&handoffs().await),
        before_uninstall,
        "helm uninstall keeps every handoff"
    );
}

/// `helm <args>` against the e2e cluster.
fn helm_run(helm: &Path, args: &[&str]) -> Output {
    Command::new(helm)
        .args(args)
        .env("KUBECONFIG", e2e().env.kubeconfig_path())
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("handoff-e2e-helm/cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("handoff-e2e-helm/config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("handoff-e2e-helm/data"),
        )
        .output()
        .unwrap_or_else(|e| panic!("run helm: {e}"))
}

/// Waits until every Deployment of the installation has rolled out.
fn rolled_out(what: &str) {
    for deployment in DEPLOYMENTS {
        let rolled = kubectl(&[
            "-n",
            SYSTEM,
            "rollout",
            "status",
            &format!("deployment/{deployment}"),
            "--timeout=180s",
        ]);
        assert!(
            rolled.status.success(),
            "{what}: deployment/{deployment} did not roll out: {}",
            String::from_utf8_lossy(&rolled.stderr)
        );
    }
}

/// Through kubectl: an honest handoff is admitted, a twin (a name not
/// derived from its key) refused by the webhook's reason.
async fn admits_honest_writes_and_refuses_twins(what: &str) {
    let key = format!("release/{}#1", what.replace(['.', ' '], "-"));
    let honest = handoff_yaml(&name_for_key(&key), &key);
    // The webhook's first certificate may still be on its way into the
    // configuration: the first writes may be refused for TLS, never let in.
    eventually(
        &format!("{what}: an honest handoff is admitted"),
        Duration::from_secs(120),
        || async {
            let out = kubectl_stdin(&["apply", "-n", SYSTEM, "-f", "-"], &honest);
            out.status
                .success()
                .then_some(())
                .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
        },
    )
    .await;
    let twin = kubectl_stdin(
        &["apply", "-n", SYSTEM, "-f", "-"],
        &handoff_yaml("a-twin", &key),
    );
    let refusal = String::from_utf8_lossy(&twin.stderr);
    assert!(!twin.status.success(), "{what}: a twin was admitted");
    assert!(
        refusal.contains("denied the request") && refusal.contains(&name_for_key(&key)),
        "{what}: the twin is refused by the webhook, naming the derived name: {refusal}"
    );
}

/// Pure: a Handoff as a person writes it for kubectl.
fn handoff_yaml(name: &str, key: &str) -> String {
    format!(
        "apiVersion: handoff.dev/v1alpha1\nkind: Handoff\nmetadata:\n  name: {name}\n\
         spec:\n  handoffKey: \"{key}\"\n  project: shop\n  body: \"state: installed\"\n"
    )
}

/// `helm upgrade` to the re-tagged image while the writers write; returns
/// their tally once the leader has handed over and more writes followed.
async fn upgrade_under_load(helm: &Path, dist: &Dist) -> Tally {
    let (old_leader, transitions) = lease_holder().await.unwrap_or_else(|e| panic!("{e}"));
    let client = e2e().env.client().await;
    let load = Load::start(
        Api::namespaced(client.clone(), SYSTEM),
        API_WRITERS,
        vec![bridge_writer().await],
    );
    writes_go_on(&load, "before the upgrade").await;
    eprintln!(
        "release tier: helm upgrade to {REPOSITORY}:{NEXT_TAG} while {} writers write",
        API_WRITERS + 1
    );
    let (started, attempted) = (std::time::Instant::now(), load.attempted());
    must(
        helm_run(
            helm,
            &[
                "upgrade",
                RELEASE,
                &dist.chart().to_string_lossy(),
                "--namespace",
                SYSTEM,
                "--reuse-values",
                "--set",
                &format!("image.repository={REPOSITORY}"),
                "--set",
                &format!("image.tag={NEXT_TAG}"),
                "--set",
                "image.digest=",
                "--wait",
                "--timeout=300s",
            ],
        ),
        "helm upgrade to the re-tagged image",
    );
    rolled_out("the upgrade");
    let (leader, after) = eventually(
        "the leader hands over to a Pod of the new image",
        Duration::from_secs(120),
        || async {
            let (holder, after) = lease_holder().await?;
            let pod = crate::writes::pod(&holder).await?;
            let image = pod
                .spec
                .map(|s| s.containers[0].image.clone().unwrap_or_default())
                .unwrap_or_default();
            (holder != old_leader && image.ends_with(NEXT_TAG))
                .then(|| (holder.clone(), after))
                .ok_or(format!("holder {holder} runs {image}"))
        },
    )
    .await;
    only_new_pods_remain().await;
    println!(
        "the upgrade (helm upgrade --wait, every rollout, the Lease handed over, every old Pod gone) took {:.0?}; \
         the writers attempted {} writes meanwhile",
        started.elapsed(),
        load.attempted() - attempted
    );
    println!(
        "the leader handed over from {old_leader} to {leader} (transitions {transitions} -> {after})"
    );
    writes_go_on(&load, "after the upgrade").await;
    load.stop().await
}

/// Waits until every Pod of the installation runs the new image and none
/// is still terminating (the old ones' `preStop` and drain are over).
async fn only_new_pods_remain() {
    let pods: Api<Pod> = Api::namespaced(e2e().env.client().await, SYSTEM);
    let selector = ListParams::default().labels("app.kubernetes.io/part-of=handoff");
    eventually(
        "only Pods of the new image remain",
        Duration::from_secs(120),
        || async {
            let listed = pods.list(&selector).await.map_err(|e| e.to_string())?;
            let old: Vec<String> = listed
                .items
                .iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_some()
                        || p.spec.as_ref().is_some_and(|s| {
                            s.containers.iter().any(|c| {
                                !c.image.as_deref().unwrap_or_default().ends_with(NEXT_TAG)
                            })
                        })
                })
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            old.is_empty()
                .then_some(())
                .ok_or(format!("still running: {old:?}"))
        },
    )
    .await;
}

/// Waits until the writers have made 20 more attempts.
async fn writes_go_on(load: &Load, when: &str) {
    let from = load.attempted();
    eventually(
        &format!("writes go on {when}"),
        Duration::from_secs(60),
        || async {
            let now = load.attempted();
            (now >= from + 20)
                .then_some(())
                .ok_or(format!("{} more", now - from))
        },
    )
    .await;
}

/// A writer agent (config/agents' `agent-implement`) through the bridge's
/// Service, as the host (the node) reaches its ClusterIP.
async fn bridge_writer() -> BridgeWriter {
    let services: Api<Service> = Api::namespaced(e2e().env.client().await, SYSTEM);
    let service = services
        .get("handoff-bridge")
        .await
        .unwrap_or_else(|e| panic!("the bridge's Service: {e}"));
    let ip = service.spec.and_then(|s| s.cluster_ip).unwrap_or_default();
    let token = must(
        kubectl(&[
            "-n",
            SYSTEM,
            "create",
            "token",
            "agent-implement",
            "--duration=1h",
        ]),
        "a token of agent-implement",
    );
    BridgeWriter {
        addr: format!("{ip}:8080"),
        host: format!("handoff-bridge.{SYSTEM}.svc"),
        token: token.trim().to_owned(),
    }
}

/// Pure: the handoffs' keys.
fn keys(handoffs: &[Handoff]) -> std::collections::BTreeSet<String> {
    handoffs
        .iter()
        .map(|h| h.spec.handoff_key.clone())
        .collect()
}

/// Every handoff of the installation's namespace.
async fn handoffs() -> Vec<Handoff> {
    let api: Api<Handoff> = Api::namespaced(e2e().env.client().await, SYSTEM);
    api.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list the handoffs: {e}"))
        .items
}

/// The written keys whose handoff is missing, holds another body, or is
/// not counted by the controller once it settled.
async fn lost(tally: &Tally) -> Vec<String> {
    let settled = eventually(
        "every written handoff is counted",
        Duration::from_secs(120),
        || async {
            let stored = handoffs().await;
            let uncounted = stored.iter().filter(|h| counted(h).is_none()).count();
            (uncounted == 0)
                .then_some(stored)
                .ok_or(format!("{uncounted} not counted yet"))
        },
    )
    .await;
    tally
        .written
        .iter()
        .filter(|(key, body)| {
            !settled
                .iter()
                .any(|h| &h.spec.handoff_key == *key && &h.spec.body == *body)
        })
        .map(|(key, body)| format!("{key}: {body}"))
        .collect()
}
