//! `--open`: the browser is opened on a file that redirects to the link,
//! not on the link itself. A command line is readable by every local user
//! (`/proc/<pid>/cmdline`); the file is readable by its owner only (0600,
//! in a 0700 directory), so the one-time secret stays the person's.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The command that opens a file in the person's browser.
#[cfg(target_os = "macos")]
const OPENER: &str = "open";
#[cfg(not(target_os = "macos"))]
const OPENER: &str = "xdg-open";

/// Pure: the page that sends the browser on to `url` (the link's
/// characters are all URL-safe; it is escaped for the attribute anyway).
fn redirect_page(url: &str) -> String {
    let escaped = url
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={escaped}\">\
         <title>handoff console</title></head>\
         <body><p><a href=\"{escaped}\">Open the handoff console</a></p></body></html>\n"
    )
}

/// Where the redirect file goes: `$XDG_RUNTIME_DIR/handoff` (the person's
/// own runtime directory) or a directory in the temporary directory.
fn directory() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => Path::new(&dir).join("handoff"),
        _ => std::env::temp_dir().join(format!("handoff-console-{}", std::process::id())),
    }
}

/// Writes the redirect file (0600) and opens it in the browser.
pub(super) fn open(url: &str) -> anyhow::Result<()> {
    let dir = directory();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| anyhow::anyhow!("--open: cannot create {}: {e}", dir.display()))?;
    let file = dir.join(format!("console-{}-open.html", std::process::id()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&file)
        .map_err(|e| anyhow::anyhow!("--open: cannot write {}: {e}", file.display()))?;
    out.write_all(redirect_page(url).as_bytes())?;
    let started = Command::new(OPENER)
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Err(err) = started {
        eprintln!("handoff console: could not run {OPENER} ({err}); open the link above yourself");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::redirect_page;

    #[test]
    fn the_redirect_goes_to_the_link_only() {
        let page = redirect_page("http://127.0.0.1:1/login?token=a\"b<c&d");
        assert!(
            page.contains("content=\"0;url=http://127.0.0.1:1/login?token=a&quot;b&lt;c&amp;d\"")
        );
        assert!(!page.contains("a\"b"));
        assert!(!page.contains("<c"));
    }
}
