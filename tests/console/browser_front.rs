//! The console's front doors in a real browser: the laptop's one-time link
//! (it signs in once, leaves the address bar, and a second browser with the
//! same link is told it was used), the cookie it leaves, DNS rebinding
//! (a page of another name that resolves to 127.0.0.1 gets nothing), and
//! proxy mode as a person with a Role and as one without any.

use handoff_console::routes;

use crate::browser_world::{Must, PROJECT, World, signed_in, started};

#[tokio::test(flavor = "multi_thread")]
async fn the_one_time_link_signs_in_once_and_leaves_the_address_bar() {
    let world = World::new("browser-sign-in").await;
    world.write("sign-in#1", "the first handoff").await;
    let console = world.laptop();
    let secret = console
        .login_url()
        .split_once("token=")
        .map(|(_, s)| s.to_owned())
        .expect("the link carries its secret");

    let browser = signed_in(&console).await;
    let here = browser.current_url().await.must("the address bar");
    assert!(!here.contains(&secret), "the secret stays in the address bar: {here}");
    assert!(!here.contains("/login"), "still on the sign-in link: {here}");
    let cookies = browser.cookies().await.must("the cookies");
    assert_eq!(cookies.len(), 1, "{cookies:?}");
    let cookie = &cookies[0];
    assert!(cookie.name.starts_with("__Host-"), "{cookie:?}");
    assert!(cookie.secure && cookie.http_only, "{cookie:?}");
    assert_eq!(cookie.same_site.as_deref(), Some("Strict"), "{cookie:?}");
    assert!(!cookie.value.contains(&secret), "the cookie is not the secret");
    let script_sees = browser.execute("return document.cookie").await.must("document.cookie");
    assert_eq!(script_sees, "", "an HttpOnly cookie is hidden from scripts");
    let overview = browser.text("main#content").await.must("the overview");
    assert!(overview.contains(&world.ns), "{overview}");
    assert!(overview.contains(PROJECT), "{overview}");

    let second = started(&[]).await;
    second.goto(console.login_url()).await.must("the link again");
    let title = second.title().await.must("the title");
    assert!(title.contains("already used"), "{title}");
    let seen = second.text("body").await.must("the page");
    assert!(!seen.contains(PROJECT), "a used link shows no data: {seen}");
    second.goto(console.url()).await.must("the overview");
    let seen = second.text("body").await.must("the page");
    assert!(!seen.contains(&world.ns), "a browser without the cookie sees no data: {seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_that_rebinds_to_loopback_gets_the_refusal_not_data() {
    let world = World::new("browser-rebind").await;
    world.write("rebind#1", "nothing for other sites").await;
    let console = world.laptop();
    let port = console.url().rsplit(':').next().expect("a port").to_owned();
    let browser = started(&["--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1"]).await;

    // The attacker's page first tries the one-time link under its own name…
    let stolen = console
        .login_url()
        .replacen("127.0.0.1", "rebind.attacker.test", 1);
    browser.goto(&stolen).await.must("the link under another name");
    let seen = browser.text("body").await.must("the page");
    assert!(!seen.contains(&world.ns), "{seen}");
    assert!(browser.cookies().await.must("cookies").is_empty(), "no cookie for the attacker's name");
    // …and then reads a page as if it were the console.
    let page = format!("http://rebind.attacker.test:{port}{}", routes::HOME);
    browser.goto(&page).await.must("the overview under another name");
    let seen = browser.text("body").await.must("the page");
    assert!(!seen.contains(&world.ns) && !seen.contains(PROJECT), "{seen}");

    // The refused attempt did not use the link up.
    browser.goto(console.login_url()).await.must("the link");
    let overview = browser.text("main#content").await.must("the overview");
    assert!(overview.contains(&world.ns), "the link still signs in: {overview}");
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_a_proxy_a_person_sees_what_rbac_lets_them_and_nothing_else() {
    let world = World::new("browser-proxy").await;
    world.write("proxy#1", "visible to viewers").await;
    let console = world.behind_proxy();
    let viewer = world.person("viewer", true).await;
    let nobody = world.person("nobody", false).await;
    let as_viewer = World::proxy(&console, &viewer).await;
    let as_nobody = World::proxy(&console, &nobody).await;
    // Proxy mode keeps no cookie of its own: one browser is both people.
    let browser = started(&[]).await;

    let project = routes::project(&world.ns, PROJECT, None, None, None);
    browser
        .goto(&format!("{}{project}", as_viewer.url()))
        .await
        .must("the project as a viewer");
    let rows = browser.text("main#content").await.must("the project page");
    assert!(rows.contains("proxy#1"), "{rows}");
    browser.click("main#content td.key a").await.must("open the handoff");
    let body = browser.text("main#content .body").await.must("the body");
    assert!(body.contains("visible to viewers"), "{body}");
    let who = browser.text("header .who").await.must("who is signed in");
    assert!(who.contains("viewer"), "{who}");

    browser
        .goto(&format!("{}{}", as_nobody.url(), routes::HOME))
        .await
        .must("the overview as nobody");
    let overview = browser.text("main#content").await.must("the overview");
    assert!(!overview.contains(&world.ns), "no namespace for a person without rights: {overview}");
    assert!(!overview.contains(PROJECT), "{overview}");
    let direct = format!(
        "{}{}",
        as_nobody.url(),
        routes::handoff(&world.ns, &handoff_core::api::naming::name_for_key("proxy#1"))
    );
    browser.goto(&direct).await.must("a handoff's address as nobody");
    let page = browser.text("main#content").await.must("the page");
    assert!(page.contains("403"), "the refusal page: {page}");
    assert!(!page.contains("visible to viewers"), "no body for nobody: {page}");
}
