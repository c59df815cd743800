//! Tenancy: one bridge (without `--namespace`) for two teams onboarded with
//! `config/tenant`, each in its own namespace, with real ServiceAccount
//! tokens from `kubectl create token` and the real MCP client.

use crate::common;
use crate::common::objects::stored_keys;
use crate::install::{bridge_as_installed_for, installed, kubectl, must, root};

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::TestEnv;
use handoff_testkit::spec::{Fields, spec};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// Onboards a team into `namespace` the documented way: an overlay naming
/// the namespace over `config/tenant`, applied with `kubectl apply -k`.
fn onboard(env: &TestEnv, namespace: &str) {
    let overlays = root().join("target").join("tenancy-overlays");
    let dir = overlays.join(namespace);
    std::fs::create_dir_all(&dir).expect("overlay dir");
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             namespace: {namespace}\nresources:\n  - ../../../config/tenant\n"
        ),
    )
    .expect("overlay");
    let shown = dir.display().to_string();
    must(
        kubectl(env, &["apply", "--server-side", "-k", &shown]),
        &format!("onboarding {namespace}"),
    );
}

/// `kubectl create token <account> -n <namespace>`.
fn token(env: &TestEnv, namespace: &str, account: &str) -> String {
    must(
        kubectl(env, &["create", "token", account, "-n", namespace]),
        &format!("a token for {namespace}/{account}"),
    )
    .trim()
    .to_owned()
}

fn write(key: &str, body: &str) -> Value {
    common::call(
        "write_handoff",
        json!({"handoff_key": key, "project": "shop", "body": body}),
    )
}

/// Runs `plan` over HTTP against `url` with `token` (no profile header: the
/// ServiceAccount's label decides).
fn drive(url: &str, token: &str, plan: Value) -> Vec<Value> {
    drive_as(url, token, "", plan)
}

/// [`drive`] naming `profile` in the header (for accounts without the label).
fn drive_as(url: &str, token: &str, profile: &str, plan: Value) -> Vec<Value> {
    tokio::task::block_in_place(|| common::drive(&["http", url, token, profile], plan, &[]))
}

/// An agent Job of `to` in project `shop`, running (no status yet).
async fn agent_job(env: &TestEnv, namespace: &str, to: &str) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": format!("{to}-run"), "labels": {"handoff.dev/agent": to, "project": "shop"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "agent", "image": "agent:1"}]}}}
    }))
    .expect("job");
    Api::<Job>::namespaced(env.client().await, namespace)
        .create(&PostParams::default(), &job)
        .await
        .expect("create the agent Job");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_teams_share_one_bridge_and_never_see_each_other() {
    let env = installed();
    let a = env.namespace("team-a").await;
    let b = env.namespace("team-b").await;
    let people = env.namespace("people").await;
    onboard(env, &a);
    onboard(env, &b);
    // The teams' own controller (mirroring into PostgreSQL): the two team
    // namespaces are claimed for it, as a tenant running its own would.
    let claim = format!("tenancy-{a}");
    for namespace in [&a, &b] {
        must(
            kubectl(
                env,
                &[
                    "label",
                    "namespace",
                    namespace,
                    "--overwrite",
                    &format!("{}={claim}", handoff_core::names::CONTROLLER_LABEL),
                ],
            ),
            "claim the team namespace",
        );
    }
    let url_pg = tokio::task::spawn_blocking(handoff_testkit::shared_postgres_url)
        .await
        .expect("postgres");
    let controller = handoff_testkit::controller::InProcess::new(
        &a,
        "tenancy",
        std::sync::Arc::new(handoff_core::time::SystemClock),
    )
    .mirror(&url_pg)
    .options(|o| {
        o.namespace = None;
        o.namespace_selector = format!("{}={claim}", handoff_core::names::CONTROLLER_LABEL);
    })
    .start(env.client().await);
    let (bridge, _dir) = bridge_as_installed_for(env, None, &[]).await;
    let (via_pg, _pg_dir) = bridge_as_installed_for(env, None, &["--postgres-url", &url_pg]).await;
    let url = bridge.url().to_owned();
    let in_ns = |namespace: &str| format!("{url}/ns/{namespace}");
    let a_implement = token(env, &a, "agent-implement");
    let b_implement = token(env, &b, "agent-implement");
    let b_refine = token(env, &b, "agent-refine");

    // One key, two teams: two objects, each team reads its own.
    let wrote_a = drive(&url, &a_implement, json!([write("k", "team a's body")]));
    let wrote_b = drive(&url, &b_implement, json!([write("k", "team b's body")]));
    assert_eq!(common::ok(&wrote_a[0])["outcome"], "created", "{wrote_a:?}");
    assert_eq!(common::ok(&wrote_b[0])["outcome"], "created", "{wrote_b:?}");
    for (namespace, body) in [(&a, "team a's body"), (&b, "team b's body")] {
        let stored = Api::<Handoff>::namespaced(env.client().await, namespace)
            .get(&name_for_key("k"))
            .await
            .expect("one object per namespace");
        assert_eq!(stored.spec.body, body);
    }
    let get = json!([common::call("get_handoff", json!({"handoff_key": "k"}))]);
    let read_a = drive(&url, &a_implement, get.clone());
    let read_b = drive(&url, &b_implement, get);
    assert_eq!(common::ok(&read_a[0])["handoff"]["body"], "team a's body");
    assert_eq!(common::ok(&read_b[0])["handoff"]["body"], "team b's body");

    // A's list shows A's handoff only.
    let listed = drive(
        &url,
        &a_implement,
        json!([common::call("list_handoffs", json!({"project": "shop"}))]),
    );
    let seen: Vec<(&str, &str)> = common::ok(&listed[0])["handoffs"]
        .as_array()
        .expect("handoffs")
        .iter()
        .filter_map(|h| Some((h["created_by"].as_str()?, h["preview"].as_str()?)))
        .collect();
    let a_writer = format!("system:serviceaccount:{a}:agent-implement");
    assert_eq!(seen, [(a_writer.as_str(), "team a's body")], "{listed:?}");
    // The same through PostgreSQL, once the controller mirrored both rows.
    let db = handoff_testkit::connect_postgres(&url_pg)
        .await
        .expect("postgres client");
    handoff_testkit::wait::eventually(
        "both teams' rows",
        std::time::Duration::from_secs(60),
        || {
            let db = &db;
            let (a, b) = (a.clone(), b.clone());
            async move {
                let n: i64 = db
                    .query_one(
                        "SELECT count(*) FROM handoffs WHERE namespace IN ($1, $2)",
                        &[&a, &b],
                    )
                    .await
                    .ok()?
                    .get(0);
                (n == 2).then_some(())
            }
        },
    )
    .await;
    let listed_pg = drive(
        via_pg.url(),
        &a_implement,
        json!([common::call("list_handoffs", json!({"project": "shop"}))]),
    );
    let seen_pg: Vec<&str> = common::ok(&listed_pg[0])["handoffs"]
        .as_array()
        .expect("handoffs")
        .iter()
        .filter_map(|h| h["preview"].as_str())
        .collect();
    assert_eq!(seen_pg, ["team a's body"], "{listed_pg:?}");
    controller.stop().await;

    // Naming the other team's namespace is refused by the apiserver's RBAC
    // (the write is one apply: `patch` is the verb refused).
    let trespass = drive(&in_ns(&b), &a_implement, json!([write("k", "overwritten")]));
    let refusal = common::err_text(&trespass[0]);
    assert!(
        refusal.contains(&format!(
            "is forbidden: User \"system:serviceaccount:{a}:agent-implement\" cannot patch resource \"handoffs\""
        )) && refusal.contains(&format!("in the namespace \"{b}\"")),
        "{refusal}"
    );
    let deleting = drive(
        &in_ns(&a),
        &b_refine,
        json!([common::call("delete_handoff", json!({"handoff_key": "k"}))]),
    );
    let refusal = common::err_text(&deleting[0]);
    assert!(
        refusal.contains(&format!("in the namespace \"{a}\"")) && refusal.contains("forbidden"),
        "{refusal}"
    );
    let still = Api::<Handoff>::namespaced(env.client().await, &a)
        .get(&name_for_key("k"))
        .await
        .expect("A's handoff survives B's refine agent");
    assert_eq!(still.spec.body, "team a's body");

    // Offers see the Jobs of their own namespace only.
    let offer = common::call(
        "offer_handoff",
        json!({"project": "shop", "to": "dev-lead", "handoff_key": "k", "body": "over to you"}),
    );
    agent_job(env, &b, "dev-lead").await;
    let offered = drive(&url, &a_implement, json!([offer.clone()]));
    assert_eq!(
        common::ok(&offered[0])["outcome"],
        "created",
        "B's running dev-lead is not A's: {offered:?}"
    );
    agent_job(env, &a, "dev-lead").await;
    let busy = drive(&url, &a_implement, json!([offer]));
    assert_eq!(
        common::err_text(&busy[0]),
        "agent_already_active: dev-lead is already working in project shop; nothing was offered."
    );

    // A caller outside the team (its own namespace has no handoff rights)
    // names the team's namespace in the path, and RBAC decides there.
    common::agent_token(env, &people, "alice", None, None).await;
    must(
        kubectl(
            env,
            &[
                "create",
                "rolebinding",
                "alice-writer",
                "-n",
                &a,
                "--clusterrole=handoff-writer",
                &format!("--serviceaccount={people}:alice"),
            ],
        ),
        "bind alice in team a",
    );
    let alice = token(env, &people, "alice");
    let own = drive_as(&url, &alice, "implement", json!([write("p", "from alice")]));
    assert!(
        common::err_text(&own[0]).contains(&format!("in the namespace \"{people}\"")),
        "{own:?}"
    );
    let named = drive_as(
        &in_ns(&a),
        &alice,
        "implement",
        json!([write("p", "from alice")]),
    );
    assert_eq!(common::ok(&named[0])["outcome"], "created", "{named:?}");
    let elsewhere = drive_as(
        &in_ns(&b),
        &alice,
        "implement",
        json!([write("p", "from alice")]),
    );
    assert!(
        common::err_text(&elsewhere[0]).contains(&format!("in the namespace \"{b}\"")),
        "{elsewhere:?}"
    );
}

/// Moving a project out of a shared namespace: `handoff move` copies each
/// handoff of the project into the team's namespace without `createdBy`
/// (the authorship policy would refuse a copy claiming the old writer) and
/// deletes the original; other projects stay; `--dry-run` changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn handoff_move_takes_a_project_into_a_teams_namespace() {
    use handoff_kube::store::HandoffStore;
    let env = common::env();
    let shared = env.namespace("move-shared").await;
    let team = env.namespace("move-team").await;
    let store = HandoffStore::new(env.client().await, &shared);
    for (key, project) in [("shop#1", "shop"), ("shop#2", "shop"), ("blog#1", "blog")] {
        let spec = spec(key)
            .project(project)
            .body(format!("body of {key}"))
            .by("system:serviceaccount:x:writer");
        store.write(&spec).await.expect("write");
    }
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args([
                "move",
                "--project",
                "shop",
                "--from",
                &shared,
                "--to",
                &team,
            ])
            .args(extra)
            .env("KUBECONFIG", env.kubeconfig_path())
            .output()
            .expect("handoff move runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let team_api: Api<Handoff> = Api::namespaced(env.client().await, &team);

    let planned = tokio::task::block_in_place(|| run(&["--dry-run"]));
    assert_eq!(planned.lines().count(), 2, "{planned}");
    assert_eq!(
        stored_keys(env, &shared).await,
        ["blog#1", "shop#1", "shop#2"]
    );
    assert_eq!(stored_keys(env, &team).await, Vec::<String>::new());

    let done = tokio::task::block_in_place(|| run(&[]));
    assert_eq!(done.matches("moved ").count(), 2, "{done}");
    assert_eq!(stored_keys(env, &shared).await, ["blog#1"]);
    assert_eq!(stored_keys(env, &team).await, ["shop#1", "shop#2"]);
    let copy = team_api
        .get(&name_for_key("shop#1"))
        .await
        .expect("the copy");
    assert_eq!(copy.spec.body, "body of shop#1");
    assert_eq!(copy.spec.created_by, None, "the copy claims no writer");
    assert_eq!(
        copy.metadata
            .labels
            .unwrap_or_default()
            .get("project")
            .map(String::as_str),
        Some("shop")
    );
}

/// A ServiceAccount is an agent only in its own namespace: team-b's admin
/// labels a team-b account `handoff.dev/agent=dev-lead` and lets it read
/// team-a's offers; through the bridge it may not reject team-a's offer to
/// dev-lead (it is no agent of team-a), even though it may patch offer
/// status in team-b (a groomer there is none in team-a). A team-a account
/// labelled otherwise is refused as another agent; team-a's real dev-lead
/// rejects the offer.
#[tokio::test(flavor = "multi_thread")]
async fn another_teams_account_labelled_as_the_destination_may_not_reject_its_offers() {
    let env = installed();
    let a = env.namespace("offers-team-a").await;
    let b = env.namespace("offers-team-b").await;
    onboard(env, &a);
    onboard(env, &b);
    let apply = |yaml: String, what: &str| {
        let file = root().join("target").join(format!("tenancy-{what}.yaml"));
        std::fs::write(&file, yaml).expect("manifest");
        must(
            kubectl(env, &["apply", "-f", &file.display().to_string()]),
            what,
        );
    };
    apply(
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: dev-lead\n  namespace: {a}\n  labels:\n    handoff.dev/agent: dev-lead\n    handoff.dev/profile: implement\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: dev-lead-writer\n  namespace: {a}\n\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: handoff-writer\n\
             subjects:\n  - kind: ServiceAccount\n    name: dev-lead\n    namespace: {a}\n\
             ---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: dev-lead\n  namespace: {b}\n  labels:\n    handoff.dev/agent: dev-lead\n    handoff.dev/profile: implement\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: dev-lead-groomer\n  namespace: {b}\n\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: handoff-groomer\n\
             subjects:\n  - kind: ServiceAccount\n    name: dev-lead\n    namespace: {b}\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: read-offers\n  namespace: {a}\n\
             rules:\n  - apiGroups: [\"handoff.dev\"]\n    resources: [\"handoffoffers\"]\n    verbs: [\"get\", \"list\"]\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: team-b-dev-lead-reads-offers\n  namespace: {a}\n\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: read-offers\n\
             subjects:\n  - kind: ServiceAccount\n    name: dev-lead\n    namespace: {b}\n"
        ),
        "offers-accounts",
    );
    let (bridge, _dir) = bridge_as_installed_for(env, None, &[]).await;
    let url = bridge.url().to_owned();
    let in_a = format!("{url}/ns/{a}");
    let implement = token(env, &a, "agent-implement");
    let lead_a = token(env, &a, "dev-lead");
    let lead_b = token(env, &b, "dev-lead");

    let offered = drive(
        &url,
        &implement,
        json!([
            write("k", "over to you"),
            common::call(
                "offer_handoff",
                json!({"project": "shop", "to": "dev-lead", "handoff_key": "k"})
            )
        ]),
    );
    let name = common::ok(&offered[1])["offer"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("an offer: {offered:?}"))
        .to_owned();
    let reject = json!([common::call("reject_offer", json!({"offer": name}))]);

    let listed = drive(
        &in_a,
        &lead_b,
        json!([common::call("list_offers", json!({"project": "shop"}))]),
    );
    assert_eq!(
        common::ok(&listed[0])["offers"][0]["name"],
        json!(name),
        "team b's account may read team a's offers: {listed:?}"
    );
    let by_b = drive(&in_a, &lead_b, reject.clone());
    assert_eq!(
        common::err_text(&by_b[0]),
        format!(
            "reject_offer: only the destination agent \"dev-lead\" may reject offer {name}; the caller \
             system:serviceaccount:{b}:dev-lead is a ServiceAccount of namespace {b}, labelled \
             handoff.dev/agent=dev-lead there, and no agent of namespace {a}, where the offer is (an agent is \
             a ServiceAccount of the offer's namespace) (nor may it patch handoffoffers/status itself, as a \
             groomer may)"
        )
    );
    let by_implement = drive(&url, &implement, reject.clone());
    assert_eq!(
        common::err_text(&by_implement[0]),
        format!(
            "reject_offer: only the destination agent \"dev-lead\" may reject offer {name}; the caller \
             system:serviceaccount:{a}:agent-implement is labelled handoff.dev/agent=implement (nor may it \
             patch handoffoffers/status itself, as a groomer may)"
        )
    );
    let offers = Api::<handoff_core::api::HandoffOffer>::namespaced(env.client().await, &a);
    assert_eq!(
        offers.get(&name).await.expect("offer").phase(),
        handoff_core::api::OfferPhase::Offered,
        "the refusals changed nothing"
    );
    let by_lead = drive(&url, &lead_a, reject);
    assert_eq!(
        common::ok(&by_lead[0])["offer"]["phase"],
        json!("Rejected"),
        "{by_lead:?}"
    );
}

/// `handoff_mcp_settings_reads_total` on the bridge's /metrics page.
async fn settings_reads(bridge: &handoff_testkit::BridgeProcess) -> u64 {
    let addr = bridge.metrics_addr().expect("the bridge serves /metrics");
    let page = handoff_testkit::http::scrape(&addr)
        .await
        .expect("scrape /metrics");
    page.lines()
        .find_map(|l| l.strip_prefix("handoff_mcp_settings_reads_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no settings reads counter: {page}"))
}

/// No read with the bridge's identity for a caller who may not write
/// there: a writer of one team names sixty other namespaces; each write is
/// refused by the apiserver's RBAC, and the bridge reads no namespace's
/// `handoff-settings` for it. Its write in its own namespace reads that
/// namespace's once.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_write_makes_the_bridge_read_no_settings() {
    let env = installed();
    let a = env.namespace("settings-deputy").await;
    onboard(env, &a);
    let (bridge, _dir) =
        bridge_as_installed_for(env, None, &["--metrics-listen", "127.0.0.1:0"]).await;
    let url = bridge.url().to_owned();
    let writer = token(env, &a, "agent-implement");
    let user = format!("system:serviceaccount:{a}:agent-implement");
    assert_eq!(settings_reads(&bridge).await, 0, "nothing read at start");
    for i in 0..60 {
        let elsewhere = format!("{a}-other-{i}");
        let answer = drive(
            &format!("{url}/ns/{elsewhere}"),
            &writer,
            json!([write("k", "not here")]),
        );
        let refusal = common::err_text(&answer[0]);
        assert!(
            refusal.contains(&format!(
                "is forbidden: User \"{user}\" cannot patch resource \"handoffs\""
            )) && refusal.contains(&format!("in the namespace \"{elsewhere}\"")),
            "{refusal}"
        );
    }
    assert_eq!(
        settings_reads(&bridge).await,
        0,
        "refused writes made the bridge read settings"
    );
    let own = drive(&url, &writer, json!([write("k", "here")]));
    assert_eq!(common::ok(&own[0])["outcome"], "created", "{own:?}");
    assert_eq!(settings_reads(&bridge).await, 1, "the own write reads once");
}
