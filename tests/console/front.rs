//! The console's front doors and guards, over plain HTTP against the real
//! `handoff console` and a real kube-apiserver: what a browser does is
//! written out request by request, so every header the console answers
//! can be read, and what a hostile page or another local user would send
//! can be sent.

use std::path::Path;
use std::time::Duration;

use handoff_core::api::Handoff;
use handoff_core::api::naming::{labels_for, name_for_key};
use handoff_testkit::ConsoleProcess;
use handoff_testkit::http::{Answer, addr_of, exchange};
use handoff_testkit::spec::{Fields, spec};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest a test waits for an event before it fails (not a measurement).
const EVENT_WAIT: Duration = Duration::from_secs(30);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_handoff"))
}

/// `handoff console` in laptop mode, as the shared plane's admin, looking
/// in `namespace`, with `extra` flags.
fn laptop(namespace: &str, extra: &[&str]) -> ConsoleProcess {
    let env = handoff_testkit::shared();
    let mut flags = vec!["--namespace", namespace];
    flags.extend_from_slice(extra);
    ConsoleProcess::laptop(binary(), env.kubeconfig_path(), &flags)
        .unwrap_or_else(|e| panic!("handoff console (laptop) did not start: {e:#}"))
}

/// `handoff console --behind-proxy`, looking in `namespace`.
fn behind_proxy(namespace: &str) -> ConsoleProcess {
    let env = handoff_testkit::shared();
    ConsoleProcess::behind_proxy(binary(), env.kubeconfig_path(), &["--namespace", namespace])
        .unwrap_or_else(|e| panic!("handoff console (proxy) did not start: {e:#}"))
}

/// `127.0.0.1:PORT` of a console: its own Host.
fn host(console: &ConsoleProcess) -> String {
    addr_of(console.url()).expect("the console's address")
}

/// The path and query of the one-time link.
fn login_path(console: &ConsoleProcess) -> String {
    let host = host(console);
    console
        .login_url()
        .split_once(&host)
        .map(|(_, path)| path.to_owned())
        .expect("the link's path")
}

/// One request with `Host: host`, these header lines and `body`.
async fn send(
    console: &ConsoleProcess,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if method == "POST" {
        request.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    exchange(
        &addr_of(console.url()).expect("address"),
        request.as_bytes(),
    )
    .await
    .unwrap_or_else(|e| panic!("{method} {path}: {e:#}"))
}

async fn get(console: &ConsoleProcess, path: &str, headers: &[(&str, &str)]) -> Answer {
    send(console, "GET", &host(console), path, headers, "").await
}

/// Signs in with the one-time link; the `Cookie` header value to send.
async fn sign_in(console: &ConsoleProcess) -> String {
    let answer = get(console, &login_path(console), &[]).await;
    assert_eq!(answer.status, 303, "the link signs in: {answer:?}");
    let set = answer.header("set-cookie").expect("a session cookie");
    set.split(';').next().expect("name=value").to_owned()
}

/// Every answer's security headers.
fn assert_guarded(answer: &Answer, what: &str) {
    let csp = answer
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy: {answer:?}"));
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(directive), "{what}: {csp} lacks {directive}");
    }
    assert_eq!(answer.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(
        answer.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    // same-origin, not no-referrer: under no-referrer a form's POST
    // carries `Origin: null` and the console's own actions are refused.
    assert_eq!(
        answer.header("referrer-policy"),
        Some("same-origin"),
        "{what}"
    );
}

/// A Handoff of `key` in project `shop` of `namespace`, created as admin.
async fn handoff(namespace: &str, key: &str) -> Handoff {
    let env = handoff_testkit::shared();
    let api: Api<Handoff> = Api::namespaced(env.client().await, namespace);
    let spec = spec(key).body(format!("# {key}\n\nnotes")).by("writer");
    let mut object = Handoff::new(&name_for_key(key), spec);
    // Labelled as every writer labels it (the store; the controller for
    // kubectl's writes): lists and live pages select by these.
    object.metadata.labels = Some(labels_for("shop", None, None));
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create handoff {key}: {e}"))
}

/// The form's `csrf` value in a page.
fn csrf_in(page: &str) -> String {
    let at = page
        .find("name=\"csrf\"")
        .unwrap_or_else(|| panic!("no csrf field in {page}"));
    let rest = &page[at..];
    let value = rest.split_once("value=\"").expect("a value").1;
    value.split('"').next().expect("quoted").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_one_time_link_signs_in_once_with_a_strict_cookie() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-link").await;
    let console = laptop(&namespace, &[]);
    let path = login_path(&console);
    let unsigned = get(&console, "/", &[]).await;
    assert_eq!(unsigned.status, 401, "no cookie, no page: {unsigned:?}");
    assert!(!unsigned.body.contains(&namespace), "{}", unsigned.body);

    let first = get(&console, &path, &[]).await;
    assert_eq!(first.status, 303, "{first:?}");
    assert_eq!(
        first.header("location"),
        Some("/"),
        "the secret leaves the address bar"
    );
    assert_guarded(&first, "the sign-in redirect");
    let set = first.header("set-cookie").expect("a session cookie");
    let mut attributes: Vec<&str> = set.split(';').map(str::trim).collect();
    let pair = attributes.remove(0);
    assert!(pair.starts_with("__Host-handoff-console="), "{set}");
    attributes.sort_unstable();
    assert_eq!(
        attributes,
        ["HttpOnly", "Path=/", "SameSite=Strict", "Secure"],
        "{set}"
    );
    assert!(
        !set.contains(path.split('=').nth(1).expect("secret")),
        "the cookie is not the secret"
    );

    let second = get(&console, &path, &[]).await;
    assert_eq!(second.status, 401, "{second:?}");
    assert!(second.body.contains("already used"), "{}", second.body);
    assert!(second.header("set-cookie").is_none(), "{second:?}");

    let signed = get(&console, "/", &[("Cookie", pair)]).await;
    assert_eq!(signed.status, 200, "the cookie signs in: {signed:?}");
    assert!(signed.body.contains(&namespace), "{}", signed.body);

    let forged = get(
        &console,
        "/",
        &[("Cookie", "__Host-handoff-console=forged")],
    )
    .await;
    assert_eq!(forged.status, 401, "{forged:?}");
    let wrong = get(&console, "/login?token=not-the-secret", &[]).await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let secret = path.split('=').nth(1).expect("secret");
    assert_eq!(
        console.log().matches(secret).count(),
        1,
        "the secret is printed once, in the link, and never logged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_host_gets_421_and_nothing_else() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-host").await;
    handoff(&namespace, "rebinding#secret").await;
    let console = laptop(&namespace, &[]);
    let cookie = sign_in(&console).await;
    let port = console.url().rsplit(':').next().expect("port").to_owned();
    for bad in [
        format!("rebind.attacker.test:{port}"),
        "127.0.0.1:1".to_owned(),
        format!("localhost.attacker.test:{port}"),
        String::new(),
    ] {
        for path in [
            "/",
            "/assets/console.css",
            &format!("/ns/{namespace}/projects/shop"),
        ] {
            let answer = send(&console, "GET", &bad, path, &[("Cookie", &cookie)], "").await;
            assert_eq!(answer.status, 421, "Host {bad:?} {path}: {answer:?}");
            assert!(answer.body.is_empty(), "Host {bad:?}: {}", answer.body);
            assert_guarded(&answer, "a 421");
        }
    }
    for good in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let answer = send(&console, "GET", &good, "/", &[("Cookie", &cookie)], "").await;
        assert_eq!(answer.status, 200, "Host {good}: {answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_answer_carries_the_security_headers() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-headers").await;
    let console = laptop(&namespace, &[]);
    let cookie = sign_in(&console).await;
    let cases = [
        ("/", 200, Some("text/html")),
        ("/assets/console.css", 200, Some("text/css")),
        ("/assets/console.js", 200, Some("text/javascript")),
        ("/no/such/page", 404, Some("text/html")),
        (
            &*format!("/ns/{namespace}/handoffs/missing"),
            404,
            Some("text/html"),
        ),
        ("/ns/Bad_Namespace/offers", 400, Some("text/html")),
        (
            &*format!("/ns/{namespace}/handoffs/x/diff?from=a&to=2"),
            400,
            Some("text/html"),
        ),
        (&*format!("/ns/{namespace}/live"), 400, Some("text/html")),
        (
            &*format!("/ns/{namespace}/live?project=shop&since=1x"),
            400,
            Some("text/html"),
        ),
    ];
    for (path, status, content_type) in cases {
        let answer = get(&console, path, &[("Cookie", &cookie)]).await;
        assert_eq!(answer.status, status, "{path}: {answer:?}");
        assert_guarded(&answer, path);
        if let Some(content_type) = content_type {
            let got = answer.header("content-type").unwrap_or_default();
            assert!(got.starts_with(content_type), "{path}: {got}");
        }
    }
    let unsigned = get(&console, "/", &[]).await;
    assert_guarded(&unsigned, "the sign-in page");
    let data = get(&console, "/", &[("Cookie", &cookie)]).await;
    assert_eq!(data.header("cache-control"), Some("no-store"));
    let diff = get(
        &console,
        &format!("/ns/{namespace}/handoffs/x/diff?from=a&to=2"),
        &[("Cookie", &cookie)],
    )
    .await;
    assert!(
        diff.body.contains("from"),
        "the 400 names the field: {}",
        diff.body
    );
    let since = get(
        &console,
        &format!("/ns/{namespace}/live?project=shop&since=1x"),
        &[("Cookie", &cookie)],
    )
    .await;
    assert!(
        since.body.contains("since") && since.body.contains("digits"),
        "the 400 names the field and its rule: {}",
        since.body
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_without_its_origin_or_token_deletes_nothing() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-csrf").await;
    let created = handoff(&namespace, "csrf#kept").await;
    let name = created.metadata.name.clone().expect("name");
    let version = created.metadata.resource_version.clone();
    let console = laptop(&namespace, &[]);
    let cookie = sign_in(&console).await;
    let own = format!("http://{}", host(&console));
    let path = format!("/ns/{namespace}/handoffs/{name}/delete");
    let confirm = get(&console, &path, &[("Cookie", &cookie)]).await;
    assert_eq!(confirm.status, 200, "{confirm:?}");
    let token = csrf_in(&confirm.body);
    let cases = [
        (None, format!("csrf={token}"), "Origin rule"),
        (
            Some("http://evil.test"),
            format!("csrf={token}"),
            "Origin rule",
        ),
        (Some("null"), format!("csrf={token}"), "Origin rule"),
        (Some(own.as_str()), String::new(), "CSRF rule"),
        (Some(own.as_str()), "csrf=".to_owned(), "CSRF rule"),
        (
            Some(own.as_str()),
            "csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".to_owned(),
            "CSRF rule",
        ),
    ];
    let api: Api<Handoff> = Api::namespaced(env.client().await, &namespace);
    for (origin, body, rule) in cases {
        let mut headers = vec![("Cookie", cookie.as_str())];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        let answer = send(&console, "POST", &host(&console), &path, &headers, &body).await;
        assert_eq!(answer.status, 403, "{origin:?} {body}: {answer:?}");
        assert!(
            answer.body.contains(rule),
            "{origin:?} {body}: {}",
            answer.body
        );
        assert_guarded(&answer, "a 403");
        let kept = api.get(&name).await.expect("the handoff is still there");
        assert_eq!(kept.metadata.resource_version, version, "untouched");
    }
    let done = send(
        &console,
        "POST",
        &host(&console),
        &path,
        &[("Cookie", &cookie), ("Origin", &own)],
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(
        done.status, 303,
        "with its Origin and token the action runs: {done:?}"
    );
    assert_eq!(
        done.header("location"),
        Some(format!("/ns/{namespace}/projects/shop").as_str())
    );
    assert!(api.get_opt(&name).await.expect("read").is_none(), "deleted");
}

/// A token of ServiceAccount `name` in `namespace`, which has no role.
async fn token_without_rights(namespace: &str, name: &str) -> String {
    let client = handoff_testkit::shared().client().await;
    let sas: Api<ServiceAccount> = Api::namespaced(client, namespace);
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.to_owned());
    sas.create(&PostParams::default(), &account)
        .await
        .expect("create ServiceAccount");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    sas.create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token request")
        .status
        .and_then(|s| s.token)
        .expect("issued token")
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_a_proxy_only_a_good_token_sees_and_only_what_rbac_allows() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-proxy").await;
    handoff(&namespace, "proxy#visible-only-to-admins").await;
    let console = behind_proxy(&namespace);
    assert!(
        !console.log().contains("/login?token="),
        "no link behind a proxy"
    );
    let project = format!("/ns/{namespace}/projects/shop");
    for (headers, what) in [
        (vec![], "no token"),
        (vec![("Authorization", "Bearer not-a-token")], "a bad token"),
        (vec![("Authorization", "Basic YTpi")], "no bearer"),
    ] {
        for path in ["/", project.as_str()] {
            let answer = get(&console, path, &headers).await;
            assert_eq!(answer.status, 401, "{what} {path}: {answer:?}");
            assert!(
                answer.body.contains("Sign"),
                "{what}: the sign-in page: {}",
                answer.body
            );
            assert!(
                !answer.body.contains("visible-only-to-admins"),
                "{what}: {}",
                answer.body
            );
            assert!(!answer.body.contains(&namespace), "{what}: {}", answer.body);
            assert!(
                !answer.body.contains("not-a-token"),
                "a token is never echoed"
            );
            assert_guarded(&answer, what);
        }
    }
    assert!(
        !console.log().contains("not-a-token"),
        "a token is never logged"
    );

    let token = token_without_rights(&namespace, "nobody").await;
    let bearer = format!("Bearer {token}");
    let front = get(&console, "/", &[("Authorization", &bearer)]).await;
    assert_eq!(front.status, 200, "{front:?}");
    assert!(
        !front.body.contains(&format!("/ns/{namespace}")),
        "a namespace it may not list is not shown: {}",
        front.body
    );
    assert!(
        front.body.contains("nobody"),
        "signed in as the account: {}",
        front.body
    );
    let list = get(&console, &project, &[("Authorization", &bearer)]).await;
    assert_eq!(list.status, 403, "{list:?}");
    assert!(
        !list.body.contains("visible-only-to-admins"),
        "{}",
        list.body
    );
    assert!(!console.log().contains(&token), "a token is never logged");
}

/// A live stream, read as it comes.
struct Live<'a> {
    console: &'a ConsoleProcess,
    stream: TcpStream,
    seen: String,
}

impl<'a> Live<'a> {
    /// Opens `path` with `cookie`; the head must say `200`.
    async fn open(console: &'a ConsoleProcess, path: &str, cookie: &str) -> Result<Self, String> {
        let mut stream = TcpStream::connect(addr_of(console.url()).expect("address"))
            .await
            .expect("connect");
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n",
            host(console)
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut live = Self {
            console,
            stream,
            seen: String::new(),
        };
        live.until("\r\n\r\n").await;
        if live.seen.starts_with("HTTP/1.1 200") {
            Ok(live)
        } else {
            // The refusal's body too (the console closes the connection).
            let mut rest = String::new();
            let _ = tokio::time::timeout(EVENT_WAIT, live.stream.read_to_string(&mut rest)).await;
            Err(live.seen + &rest)
        }
    }

    /// Reads until the console ends the stream.
    async fn until_ended(&mut self) {
        let mut buf = [0u8; 4096];
        let read = tokio::time::timeout(EVENT_WAIT, async {
            loop {
                let n = self.stream.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
        .await;
        assert!(
            read.is_ok(),
            "the stream did not end within {EVENT_WAIT:?}: {}",
            self.seen
        );
    }

    /// Reads until `marker` has been seen (after what was already seen).
    async fn until(&mut self, marker: &str) {
        let from = self.seen.len();
        let mut buf = [0u8; 4096];
        let read = tokio::time::timeout(EVENT_WAIT, async {
            while !self.seen[from..].contains(marker) {
                let n = self.stream.read(&mut buf).await.expect("read the stream");
                assert!(
                    n > 0,
                    "the stream ended before {marker:?}: {}\nthe console's log:\n{}",
                    self.seen,
                    self.console.log()
                );
                self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
        .await;
        assert!(
            read.is_ok(),
            "no {marker:?} within {EVENT_WAIT:?}: {}",
            self.seen
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_page_hears_a_write_and_streams_are_bounded() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-live").await;
    // A short idle timeout: keep-alives every 500 ms, so a closed stream
    // is noticed (a write fails) soon.
    let console = laptop(
        &namespace,
        &[
            "--max-live-streams-per-person",
            "1",
            "--idle-timeout",
            "2s",
            "--request-timeout",
            "1s",
        ],
    );
    let cookie = sign_in(&console).await;
    let path = format!("/ns/{namespace}/live?project=shop");
    let mut live = Live::open(&console, &path, &cookie)
        .await
        .expect("a stream");
    assert!(
        live.seen
            .to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{}",
        live.seen
    );
    assert!(
        live.seen.contains("frame-ancestors 'none'"),
        "{}",
        live.seen
    );
    live.until("event: ready").await;

    let refused = Live::open(&console, &path, &cookie)
        .await
        .err()
        .expect("past the bound");
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(refused.contains("Too many live pages"), "{refused}");

    let created = handoff(&namespace, "live#written").await;
    let name = created.metadata.name.expect("name");
    live.until("event: changed").await;
    let event = &live.seen[live.seen.rfind("event: changed").expect("the event")..];
    assert!(event.contains(&format!("data: {name} ")), "{event}");
    drop(live);

    // The place is given back when the page goes away (noticed when a
    // keep-alive cannot be written).
    let mut again = None;
    let deadline = tokio::time::Instant::now() + EVENT_WAIT;
    while tokio::time::Instant::now() < deadline {
        match Live::open(&console, &path, &cookie).await {
            Ok(live) => {
                again = Some(live);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert!(again.is_some(), "a closed stream frees its place");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_stream_outlives_the_idle_timeout() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-idle").await;
    let console = laptop(
        &namespace,
        &["--idle-timeout", "2s", "--request-timeout", "1s"],
    );
    let cookie = sign_in(&console).await;
    let path = format!("/ns/{namespace}/live?project=shop");
    let mut live = Live::open(&console, &path, &cookie)
        .await
        .expect("a stream");
    live.until("event: ready").await;
    // A keep-alive every quarter of the idle timeout: eight of them span
    // twice the idle timeout, while the client sends nothing.
    for _ in 0..8 {
        live.until(":\n\n").await;
    }
    let created = handoff(&namespace, "idle#written").await;
    live.until("event: changed").await;
    let name = created.metadata.name.expect("name");
    assert!(
        live.seen.contains(&format!("data: {name} ")),
        "{}",
        live.seen
    );
}

/// The address of a page's live stream (`data-live`), unescaped.
fn live_path(page: &str) -> String {
    let at = page
        .find("data-live=\"")
        .unwrap_or_else(|| panic!("no data-live in {page}"));
    let rest = &page[at + "data-live=\"".len()..];
    let quoted = rest.split('"').next().expect("quoted");
    quoted.replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_between_a_page_and_its_stream_is_announced() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-gap").await;
    let shown = handoff(&namespace, "gap#shown").await;
    let shown = shown.metadata.name.expect("name");
    let console = laptop(&namespace, &[]);
    let cookie = sign_in(&console).await;
    let cookies = [("Cookie", cookie.as_str())];

    // The list: drawn, then a handoff is written, then its stream opens.
    let list = get(
        &console,
        &format!("/ns/{namespace}/projects/shop"),
        &cookies,
    )
    .await;
    assert_eq!(list.status, 200, "{list:?}");
    let path = live_path(&list.body);
    assert!(
        path.contains("&since="),
        "the page names its version: {path}"
    );
    let written = handoff(&namespace, "gap#written").await;
    let written = written.metadata.name.expect("name");
    let mut live = Live::open(&console, &path, &cookie)
        .await
        .expect("a stream");
    live.until("event: changed").await;
    assert!(
        live.seen.contains(&format!("data: {written} ")),
        "{}",
        live.seen
    );
    drop(live);

    // One handoff: drawn, then written again, then its stream opens.
    let page = get(
        &console,
        &format!("/ns/{namespace}/handoffs/{shown}"),
        &cookies,
    )
    .await;
    assert_eq!(page.status, 200, "{page:?}");
    let path = live_path(&page.body);
    assert!(
        path.contains("&since="),
        "the page names its version: {path}"
    );
    let api: Api<Handoff> = Api::namespaced(env.client().await, &namespace);
    let body = serde_json::json!({"spec": {"body": "# gap\n\nwritten again"}});
    let patched = api
        .patch(&shown, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .expect("write the handoff again");
    let version = patched.metadata.resource_version.expect("a version");
    let mut live = Live::open(&console, &path, &cookie)
        .await
        .expect("a stream");
    live.until("event: changed").await;
    assert!(
        live.seen.contains(&format!("data: {shown} {version}")),
        "{}",
        live.seen
    );
    drop(live);

    // A version the apiserver no longer keeps: one change (the page is
    // fetched again and names a fresh version), then the stream ends.
    let path = format!("/ns/{namespace}/live?project=shop&since=1");
    let mut live = Live::open(&console, &path, &cookie)
        .await
        .expect("a stream");
    live.until_ended().await;
    assert!(
        live.seen.contains("event: changed\ndata: expired"),
        "{}",
        live.seen
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_live_page_does_not_hold_up_the_shutdown() {
    let env = handoff_testkit::shared();
    let namespace = env.namespace("console-stop").await;
    let console = laptop(&namespace, &[]);
    let cookie = sign_in(&console).await;
    let path = format!("/ns/{namespace}/live?project=shop");
    let mut live = Live::open(&console, &path, &cookie)
        .await
        .expect("a stream");
    live.until("event: ready").await;
    let pid = i32::try_from(console.pid()).expect("a pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM to the console");
    live.until_ended().await;
    assert!(
        live.seen.ends_with("0\r\n\r\n"),
        "the stream ended whole: {}",
        live.seen
    );
}
