//! Every main page of the console passes axe-core (WCAG 2.0/2.1 A and AA,
//! and axe's best practices) on a laptop's screen and a phone's, and the
//! keyboard reaches the skip link, the navigation and the main action with
//! a focus people can see. With `HANDOFF_SCREENSHOTS=<dir>` (`make
//! screenshots`) the same walk writes the documentation's screenshots.

use std::path::PathBuf;

use handoff_console::routes;
use handoff_core::api::naming::name_for_key;
use handoff_testkit::browser::{Browser, Focused};

use crate::browser_world::{Must, PROJECT, World, reload_until, started};

/// A laptop's viewport and a phone's.
const SIZES: [(&str, u32, u32); 2] = [("laptop", 1280, 800), ("phone", 390, 844)];

/// The pages the documentation shows: (page, file name, size).
const SHOTS: [(&str, &str, &str); 8] = [
    ("overview", "overview.png", "laptop"),
    ("project", "project.png", "laptop"),
    ("handoff", "handoff.png", "laptop"),
    ("diff", "diff.png", "laptop"),
    ("offers", "offers.png", "laptop"),
    ("schedules", "schedules.png", "laptop"),
    ("problems", "problems.png", "laptop"),
    ("handoff", "handoff-phone.png", "phone"),
];

/// Tabs from the top of a page at most this often looking for an element.
const TABS: usize = 40;

/// Where screenshots go, when asked for.
fn screenshots() -> Option<PathBuf> {
    std::env::var_os("HANDOFF_SCREENSHOTS").map(PathBuf::from)
}

/// Checks `page` at every size; returns what axe found, one line each.
async fn check(browser: &Browser, page: &str, url: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (size, width, height) in SIZES {
        browser.set_window_size(width, height).await.must("resize");
        browser.goto(url).await.must(page);
        for v in browser.axe().await.must("axe") {
            found.push(format!("{page} ({size}): {v}"));
        }
        if let Some(dir) = screenshots() {
            for (shot, file, at) in SHOTS {
                if shot == page && at == size {
                    browser.screenshot(&dir.join(file)).await.must("screenshot");
                }
            }
        }
    }
    browser.set_window_size(1280, 800).await.must("resize");
    found
}

/// Tabs from the top of `url` until `wanted` has the focus; every focused
/// element on the way must show its focus. The elements reached, in order.
async fn tab_to(browser: &Browser, url: &str, wanted: impl Fn(&Focused) -> bool) -> Vec<Focused> {
    browser.goto(url).await.must("the page");
    let mut reached = Vec::new();
    for _ in 0..TABS {
        let focused = browser.tab().await.must("Tab");
        assert!(focused.visible(), "the focus is invisible on {focused:?} ({url})");
        let done = wanted(&focused);
        reached.push(focused);
        if done {
            return reached;
        }
    }
    panic!("{TABS} Tabs from the top of {url} never reached the element: {reached:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_main_page_passes_axe_and_works_from_the_keyboard() {
    let world = World::new("browser-a11y").await;
    world.write("arch#1", "# Plan\n\nFirst draft of the **plan**.").await;
    world
        .write("arch#1", "# Plan\n\nSecond draft: ship the zebra importer.\n\n- one\n- two")
        .await;
    world.write("cli#2", "Wire the CLI.").await;
    world.write("docs#3", "Write the *docs*.").await;
    world.offer("arch#1", "dev-lead").await;
    let console = world.laptop();
    let ns = world.ns.as_str();
    let at = |path: &str| World::at(&console, path);
    if let Some(dir) = screenshots() {
        std::fs::create_dir_all(&dir).expect("the screenshots' directory");
    }

    let browser = started(&[]).await;
    let mut found = check(&browser, "sign-in", &at(routes::HOME)).await;
    browser.goto(console.login_url()).await.must("sign in");

    let arch = at(&routes::handoff(ns, &name_for_key("arch#1")));
    reload_until(&browser, &arch, "main#content", "Changes from").await;
    let diff = browser
        .attr("a[href*='/diff?']", "href")
        .await
        .must("the diff link")
        .expect("a diff link");
    let search = at(&routes::search(ns, Some("zebra"), None));
    reload_until(&browser, &search, "main#content", "arch#1").await;
    let pages = [
        ("overview", at(routes::HOME)),
        ("project", at(&routes::project(ns, PROJECT, None, None, None))),
        ("handoff", arch.clone()),
        ("diff", at(&diff)),
        ("search", search),
        ("offers", at(&routes::offers(ns))),
        ("schedules", at(&routes::schedules(ns))),
        ("problems", at(&routes::problems(ns))),
        ("confirmation", at(&routes::delete(ns, &name_for_key("cli#2")))),
    ];
    for (page, url) in &pages {
        found.extend(check(&browser, page, url).await);
    }
    assert!(found.is_empty(), "axe found:\n{}", found.join("\n"));

    // The keyboard: skip link first, then the navigation, then the page's
    // main action (a handoff of the list; the handoff's delete).
    let project = at(&routes::project(ns, PROJECT, None, None, None));
    let offers = routes::offers(ns);
    let reached = tab_to(&browser, &project, |f| f.href.contains("/handoffs/")).await;
    assert_eq!(reached[0].href, "#content", "the skip link comes first: {:?}", reached[0]);
    assert!(
        reached.iter().any(|f| f.href == offers),
        "the navigation is on the way: {reached:#?}"
    );
    let delete = routes::delete(ns, &name_for_key("arch#1"));
    tab_to(&browser, &arch, |f| f.href == delete).await;
}
