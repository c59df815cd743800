//! A person's walk through the console in a real browser, on a laptop:
//! the project page lists what agents wrote, a handoff opens with its body
//! rendered, two revisions diff, the mirror's search finds it, an offer is
//! rejected and a handoff deleted through their confirmations — and pages
//! that are open change by themselves when an agent writes.

use handoff_console::routes;
use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffOffer, OfferPhase};
use handoff_testkit::wait::eventually;
use kube::api::{Api, ListParams};

use crate::browser_world::{LIVE, Must, PROJECT, World, reload_until, signed_in};

#[tokio::test(flavor = "multi_thread")]
async fn a_person_lists_opens_diffs_searches_rejects_and_deletes() {
    let world = World::new("browser-pages").await;
    world
        .revise("arch#1", 1, "# Plan\n\nFirst draft of the **plan**.")
        .await;
    world
        .revise(
            "arch#1",
            2,
            "# Plan\n\nSecond draft: ship the zebra importer.",
        )
        .await;
    world.write("cli#2", "Wire the CLI.").await;
    world.offer("arch#1", "dev-lead").await;
    let console = world.laptop();
    let browser = signed_in(&console).await;
    let ns = world.ns.as_str();

    // The project lists both handoffs.
    let project = routes::project(ns, PROJECT, None, None, None);
    browser
        .goto(&World::at(&console, &project))
        .await
        .must("the project");
    let list = browser.text("main#content table").await.must("the list");
    for key in ["arch#1", "cli#2"] {
        assert!(list.contains(key), "{key} in {list}");
    }

    // One opens with its body rendered from markdown.
    browser
        .click_and_wait(&format!(
            "td.key a[href='{}']",
            routes::handoff(ns, &name_for_key("arch#1"))
        ))
        .await
        .must("open arch#1");
    // (The body's headings sit below the page's own: `# Plan` is an h3.)
    let heading = browser
        .text("main#content .body :is(h3, h4)")
        .await
        .must("the body's heading");
    assert_eq!(heading, "Plan");
    let body = browser.text("main#content .body").await.must("the body");
    assert!(body.contains("ship the zebra importer"), "{body}");

    // Once the mirror has both revisions: their diff.
    let arch = World::at(&console, &routes::handoff(ns, &name_for_key("arch#1")));
    reload_until(&browser, &arch, "main#content", "Changes from").await;
    browser
        .click_and_wait("a[href*='/diff?']")
        .await
        .must("open the diff");
    let diff = browser.text("main#content").await.must("the diff");
    assert!(
        diff.contains("First draft") && diff.contains("zebra importer"),
        "{diff}"
    );

    // The mirror's full-text search finds it.
    let bare = World::at(&console, &routes::search(ns, None, None));
    browser.goto(&bare).await.must("the navigation's search");
    let form = browser.text("main#content").await.must("the search page");
    assert!(
        browser.exists("form.search").await.must("the form") && !form.contains("Error"),
        "{form}"
    );
    let search = World::at(&console, &routes::search(ns, Some("zebra"), Some(PROJECT)));
    reload_until(&browser, &search, "main#content", "arch#1").await;

    // An offer is rejected through its confirmation.
    browser
        .goto(&World::at(&console, &routes::offers(ns)))
        .await
        .must("offers");
    let offers = browser.text("main#content").await.must("the offers");
    assert!(offers.contains("dev-lead"), "{offers}");
    browser
        .click_and_wait("main#content a[href$='/reject']")
        .await
        .must("reject");
    browser
        .click_and_wait("form.confirm button[type=submit]")
        .await
        .must("confirm the rejection");
    let after = browser
        .text("body")
        .await
        .must("the page after the rejection");
    let api: Api<HandoffOffer> = Api::namespaced(world.env.client().await, ns);
    let phase = || async {
        let all = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        match all.items.as_slice() {
            [offer]
                if offer.status.as_ref().and_then(|s| s.phase) == Some(OfferPhase::Rejected) =>
            {
                Ok(())
            }
            other => Err(format!(
                "{:?}",
                other.iter().map(|o| &o.status).collect::<Vec<_>>()
            )),
        }
    };
    let what = format!("the offer to be Rejected (the page said: {after})");
    eventually(&what, LIVE, phase).await;

    // A handoff is deleted through its confirmation.
    let cli = name_for_key("cli#2");
    browser
        .goto(&World::at(&console, &routes::handoff(ns, &cli)))
        .await
        .must("cli#2");
    browser
        .click_and_wait(&format!("a[href='{}']", routes::delete(ns, &cli)))
        .await
        .must("delete");
    let confirm = browser.title().await.must("the confirmation");
    assert!(confirm.starts_with("Delete handoff"), "{confirm}");
    browser
        .click_and_wait("form.confirm button[type=submit]")
        .await
        .must("confirm the deletion");
    let after = browser
        .text("body")
        .await
        .must("the page after the deletion");
    let handoffs: Api<Handoff> = Api::namespaced(world.env.client().await, ns);
    let gone = || async { handoffs.get_opt(&cli).await.ok().flatten().is_none() };
    let what = format!("cli#2 to be deleted (the page said: {after})");
    eventually(&what, LIVE, gone).await;
    browser
        .goto(&World::at(&console, &project))
        .await
        .must("the project again");
    let list = browser.text("main#content").await.must("the list");
    assert!(!list.contains("cli#2") && list.contains("arch#1"), "{list}");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_pages_show_a_write_without_a_reload() {
    let world = World::new("browser-live").await;
    world.write("live#1", "before the write").await;
    let console = world.laptop();
    let browser = signed_in(&console).await;
    let ns = world.ns.as_str();
    let client = browser.client();

    // Two tabs: the project's list and the handoff.
    let project = World::at(&console, &routes::project(ns, PROJECT, None, None, None));
    browser.goto(&project).await.must("the project");
    let list_tab = client.window().await.expect("the first tab");
    let handoff_tab = client.new_window(true).await.expect("a second tab").handle;
    client
        .switch_to_window(handoff_tab.clone())
        .await
        .expect("switch");
    let handoff = World::at(&console, &routes::handoff(ns, &name_for_key("live#1")));
    browser.goto(&handoff).await.must("the handoff");
    // A mark outside the refreshed part: a navigation would lose it.
    let mark = "document.documentElement.dataset.mark = 'kept'; return 1";
    browser.execute(mark).await.must("mark the handoff tab");
    client
        .switch_to_window(list_tab.clone())
        .await
        .expect("switch");
    browser.execute(mark).await.must("mark the list tab");

    // One write each: a page watches from the version it drew, so a write
    // made at any moment after it loaded is shown.
    let stream = "return document.getElementById('content').getAttribute('data-live')";
    let drawn = browser.execute(stream).await.must("the list's stream");
    world.write("live#1", "after the write: new content").await;
    world.write("live#2", "a new handoff").await;
    assert!(
        shows(&browser, "main#content", "live#2").await,
        "the list never showed a write by itself"
    );
    assert_marked(&browser).await;
    // The page now listens from the version it shows, and still hears.
    let now = browser.execute(stream).await.must("the list's stream");
    assert_ne!(now, drawn, "the stream follows the page swapped in");
    world.write("live#3", "another new handoff").await;
    assert!(
        shows(&browser, "main#content", "live#3").await,
        "the list did not show a write after its first refresh"
    );
    client.switch_to_window(handoff_tab).await.expect("switch");
    assert!(
        shows(&browser, "main#content .body", "new content").await,
        "the handoff never showed a write by itself"
    );
    assert_marked(&browser).await;
}

/// Whether `css` shows `needle` within [`LIVE`] (polled).
async fn shows(browser: &handoff_testkit::browser::Browser, css: &str, needle: &str) -> bool {
    let deadline = std::time::Instant::now() + LIVE;
    while std::time::Instant::now() < deadline {
        if browser.text(css).await.is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

async fn assert_marked(browser: &handoff_testkit::browser::Browser) {
    let mark = browser
        .execute("return document.documentElement.dataset.mark || null")
        .await
        .must("the mark");
    assert_eq!(mark, "kept", "the page was reloaded instead of updated");
}
