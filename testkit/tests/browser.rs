//! The browser driver and the stand-in proxy of the console's tests, held
//! to what the console's tests rely on, against pages of our own: a script
//! that runs is seen to run (so "no script ran" can fail), the CSP's
//! refusals are recorded, axe finds a bad page's faults (so "no
//! violation" can fail), and the proxy sets the token and streams.

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use handoff_testkit::bearer_proxy::BearerProxy;
use handoff_testkit::browser::Browser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'";

/// Without a CSP: its inline script changes the sentinel and calls alert.
const OPEN: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>open</title></head>
<body><main><h1>open</h1><p id="sentinel">untouched</p></main>
<script>document.getElementById('sentinel').textContent = 'ran'; window.__pwned = 1; alert('x');</script>
</body></html>"#;

/// Under the CSP: the same script, an inline handler and a remote image.
const GUARDED: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>guarded</title></head>
<body><main><h1>guarded</h1><p id="sentinel">untouched</p>
<img src="https://tracker.invalid/p.png" alt="" onerror="document.getElementById('sentinel').textContent = 'handler'">
</main><script>document.getElementById('sentinel').textContent = 'ran'; window.__pwned = 1;</script>
</body></html>"#;

/// Faults axe knows: no lang, no title, an unlabelled field, no main.
const BAD: &str = r#"<!doctype html><html><head><meta charset="utf-8"></head>
<body><div><input type="text"></div></body></html>"#;

const GOOD: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>good</title></head>
<body><main><h1>good</h1><form><label for="q">Search</label><input id="q" name="q">
<button>Go</button></form></main></body></html>"#;

async fn site() -> String {
    let guarded = || async { ([(header::CONTENT_SECURITY_POLICY, CSP)], Html(GUARDED)) };
    let echo = |headers: HeaderMap| async move {
        let seen = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        Html(format!(
            "<!doctype html><html lang=\"en\"><title>echo</title><p id=\"auth\">{seen}</p></html>"
        ))
        .into_response()
    };
    let app = Router::new()
        .route("/open", get(|| async { Html(OPEN) }))
        .route("/guarded", get(guarded))
        .route("/bad", get(|| async { Html(BAD) }))
        .route("/good", get(|| async { Html(GOOD) }))
        .route("/echo", get(echo));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn the_browser_sees_scripts_run_csp_refusals_and_accessibility_faults() {
    let site = site().await;
    let browser = Browser::start().await.unwrap_or_else(|e| panic!("{e:#}"));

    browser.goto(&format!("{site}/open")).await.unwrap();
    assert_eq!(browser.text("#sentinel").await.unwrap(), "ran");
    assert_eq!(browser.execute("return window.__pwned").await.unwrap(), 1);
    assert_eq!(browser.dialogs().await.unwrap(), ["alert: x"]);

    browser.goto(&format!("{site}/guarded")).await.unwrap();
    assert_eq!(browser.text("#sentinel").await.unwrap(), "untouched");
    assert!(
        browser
            .execute("return window.__pwned")
            .await
            .unwrap()
            .is_null()
    );
    let refused = browser.csp_violations().await.unwrap();
    let directives: Vec<&str> = refused.iter().map(|v| v.directive.as_str()).collect();
    for want in ["script-src-elem", "img-src"] {
        assert!(directives.contains(&want), "{want} not in {refused:?}");
    }

    browser.goto(&format!("{site}/bad")).await.unwrap();
    let faults = browser.axe().await.unwrap();
    let ids: Vec<&str> = faults.iter().map(|v| v.id.as_str()).collect();
    for want in [
        "html-has-lang",
        "document-title",
        "label",
        "landmark-one-main",
    ] {
        assert!(ids.contains(&want), "{want} not in {ids:?}");
    }
    browser.goto(&format!("{site}/good")).await.unwrap();
    let faults = browser.axe().await.unwrap();
    assert!(faults.is_empty(), "{faults:#?}");
    let first = browser.tab().await.unwrap();
    assert_eq!(first.id, "q", "{first:?}");
    assert!(first.visible(), "Chromium draws a focus ring: {first:?}");
}

#[tokio::test]
async fn the_proxy_sets_the_bearer_and_replaces_the_callers() {
    let site = site().await;
    let proxy = BearerProxy::start(&site, "t0ken").await.unwrap();
    let bare = BearerProxy::start_without_token(&site).await.unwrap();
    let answer = |proxy: &str, auth: &str| {
        let addr = proxy.trim_start_matches("http://").to_owned();
        let auth = auth.to_owned();
        async move {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            let request =
                format!("GET /echo HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut text = String::new();
            stream.read_to_string(&mut text).await.unwrap();
            text
        }
    };
    let cases = [
        (proxy.url(), "", "Bearer t0ken"),
        (
            proxy.url(),
            "Authorization: Bearer mine\r\n",
            "Bearer t0ken",
        ),
        (bare.url(), "Authorization: Bearer mine\r\n", ">none<"),
    ];
    for (url, auth, want) in cases {
        let text = answer(url, auth).await;
        assert!(text.contains(want), "{auth:?} through {url}: {text}");
    }
}

#[tokio::test]
async fn the_proxy_streams_an_answer_before_it_ends() {
    // An upstream that sends one event, then waits for the test to have
    // read it before it sends the second and ends.
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_url = format!("http://{}", upstream.local_addr().unwrap());
    let (read_first, first_was_read) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut s, _) = upstream.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await.unwrap();
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(b"10\r\nevent: changed\n\n\r\n").await.unwrap();
        let _ = first_was_read.await;
        s.write_all(b"6\r\ndata:\n\n\r\n0\r\n\r\n").await.unwrap();
    });
    let proxy = BearerProxy::start(&upstream_url, "t").await.unwrap();
    let addr = proxy.url().trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let request = format!("GET /live HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    // A proxy that buffered whole answers would hold the first event
    // until the upstream ends, which it does only after the event is read.
    let first = async {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("event: changed") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the proxy ended the answer early: {seen:?}");
            seen.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("the first event did not come through the proxy before the answer ended");
    read_first.send(()).unwrap();
}
