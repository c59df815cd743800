//! The hostile corpus (crates/console/tests/fixtures/hostile/*.md) stored
//! as handoff bodies straight through the apiserver — no bridge to refuse
//! them — and opened in a real browser: no script ran (the title a script
//! would change, `window.__pwned`, no dialog), nothing executable or
//! tracking reached the DOM (no `<img>`, no `javascript:`/`data:` link, no
//! event handler, no frame or style), and the Content-Security-Policy is
//! sent and enforced as the second belt.

use std::path::Path;

use handoff_console::routes;
use handoff_testkit::http::{addr_of, get};

use crate::browser_world::{Must, World, signed_in};

/// What the console's CSP must say (SEAMS-41: no inline script or style).
const CSP_PARTS: [&str; 6] = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
];

/// Links whose parsed scheme would run or smuggle something.
const BAD_LINKS: &str = "return [...document.querySelectorAll('[href], [src], [action], [formaction]')]\
    .map(e => e.href || e.src || e.action || e.getAttribute('formaction') || '')\
    .filter(u => /^(javascript|data|vbscript|file):/i.test(u))";

/// Elements of the body that carry an event handler or a style.
const HANDLERS: &str = "return [...document.querySelectorAll('main#content .body *')]\
    .filter(e => [...e.attributes].some(a => a.name.startsWith('on') || a.name === 'style'))\
    .map(e => e.outerHTML.slice(0, 120))";

/// Elements a body must never produce.
const FORBIDDEN: &str = "main#content .body :is(script, iframe, frame, object, embed, svg, math, \
    style, link, meta, base, form, input, button, textarea, select)";

fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/console/tests/fixtures/hostile");
    let mut cases: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the hostile corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| {
            let stem = path.file_stem().expect("a name").to_string_lossy().into_owned();
            let body = std::fs::read_to_string(&path).expect("a corpus body");
            (stem, body)
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "the corpus is there: {}", cases.len());
    cases
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_bodies_render_inert_under_an_enforced_csp() {
    let world = World::new("browser-hostile").await;
    let mut names = Vec::new();
    for (stem, body) in corpus() {
        let name = world.store_raw(&format!("hostile/{stem}"), &body).await;
        names.push((stem, name));
    }
    let console = world.laptop();

    // The policy is sent (a plain HTTP client sees the header).
    let addr = addr_of(console.url()).expect("the console's address");
    let answer = get(&addr, routes::SIGN_IN).await.expect("the sign-in page");
    let csp = answer
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("no Content-Security-Policy: {answer:?}"));
    for part in CSP_PARTS {
        assert!(csp.contains(part), "{part} not in {csp}");
    }

    let browser = signed_in(&console).await;
    let mut failures = Vec::new();
    for (stem, name) in &names {
        let url = World::at(&console, &routes::handoff(&world.ns, name));
        browser.goto(&url).await.must(stem);
        let title = browser.title().await.must("the title");
        let pwned = browser.execute("return typeof window.__pwned").await.must("__pwned");
        let dialogs = browser.dialogs().await.must("dialogs");
        let images = browser.count("img").await.must("images");
        let links = browser.execute(BAD_LINKS).await.must("links");
        let handlers = browser.execute(HANDLERS).await.must("handlers");
        let forbidden = browser.count(FORBIDDEN).await.must("forbidden elements");
        let refused = browser.csp_violations().await.must("CSP refusals");
        let shown = browser.exists("main#content .body").await.must("the body");
        let problems = [
            (title.contains("pwned"), format!("title {title:?}")),
            (pwned != "undefined", format!("window.__pwned is {pwned}")),
            (!dialogs.is_empty(), format!("dialogs {dialogs:?}")),
            (images > 0, format!("{images} <img>")),
            (links != serde_json::json!([]), format!("links {links}")),
            (handlers != serde_json::json!([]), format!("handlers/styles {handlers}")),
            (forbidden > 0, format!("{forbidden} forbidden elements")),
            (!refused.is_empty(), format!("the CSP had to refuse {refused:?}")),
            (!shown, "no rendered body".to_owned()),
        ];
        for (bad, what) in problems {
            if bad {
                failures.push(format!("{stem}: {what}"));
            }
        }
    }
    assert!(failures.is_empty(), "hostile bodies not inert:\n{}", failures.join("\n"));

    // The CSP is enforced on the console's pages: an inline script that
    // somehow reached the DOM is refused and does not run.
    let inject = "const s = document.createElement('script');\
        s.textContent = 'window.__pwned = 1'; document.body.append(s); return 1";
    browser.execute(inject).await.must("inject an inline script");
    let pwned = browser.execute("return typeof window.__pwned").await.must("__pwned");
    assert_eq!(pwned, "undefined", "an inline script ran on a console page");
    let refused = browser.csp_violations().await.must("CSP refusals");
    assert!(
        refused.iter().any(|v| v.directive == "script-src-elem" && v.blocked == "inline"),
        "the CSP refused the inline script: {refused:?}"
    );
}
