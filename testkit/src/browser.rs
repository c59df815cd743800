//! A real browser for the console's tests: Debian's headless Chromium driven
//! through its ChromeDriver over W3C WebDriver (fantoccini, no TLS: both
//! ends are plain HTTP on 127.0.0.1). The console's promises — a page works,
//! no script from a body ran, the CSP blocked what got through, the pages
//! pass an accessibility checker — only mean something in the browser
//! people use, so the suite drives one instead of parsing HTML.
//!
//! Each [`Browser`] has its own chromedriver (on a port it picks itself) and
//! a fresh profile directory, so sessions share no cookies; dropping it
//! kills chromedriver's whole process group, Chromium included. When
//! Chromium or chromedriver is missing, [`Browser::start`] fails with the
//! command that installs them: the browser tests never skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use handoff_local::process::Supervised;
use serde_json::{Value, json};

/// How to install what the browser tests need, said when it is missing.
const INSTALL: &str = "run `make chromium` (as root on Debian it runs \
     `apt-get install -y --no-install-recommends chromium chromium-driver`), \
     or set CHROMIUM and CHROMEDRIVER to the binaries";

/// How long chromedriver may take to say which port it listens on.
const DRIVER_START: Duration = Duration::from_secs(30);

/// Chromium's flags: headless (the new mode: the old one left the main
/// binary), no sandbox (the tests run as root, where Chromium refuses to
/// start with one), and none of the background traffic to Google's hosts
/// that a machine without the internet would only wait on.
const FLAGS: [&str; 9] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
];

/// Installed into every document before its own scripts (through the
/// DevTools protocol, so the page's CSP does not apply to it): records the
/// CSP's refusals and every dialog a script tried to open.
const WATCH: &str = "window.__handoffCsp = []; window.__handoffDialogs = [];\
    document.addEventListener('securitypolicyviolation', e => window.__handoffCsp.push(\
      {directive: e.effectiveDirective, blocked: e.blockedURI || '', sample: e.sample || ''}));\
    for (const name of ['alert', 'confirm', 'prompt']) {\
      window[name] = (m) => { window.__handoffDialogs.push(name + ': ' + String(m)); };\
    }";

/// The rule sets axe checks: WCAG 2.0 and 2.1, levels A and AA, and axe's
/// best practices (landmarks, one `h1`, …).
const AXE_RUN: &str = "const done = arguments[arguments.length - 1];\
    axe.run(document, {runOnly: {type: 'tag', values:\
      ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})\
     .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact || '', help: v.help,\
        targets: v.nodes.map(n => n.target.join(' '))}))))\
     .catch(e => done({error: String(e)}));";

/// What the focused element is and how it is drawn.
const FOCUSED: &str = "const e = document.activeElement; const s = getComputedStyle(e);\
    return {tag: e.tagName.toLowerCase(), id: e.id, text: (e.textContent || '').trim(),\
      href: e.getAttribute('href') || '', outline: s.outlineStyle + ' ' + s.outlineWidth,\
      shadow: s.boxShadow};";

/// A headless Chromium session of its own (see the module doc).
pub struct Browser {
    client: Client,
    // Dropped before `dir`: the driver's log and the profile live there.
    driver: Supervised,
    dir: tempfile::TempDir,
}

/// One accessibility rule a page breaks, as axe reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// axe's rule id (`color-contrast`, `label`, …).
    pub id: String,
    /// `minor`, `moderate`, `serious` or `critical`.
    pub impact: String,
    /// What the rule asks for, in axe's words.
    pub help: String,
    /// CSS selectors of the elements that break it.
    pub targets: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {} — at {}",
            self.id,
            self.impact,
            self.help,
            self.targets.join(", ")
        )
    }
}

/// Something the page's Content-Security-Policy refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CspViolation {
    /// The directive that refused it (`script-src-elem`, `img-src`, …).
    pub directive: String,
    /// What was refused: a URL, or `inline`/`eval`.
    pub blocked: String,
}

/// A cookie the browser holds, with the flags that matter for security.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserCookie {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Sent over secure contexts only.
    pub secure: bool,
    /// Hidden from scripts.
    pub http_only: bool,
    /// `Strict`, `Lax` or `None`, when set.
    pub same_site: Option<String>,
}

/// The focused element, for keyboard tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focused {
    /// Its tag name, lower case.
    pub tag: String,
    /// Its id (empty when none).
    pub id: String,
    /// Its text, trimmed.
    pub text: String,
    /// Its `href` attribute (empty when none).
    pub href: String,
    /// The computed outline: style and width (`solid 3px`).
    pub outline: String,
    /// The computed box-shadow (`none` when none).
    pub shadow: String,
}

impl Focused {
    /// Whether the focus is drawn: an outline or a box shadow.
    pub fn visible(&self) -> bool {
        let no_outline = self.outline.starts_with("none") || self.outline.ends_with(" 0px");
        !no_outline || self.shadow != "none"
    }
}

/// chromedriver's (non-W3C) DevTools pass-through:
/// `POST /session/{id}/goog/cdp/execute {"cmd", "params"}`.
#[derive(Debug)]
struct Cdp {
    command: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!(
            "session/{}/goog/cdp/execute",
            session.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        let body = json!({"cmd": self.command, "params": self.params});
        (http::Method::POST, Some(body.to_string()))
    }
}

/// The port in chromedriver's `… started successfully on port N.` line.
fn driver_port(line: &str) -> Option<u16> {
    line.split_once("started successfully on port ")?
        .1
        .trim_end()
        .trim_end_matches('.')
        .parse()
        .ok()
}

/// The browser's and the driver's binaries: `$CHROMIUM`/`$CHROMEDRIVER`, or
/// Debian's.
fn binaries() -> Result<(PathBuf, PathBuf)> {
    let pick = |var: &str, default: &str| {
        std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
    };
    present(
        pick("CHROMIUM", "/usr/bin/chromium"),
        pick("CHROMEDRIVER", "/usr/bin/chromedriver"),
    )
}

/// Both binaries, or an error naming what is missing and how to install it.
fn present(chromium: PathBuf, driver: PathBuf) -> Result<(PathBuf, PathBuf)> {
    let missing: Vec<String> = [&chromium, &driver]
        .into_iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "the console's browser tests need Chromium and ChromeDriver; missing: {}. To install: {INSTALL}",
        missing.join(", ")
    );
    Ok((chromium, driver))
}

/// axe-core's script (pinned in tests/console/a11y), read once.
fn axe_source() -> Result<&'static str> {
    static AXE: OnceLock<Result<String, String>> = OnceLock::new();
    AXE.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/console/a11y/node_modules/axe-core/axe.min.js");
        std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "axe-core is missing ({}: {e}); install it with `make axe-core`",
                path.display()
            )
        })
    })
    .as_deref()
    .map_err(|e| anyhow!("{e}"))
}

impl Browser {
    /// A session with the default flags.
    pub async fn start() -> Result<Self> {
        Self::start_with(&[]).await
    }

    /// A session with `extra` Chromium flags too (e.g.
    /// `--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1`).
    pub async fn start_with(extra: &[&str]) -> Result<Self> {
        let (chromium, driver_binary) = binaries()?;
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("chromedriver.log");
        let mut command = Command::new(&driver_binary);
        command.arg("--port=0");
        let mut driver = Supervised::spawn("chromedriver", command, &log)?;
        let port = wait_for_port(&mut driver, &log)?;

        let profile = dir.path().join("profile");
        let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.extend(extra.iter().map(|f| (*f).to_owned()));
        let mut capabilities = Capabilities::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium, "args": args}),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .with_context(|| {
                format!(
                    "no WebDriver session from chromedriver:\n{}",
                    driver.log_tail(20)
                )
            })?;
        client
            .issue_cmd(Cdp {
                command: "Page.addScriptToEvaluateOnNewDocument",
                params: json!({ "source": WATCH }),
            })
            .await
            .context("installing the CSP listener through the DevTools protocol")?;
        Ok(Self {
            client,
            driver,
            dir,
        })
    }

    /// The fantoccini session, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens `url` and waits for the page to load.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.client
            .goto(url)
            .await
            .with_context(|| format!("opening {url}"))
    }

    /// The address bar's URL.
    pub async fn current_url(&self) -> Result<String> {
        Ok(self.client.current_url().await?.to_string())
    }

    /// The page's title.
    pub async fn title(&self) -> Result<String> {
        Ok(self.client.title().await?)
    }

    /// The rendered text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> Result<String> {
        let element = self
            .client
            .find(Locator::Css(css))
            .await
            .with_context(|| format!("no element matches {css:?}"))?;
        Ok(element.text().await?)
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> Result<usize> {
        Ok(self.client.find_all(Locator::Css(css)).await?.len())
    }

    /// Whether an element matches `css`.
    pub async fn exists(&self, css: &str) -> Result<bool> {
        Ok(self.count(css).await? > 0)
    }

    /// An attribute of the first element matching `css`.
    pub async fn attr(&self, css: &str, name: &str) -> Result<Option<String>> {
        let element = self
            .client
            .find(Locator::Css(css))
            .await
            .with_context(|| format!("no element matches {css:?}"))?;
        Ok(element.attr(name).await?)
    }

    /// Clicks the first element matching `css` (a link or a button: the
    /// navigation it starts is waited for by the next command).
    pub async fn click(&self, css: &str) -> Result<()> {
        self.client
            .find(Locator::Css(css))
            .await
            .with_context(|| format!("no element matches {css:?}"))?
            .click()
            .await
            .with_context(|| format!("clicking {css:?}"))
    }

    /// Types `fields` (name → value) into the form matching `form` and
    /// submits it with its first submit button.
    pub async fn fill(&self, form: &str, fields: &[(&str, &str)]) -> Result<()> {
        let found = self
            .client
            .form(Locator::Css(form))
            .await
            .with_context(|| format!("no form matches {form:?}"))?;
        for (name, value) in fields {
            found
                .set_by_name(name, value)
                .await
                .with_context(|| format!("form {form:?} has no field {name:?}"))?;
        }
        found
            .submit()
            .await
            .with_context(|| format!("submitting {form:?}"))
    }

    /// Runs `script` in the page (a function body: `return` gives the value).
    pub async fn execute(&self, script: &str) -> Result<Value> {
        Ok(self.client.execute(script, Vec::new()).await?)
    }

    /// Writes a PNG of the viewport to `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let png = self.client.screenshot().await?;
        std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))
    }

    /// Resizes the window so the viewport is about `width` × `height`.
    pub async fn set_window_size(&self, width: u32, height: u32) -> Result<()> {
        Ok(self.client.set_window_size(width, height).await?)
    }

    /// Presses Tab once and says what has the focus then.
    pub async fn tab(&self) -> Result<Focused> {
        let tab: char = Key::Tab.into();
        let keys = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: tab })
            .then(KeyAction::Up { value: tab });
        self.client.perform_actions(keys).await?;
        self.focused().await
    }

    /// The focused element.
    pub async fn focused(&self) -> Result<Focused> {
        let v = self.execute(FOCUSED).await?;
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        Ok(Focused {
            tag: field("tag"),
            id: field("id"),
            text: field("text"),
            href: field("href"),
            outline: field("outline"),
            shadow: field("shadow"),
        })
    }

    /// Runs axe-core on the page as it is now: every WCAG 2.0/2.1 A and AA
    /// rule and axe's best practices. Empty when the page passes.
    pub async fn axe(&self) -> Result<Vec<Violation>> {
        let loaded = self.execute("return typeof window.axe").await?;
        if loaded != json!("object") {
            self.execute(&format!("{}\nreturn typeof axe;", axe_source()?))
                .await
                .context("injecting axe-core")?;
        }
        let found = self.client.execute_async(AXE_RUN, Vec::new()).await?;
        violations(&found)
    }

    /// What the page's CSP refused since the page loaded (recorded by a
    /// listener installed before the page's own scripts).
    pub async fn csp_violations(&self) -> Result<Vec<CspViolation>> {
        let seen = self.execute("return window.__handoffCsp || []").await?;
        Ok(seen
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| CspViolation {
                directive: v["directive"].as_str().unwrap_or_default().to_owned(),
                blocked: v["blocked"].as_str().unwrap_or_default().to_owned(),
            })
            .collect())
    }

    /// The dialogs (`alert`, `confirm`, `prompt`) a script of the page
    /// tried to open since it loaded, as `name: message`.
    pub async fn dialogs(&self) -> Result<Vec<String>> {
        let seen = self.execute("return window.__handoffDialogs || []").await?;
        Ok(seen
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect())
    }

    /// The cookies the browser holds for the current page.
    pub async fn cookies(&self) -> Result<Vec<BrowserCookie>> {
        Ok(self
            .client
            .get_all_cookies()
            .await?
            .into_iter()
            .map(|c| BrowserCookie {
                name: c.name().to_owned(),
                value: c.value().to_owned(),
                secure: c.secure().unwrap_or(false),
                http_only: c.http_only().unwrap_or(false),
                same_site: c.same_site().map(|s| s.to_string()),
            })
            .collect())
    }

    /// Waits until the first element matching `css` shows `needle` (a page
    /// that changes by itself: live refresh); fails naming what it saw.
    pub async fn wait_for_text(&self, css: &str, needle: &str, limit: Duration) -> Result<()> {
        let what = format!("{css:?} to show {needle:?}");
        crate::wait::eventually(&what, limit, || async {
            match self.text(css).await {
                Ok(text) if text.contains(needle) => Ok(()),
                Ok(text) => Err(format!("{text:?}")),
                Err(e) => Err(format!("{e:#}")),
            }
        })
        .await;
        Ok(())
    }

    /// chromedriver's log (for failure messages).
    pub fn driver_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("chromedriver.log")).unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group at once: chromedriver and the Chromium it started.
        self.driver.kill();
    }
}

/// Waits for chromedriver's `started successfully on port N` line.
fn wait_for_port(driver: &mut Supervised, log: &Path) -> Result<u16> {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(port) = text.lines().find_map(driver_port) {
            return Ok(port);
        }
        driver.ensure_running()?;
        anyhow::ensure!(
            started.elapsed() < DRIVER_START,
            "chromedriver said no port within {DRIVER_START:?}:\n{}",
            driver.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// axe's answer as [`Violation`]s, or the error it reported.
fn violations(found: &Value) -> Result<Vec<Violation>> {
    if let Some(error) = found.get("error") {
        anyhow::bail!("axe-core failed: {error}");
    }
    let list = found
        .as_array()
        .ok_or_else(|| anyhow!("axe-core answered {found}, not a list of violations"))?;
    Ok(list
        .iter()
        .map(|v| Violation {
            id: v["id"].as_str().unwrap_or_default().to_owned(),
            impact: v["impact"].as_str().unwrap_or_default().to_owned(),
            help: v["help"].as_str().unwrap_or_default().to_owned(),
            targets: v["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_port_is_read_from_its_banner() {
        let cases = [
            (
                "ChromeDriver was started successfully on port 38109.",
                Some(38109),
            ),
            (
                "ChromeDriver was started successfully on port 9515.\r",
                Some(9515),
            ),
            ("Starting ChromeDriver 156.0 on port 0", None),
            ("ChromeDriver was started successfully on port x.", None),
            ("", None),
        ];
        for (line, want) in cases {
            assert_eq!(driver_port(line), want, "{line:?}");
        }
    }

    #[test]
    fn a_focus_is_visible_by_outline_or_shadow() {
        let focused = |outline: &str, shadow: &str| Focused {
            tag: "a".into(),
            id: String::new(),
            text: String::new(),
            href: String::new(),
            outline: outline.into(),
            shadow: shadow.into(),
        };
        let cases = [
            ("solid 3px", "none", true),
            ("auto 1px", "none", true),
            ("none 0px", "none", false),
            ("solid 0px", "none", false),
            ("none 0px", "rgb(0, 0, 0) 0px 0px 0px 3px", true),
        ];
        for (outline, shadow, want) in cases {
            assert_eq!(
                focused(outline, shadow).visible(),
                want,
                "{outline} / {shadow}"
            );
        }
    }

    #[test]
    fn axe_answers_become_violations_or_its_error() {
        let found = json!([{"id": "label", "impact": "critical", "help": "Form elements must have labels",
            "targets": ["#q", "form > input"]}]);
        let got = violations(&found).unwrap();
        assert_eq!(
            got[0].to_string(),
            "label (critical): Form elements must have labels — at #q, form > input"
        );
        assert!(violations(&json!([])).unwrap().is_empty());
        let error = violations(&json!({"error": "boom"})).unwrap_err();
        assert!(error.to_string().contains("boom"), "{error}");
    }

    #[test]
    fn a_missing_browser_names_itself_and_the_install_command() {
        let error = present("/nope/chromium".into(), "/nope/chromedriver".into()).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("missing: /nope/chromium, /nope/chromedriver"),
            "{message}"
        );
        assert!(
            message.contains("apt-get install -y --no-install-recommends chromium chromium-driver"),
            "{message}"
        );
    }
}
