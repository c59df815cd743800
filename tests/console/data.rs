//! The console's reads and actions (`handoff_console::data`) against the
//! real kube-apiserver and PostgreSQL, as people with ServiceAccount
//! tokens bound to Roles: each sees exactly what their Role allows (a
//! namespace without rights is absent, a refusal is Forbidden), a
//! project's pages are `list_handoffs`' pages, the history comes through
//! the mirror, delete and reject work and are refused without rights (the
//! object survives unchanged), and an export holds every handoff.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::agents::client_with_token;
use common::{agent_token, apply_agent_roles, env};
use handoff_bridge::auth::Caller;
use handoff_bridge::call::{OfferSettings, Services};
use handoff_bridge::profiles::Profile;
use handoff_bridge::tools;
use handoff_console::data::{self, ExportFormat, ReadError};
use handoff_console::model::{Count, Health, ListFilters};
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer, HandoffOfferSpec, OfferPhase};
use handoff_core::offers::DEFAULT_ACTIVE_SELECTOR;
use handoff_core::time::SystemClock;
use handoff_kube::settings::{Budgets, READ_TIMEOUT};
use handoff_kube::store::HandoffStore;
use handoff_mirror::Mirror;
use handoff_testkit as testing;
use handoff_testkit::TestEnv;
use handoff_testkit::controller::InProcess;
use handoff_testkit::spec::{Fields, counted, shop};
use handoff_testkit::wait::eventually;
use kube::api::{Api, PostParams};
use serde_json::json;

/// A person in `namespace`: a ServiceAccount bound to `role` (a
/// ClusterRole of config/rbac/agent_roles.yaml) there, or to nothing.
async fn person(env: &TestEnv, namespace: &str, name: &str, role: Option<&str>) -> Caller {
    let token = agent_token(env, namespace, name, None, role).await;
    let client = client_with_token(env, &token).await;
    Caller::new(client, namespace, Profile::new(data::PROFILE))
}

/// What the console's dispatch reads from, acting as the caller.
fn services(client: &kube::Client, mirror: Option<Arc<Mirror>>) -> Services {
    Services {
        mirror,
        offers: OfferSettings {
            acting: None,
            active_selector: DEFAULT_ACTIVE_SELECTOR.to_owned(),
        },
        budgets: Arc::new(Budgets::new(client.clone(), READ_TIMEOUT)),
    }
}

/// The keys of `list_handoffs`' pages for `caller`, page by page, with the cursors.
async fn tool_pages(caller: &Caller, services: &Services) -> Vec<(Vec<String>, Option<String>)> {
    let tool = tools::find("list_handoffs").expect("list_handoffs");
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"project": "shop"});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let (answer, _) = services
            .dispatch(tool, caller, args.as_object().cloned())
            .await
            .unwrap_or_else(|e| panic!("list_handoffs: {e:?}"));
        let keys = answer["handoffs"]
            .as_array()
            .expect("handoffs")
            .iter()
            .map(|h| h["handoff_key"].as_str().unwrap_or_default().to_owned())
            .collect();
        cursor = answer["next_cursor"].as_str().map(str::to_owned);
        pages.push((keys, cursor.clone()));
        if cursor.is_none() {
            return pages;
        }
    }
}

/// The keys of the console's pages of project `shop`.
async fn console_pages(caller: &Caller) -> Vec<(Vec<String>, Option<String>)> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = data::project(caller, "shop", &ListFilters::default(), cursor.as_deref())
            .await
            .unwrap_or_else(|e| panic!("project page: {e}"));
        cursor = page.next.clone();
        pages.push((
            page.rows.into_iter().map(|r| r.key).collect(),
            cursor.clone(),
        ));
        if cursor.is_none() {
            return pages;
        }
    }
}

fn forbidden<T: std::fmt::Debug>(what: &str, got: Result<T, ReadError>) {
    match got {
        Err(ReadError::Forbidden(sentence)) => {
            assert!(sentence.contains("may not"), "{what}: {sentence}");
            assert!(
                !sentence.contains("forbidden:"),
                "{what}: the apiserver's text: {sentence}"
            );
        }
        other => panic!("{what}: expected Forbidden, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_and_does_exactly_what_their_role_allows() {
    let env = env();
    let ns = env.namespace("console-data").await;
    let hidden = env.namespace("console-data-hidden").await;
    apply_agent_roles(env);
    let admin = env.client().await;
    let store = HandoffStore::new(admin.clone(), &ns);
    // 57 handoffs of shop (two pages of 50), one of another kind, one of bank.
    let writes = (0..57)
        .map(|i| shop(&format!("acme/api#{i:02}"), &format!("body {i}")))
        .chain([
            shop("acme/api#incident", "an incident").kind("incident"),
            shop("acme/bank#1", "the bank's").project("bank"),
        ]);
    for spec in writes {
        store.write(&spec).await.expect("write");
    }
    HandoffStore::new(admin.clone(), &hidden)
        .write(&shop("elsewhere", "not yours"))
        .await
        .expect("write elsewhere");

    let viewer = person(env, &ns, "viewer", Some("handoff-writer")).await;
    let groomer = person(env, &ns, "groomer", Some("handoff-groomer")).await;
    let nobody = person(env, &ns, "nobody", None).await;
    let plain = services(&admin, None);

    // The overview: only the namespace the Role is in, with its counts.
    let candidates = [ns.clone(), hidden.clone()];
    let overview = data::overview(viewer.client(), &candidates)
        .await
        .expect("overview");
    let seen: Vec<&str> = overview
        .namespaces
        .iter()
        .map(|n| n.namespace.as_str())
        .collect();
    assert_eq!(seen, [ns.as_str()], "a namespace without rights is absent");
    let counts: Vec<(&str, Count)> = overview.namespaces[0]
        .projects
        .iter()
        .map(|p| (p.project.as_str(), p.handoffs))
        .collect();
    assert_eq!(
        counts,
        [("bank", Count::Exact(1)), ("shop", Count::Exact(58))]
    );
    let none = data::overview(nobody.client(), &candidates)
        .await
        .expect("overview");
    assert!(none.namespaces.is_empty(), "{none:?}");

    // A project's pages are list_handoffs' pages: same keys, order and cursors.
    let console = console_pages(&viewer).await;
    assert_eq!(console.len(), 2, "58 handoffs are two pages of 50");
    assert_eq!(console, tool_pages(&viewer, &plain).await);
    let incident = data::project(
        &viewer,
        "shop",
        &ListFilters {
            repo: Some("org/a".into()),
            kind: Some("incident".into()),
        },
        None,
    )
    .await
    .expect("filtered");
    let keys: Vec<&str> = incident.rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["acme/api#incident"]);
    match data::project(
        &viewer,
        "shop",
        &ListFilters::default(),
        Some("not-a-cursor!"),
    )
    .await
    {
        Err(ReadError::Invalid {
            field: "cursor", ..
        }) => {}
        other => panic!("a bad cursor: {other:?}"),
    }
    forbidden(
        "a project without rights",
        data::project(&nobody, "shop", &ListFilters::default(), None).await,
    );
    let groomer_page = data::project(&groomer, "shop", &ListFilters::default(), None)
        .await
        .expect("groomer's page");
    assert!(groomer_page.may_delete, "a groomer may delete");
    assert!(!console_may_delete(&viewer).await, "a writer may not");

    // One handoff: its body; without the mirror, its revisions say why.
    let name = name_for_key("acme/api#07");
    let page = data::handoff(&viewer, &plain, &name)
        .await
        .expect("handoff page");
    assert_eq!(
        (page.row.key.as_str(), page.body.as_str()),
        ("acme/api#07", "body 7")
    );
    let why = page.revisions.expect_err("no mirror");
    assert!(why.0.contains("PostgreSQL mirror"), "{why:?}");
    forbidden(
        "a handoff without rights",
        data::handoff(&nobody, &plain, &name).await,
    );

    // Delete: refused without rights (the object survives unchanged), done with them.
    let api: Api<Handoff> = Api::namespaced(admin.clone(), &ns);
    let before = api
        .get(&name)
        .await
        .expect("stored")
        .metadata
        .resource_version;
    forbidden(
        "a writer's delete",
        data::delete_handoff(&viewer, &plain, &name).await,
    );
    let after = api
        .get(&name)
        .await
        .expect("still stored")
        .metadata
        .resource_version;
    assert_eq!(before, after, "a refused delete changes nothing");
    data::delete_handoff(&groomer, &plain, &name)
        .await
        .expect("groomer's delete");
    assert!(api.get_opt(&name).await.expect("read").is_none(), "deleted");
    match data::delete_handoff(&groomer, &plain, &name).await {
        Err(ReadError::NotFound(_)) => {}
        other => panic!("deleting it again: {other:?}"),
    }

    // The export holds every handoff of the project (57 after the delete).
    let export = data::export(&viewer, "shop", ExportFormat::Json)
        .await
        .expect("export");
    assert_eq!(export.file_name, format!("{ns}-shop-handoffs.json"));
    let views: Vec<serde_json::Value> = serde_json::from_slice(&export.bytes).expect("json");
    let mut exported: Vec<String> = views
        .iter()
        .map(|v| v["handoff_key"].as_str().unwrap_or_default().to_owned())
        .collect();
    exported.sort();
    let mut stored: Vec<String> = (0..57)
        .filter(|i| *i != 7)
        .map(|i| format!("acme/api#{i:02}"))
        .chain(["acme/api#incident".to_owned()])
        .collect();
    stored.sort();
    assert_eq!(exported, stored);
    let markdown = data::export(&viewer, "shop", ExportFormat::Markdown)
        .await
        .expect("markdown");
    let text = String::from_utf8(markdown.bytes).expect("utf-8");
    for key in &stored {
        assert!(
            text.contains(&format!("## {key}\n")),
            "{key} not in the markdown export"
        );
    }
    forbidden(
        "an export without rights",
        data::export(&nobody, "shop", ExportFormat::Json).await,
    );

    // Offers: shown to the writer, who may not reject; the groomer may.
    let offers: Api<HandoffOffer> = Api::namespaced(admin.clone(), &ns);
    let offer = HandoffOffer::new(
        "offer-to-bob",
        HandoffOfferSpec {
            project: "shop".into(),
            to: "bob".into(),
            from_key: "acme/api#01".into(),
            session: None,
            artifact: None,
            body: None,
        },
    );
    offers
        .create(&PostParams::default(), &offer)
        .await
        .expect("offer");
    let page = data::offers(&viewer).await.expect("offers");
    // (destination, offer, phase, may reject)
    let rows: Vec<(&str, &str, &str, bool)> = page
        .groups
        .iter()
        .flat_map(|g| {
            g.offers.iter().map(|o| {
                (
                    g.to.as_str(),
                    o.name.as_str(),
                    o.phase.as_str(),
                    o.may_reject,
                )
            })
        })
        .collect();
    assert_eq!(rows, [("bob", "offer-to-bob", "Offered", false)]);
    assert!(
        data::offer_row(&groomer, "offer-to-bob")
            .await
            .expect("row")
            .may_reject
    );
    let before = offers
        .get("offer-to-bob")
        .await
        .expect("offer")
        .metadata
        .resource_version;
    forbidden(
        "a writer's reject",
        data::reject_offer(&viewer, &plain, "offer-to-bob").await,
    );
    let after = offers
        .get("offer-to-bob")
        .await
        .expect("offer")
        .metadata
        .resource_version;
    assert_eq!(before, after, "a refused reject changes nothing");
    data::reject_offer(&groomer, &services(groomer.client(), None), "offer-to-bob")
        .await
        .expect("groomer's reject");
    let rejected = offers.get("offer-to-bob").await.expect("offer");
    assert_eq!(rejected.phase(), OfferPhase::Rejected);
    forbidden("offers without rights", data::offers(&nobody).await);
}

async fn console_may_delete(caller: &Caller) -> bool {
    data::project(caller, "shop", &ListFilters::default(), None)
        .await
        .expect("page")
        .may_delete
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_diffs_and_search_come_through_the_mirror_as_the_person() {
    let env = env();
    let ns = env.namespace("console-mirror").await;
    apply_agent_roles(env);
    let admin = env.client().await;
    let url = testing::shared_postgres_url();
    let controller = InProcess::new(&ns, "a", Arc::new(SystemClock))
        .options(|o| o.mirror_resync_interval = Duration::from_secs(2))
        .mirror(&url)
        .start(admin.clone());
    let api: Api<Handoff> = Api::namespaced(admin.clone(), &ns);
    let store = HandoffStore::new(admin.clone(), &ns);
    for (revision, body) in [
        (1, "first draft\nshared line"),
        (2, "second draft\nshared line"),
        (3, "third draft mentions kumquats\nshared line"),
    ] {
        store.write(&shop("acme/api#9", body)).await.expect("write");
        counted(&api, "acme/api#9", revision).await;
    }
    let db = testing::connect_postgres(&url)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eventually(
        "the mirror of the namespace",
        Duration::from_secs(60),
        || async { (testing::mirror::converged(&api, &db, &ns).await == Some(1)).then_some(()) },
    )
    .await;
    let mirror = Arc::new(Mirror::new(&url, false).expect("mirror"));
    let viewer = person(env, &ns, "viewer", Some("handoff-writer")).await;
    let nobody = person(env, &ns, "nobody", None).await;
    let with_mirror = services(&admin, Some(mirror));
    let name = name_for_key("acme/api#9");

    let page = data::handoff(&viewer, &with_mirror, &name)
        .await
        .expect("handoff page");
    let revisions: Vec<i64> = page
        .revisions
        .expect("revisions from the mirror")
        .iter()
        .map(|r| r.revision)
        .collect();
    assert_eq!(revisions, [3, 2, 1]);

    let diff = data::diff(&viewer, &with_mirror, &name, 1, 3)
        .await
        .expect("diff");
    let unified = diff.diff.expect("a diff from the mirror");
    assert!(
        unified.text.contains("-first draft") && unified.text.contains("+third draft"),
        "{}",
        unified.text
    );
    assert!(!unified.truncated);
    match data::diff(&viewer, &with_mirror, &name, 1, 9).await {
        Err(ReadError::Invalid { field: "to", .. }) => {}
        other => panic!("an unknown revision: {other:?}"),
    }
    match data::diff(&viewer, &with_mirror, &name, 0, 1).await {
        Err(ReadError::Invalid { field: "from", .. }) => {}
        other => panic!("revision 0: {other:?}"),
    }

    let found = data::search(&viewer, &with_mirror, "kumquats", Some("shop"), None)
        .await
        .expect("search");
    let hits: Vec<String> = found
        .hits
        .expect("hits from the mirror")
        .into_iter()
        .map(|h| h.key)
        .collect();
    assert_eq!(hits, ["acme/api#9"]);
    forbidden(
        "a search without rights",
        data::search(&nobody, &with_mirror, "kumquats", Some("shop"), None).await,
    );
    match data::search(&viewer, &with_mirror, "kumquats", None, None).await {
        Err(ReadError::Invalid {
            field: "project", ..
        }) => {}
        other => panic!("a search without a project: {other:?}"),
    }

    // Problems: the mirror holds everything; the controller's Lease is
    // read by whoever may (the admin here), unknown to the writer.
    let admin_caller = Caller::new(admin.clone(), &ns, Profile::new(data::PROFILE));
    let problems = data::problems(&admin_caller, &with_mirror)
        .await
        .expect("problems");
    assert!(
        matches!(&problems.mirror, Health::Healthy(t) if t.contains("All 1 handoffs")),
        "{:?}",
        problems.mirror
    );
    assert!(
        matches!(&problems.controller, Health::Healthy(t) if t.contains("renewed its Lease")),
        "{:?}",
        problems.controller
    );
    let theirs = data::problems(&viewer, &with_mirror)
        .await
        .expect("problems");
    assert!(
        matches!(&theirs.controller, Health::Unknown(t) if t.contains("may not read")),
        "{:?}",
        theirs.controller
    );
    assert!(theirs.unbound.is_empty(), "{theirs:?}");
    let failed: Vec<(&str, bool)> = theirs
        .lint_failed
        .iter()
        .map(|p| (p.key.as_str(), p.message.contains("missing-section")))
        .collect();
    assert_eq!(
        failed,
        [("acme/api#9", true)],
        "the body has none of the skill's sections"
    );
    controller.stop().await;
}
