//! OCI images written without a registry, for the e2e node (issue 30).
//!
//! Why: this machine has no Docker and reaches no registry, and the node's
//! Pods run with `imagePullPolicy: Never`. So the test kit writes each image
//! itself, as an OCI image *layout archive* (a tar of `oci-layout`,
//! `index.json` and `blobs/sha256/…`) that containerd imports:
//!
//! ```text
//! ctr -a <socket> -n k8s.io images import --no-unpack=false <archive>
//! ```
//!
//! An image is one uncompressed tar layer, its config and its manifest,
//! named in the index by the `org.opencontainers.image.ref.name` annotation
//! (a full reference such as `localhost/handoff:e2e`, which is also the name
//! containerd gives the image). Everything is deterministic: fixed mtimes,
//! owners and modes from the spec, entries sorted, no timestamps in the
//! config, so the same inputs always give the same digest.
//!
//! The project's images are functions here: [`handoff_image`] reproduces
//! what the Dockerfile's final stage produces on
//! `distroless/static-debian12:nonroot` (a unit test keeps the two in
//! agreement), [`pause_image`] is the node's sandbox and [`agent_image`] the
//! scripted agent of the Jobs. (The node runs CoreDNS as a host process,
//! so it has no image.)
//!
//! The pure part (layer, config, manifest, index, archive as bytes) is
//! separate from the thin I/O shell ([`ImageSpec::write_archive`] reads host
//! files and writes the archive).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The reference of the project's image on the node.
pub const HANDOFF_IMAGE: &str = "localhost/handoff:e2e";
/// The node's sandbox image (the kubelet's `--pod-infra-container-image`,
/// containerd's `sandbox_image`).
pub const PAUSE_IMAGE: &str = "localhost/pause:e2e";
/// The scripted agent's image (entrypoint `/agent`, with `/handoff` beside it).
pub const AGENT_IMAGE: &str = "localhost/handoff-agent:e2e";

/// The user distroless's `nonroot` runs as, and the Dockerfile's `USER`.
pub const NONROOT: u32 = 65532;

/// Media types containerd checks on import.
pub mod media_type {
    /// `index.json`.
    pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
    /// The image manifest.
    pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// The image config.
    pub const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
    /// An uncompressed tar layer.
    pub const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
}

/// The annotation that names an image in an OCI layout's index.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// The mtime of every entry (layer and archive): 2000-01-01T00:00:00Z, a
/// fixed instant so digests do not depend on when the image was written.
const MTIME: u64 = 946_684_800;

/// What an image holds and how it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageSpec {
    /// The full reference, e.g. `localhost/handoff:e2e`.
    pub reference: String,
    /// Regular files of the layer.
    pub files: Vec<ImageFile>,
    /// Directories of the layer. The missing parents of files and
    /// directories are added as `0755` directories of root.
    pub dirs: Vec<ImageDir>,
    /// The config's `User` (`uid:gid`, numeric so the kubelet can check
    /// `runAsNonRoot`).
    pub user: String,
    /// The config's `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// The config's `Cmd`.
    pub cmd: Vec<String>,
    /// The config's `Env`, `NAME=value` each.
    pub env: Vec<String>,
    /// The config's `WorkingDir` (empty: none).
    pub working_dir: String,
}

/// A regular file of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageFile {
    /// Absolute path in the image.
    pub path: String,
    /// Where its bytes come from.
    pub source: Source,
    /// Permission bits (e.g. `0o755`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// The bytes of an [`ImageFile`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Bytes(Vec<u8>),
    /// Read when the archive is written.
    HostFile(PathBuf),
}

/// A directory of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageDir {
    /// Absolute path in the image.
    pub path: String,
    /// Permission bits, sticky bit included (`/tmp` is `0o1777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A content digest, `sha256:<hex>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        let mut hex = String::with_capacity(64);
        for byte in Sha256::digest(bytes) {
            let _ = write!(hex, "{byte:02x}");
        }
        Self(format!("sha256:{hex}"))
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex part, the blob's file name under `blobs/sha256/`.
    pub fn hex(&self) -> &str {
        self.0.trim_start_matches("sha256:")
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ImageFile {
    /// A root-owned file of `bytes`.
    pub fn bytes(path: &str, bytes: impl Into<Vec<u8>>, mode: u32) -> Self {
        Self {
            path: path.into(),
            source: Source::Bytes(bytes.into()),
            mode,
            uid: 0,
            gid: 0,
        }
    }

    /// A root-owned file copied from the host's `host`.
    pub fn host(path: &str, host: impl Into<PathBuf>, mode: u32) -> Self {
        Self {
            path: path.into(),
            source: Source::HostFile(host.into()),
            mode,
            uid: 0,
            gid: 0,
        }
    }
}

impl ImageDir {
    pub fn new(path: &str, mode: u32, uid: u32, gid: u32) -> Self {
        Self {
            path: path.into(),
            mode,
            uid,
            gid,
        }
    }
}

/// One entry of a layer, its bytes resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    /// Relative path (no leading `/`).
    path: String,
    /// `None` for a directory.
    data: Option<Vec<u8>>,
    mode: u32,
    uid: u32,
    gid: u32,
}

impl ImageSpec {
    /// Writes the image as an OCI layout archive at `dest`, replacing it,
    /// and returns the manifest's digest (what `ctr images ls` shows).
    pub fn write_archive(&self, dest: &Path) -> Result<Digest> {
        let entries = self.entries()?;
        let (archive, digest) = self.archive(&entries)?;
        std::fs::write(dest, archive).with_context(|| format!("writing {}", dest.display()))?;
        Ok(digest)
    }

    /// The layer's entries, host files read (the only I/O before writing).
    fn entries(&self) -> Result<Vec<Entry>> {
        let mut files = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let data = match &f.source {
                Source::Bytes(b) => b.clone(),
                Source::HostFile(p) => std::fs::read(p).with_context(|| {
                    format!(
                        "reading {} for {} of {}",
                        p.display(),
                        f.path,
                        self.reference
                    )
                })?,
            };
            files.push((f, data));
        }
        layer_entries(&self.dirs, files)
    }

    /// The archive's bytes and the manifest's digest.
    fn archive(&self, entries: &[Entry]) -> Result<(Vec<u8>, Digest)> {
        let layer = tar_bytes(entries)?;
        let layer_digest = Digest::of(&layer);
        let config = to_json(&self.config_json(&layer_digest))?;
        let manifest = to_json(&manifest_json(
            &descriptor(media_type::CONFIG, &config),
            &descriptor(media_type::LAYER, &layer),
        ))?;
        let manifest_digest = Digest::of(&manifest);
        let index = to_json(&index_json(
            &descriptor(media_type::MANIFEST, &manifest),
            &self.reference,
        ))?;
        let archive = layout_archive(&index, [&layer, &config, &manifest])?;
        Ok((archive, manifest_digest))
    }

    /// The image config: platform, runtime config and the layer's diff id
    /// (the digest of the uncompressed layer, which here is the layer).
    fn config_json(&self, layer: &Digest) -> Value {
        let mut config = serde_json::Map::new();
        let mut put = |key: &str, value: Value| {
            config.insert(key.into(), value);
        };
        if !self.user.is_empty() {
            put("User", json!(self.user));
        }
        if !self.env.is_empty() {
            put("Env", json!(self.env));
        }
        if !self.entrypoint.is_empty() {
            put("Entrypoint", json!(self.entrypoint));
        }
        if !self.cmd.is_empty() {
            put("Cmd", json!(self.cmd));
        }
        if !self.working_dir.is_empty() {
            put("WorkingDir", json!(self.working_dir));
        }
        json!({
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [layer.as_str()]},
        })
    }
}

/// The layer's entries: every directory (given, or a missing parent) and
/// every file, sorted by path so parents come first. A path
/// given twice, or a relative one, is refused.
fn layer_entries(dirs: &[ImageDir], files: Vec<(&ImageFile, Vec<u8>)>) -> Result<Vec<Entry>> {
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    for d in dirs {
        let path = relative(&d.path)?;
        let entry = Entry {
            path: path.clone(),
            data: None,
            mode: d.mode,
            uid: d.uid,
            gid: d.gid,
        };
        if entries.insert(path, entry).is_some() {
            bail!("{} is given twice", d.path);
        }
    }
    for (f, data) in files {
        let path = relative(&f.path)?;
        let entry = Entry {
            path: path.clone(),
            data: Some(data),
            mode: f.mode,
            uid: f.uid,
            gid: f.gid,
        };
        if entries.insert(path, entry).is_some() {
            bail!("{} is given twice", f.path);
        }
    }
    let missing: BTreeSet<String> = entries
        .keys()
        .flat_map(|p| parents(p))
        .filter(|p| !entries.contains_key(p))
        .collect();
    for parent in missing {
        entries.insert(
            parent.clone(),
            Entry {
                path: parent,
                data: None,
                mode: 0o755,
                uid: 0,
                gid: 0,
            },
        );
    }
    Ok(entries.into_values().collect())
}

/// `/etc/ssl/x` → `etc/ssl/x`; refuses relative paths, `..`, and `/`.
fn relative(path: &str) -> Result<String> {
    let Some(rel) = path.strip_prefix('/') else {
        bail!("{path:?} is not absolute")
    };
    let rel = rel.trim_end_matches('/');
    if rel.is_empty()
        || rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        bail!("{path:?} is not a clean absolute path");
    }
    Ok(rel.to_owned())
}

/// The ancestors of a relative path, outermost first: `a/b/c` → `a`, `a/b`.
fn parents(path: &str) -> Vec<String> {
    path.match_indices('/')
        .map(|(i, _)| path[..i].to_owned())
        .collect()
}

/// An uncompressed tar of `entries`, in their order, with fixed mtimes and
/// no user or group names (only the numeric ids matter in an image).
fn tar_bytes(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for e in entries {
        let mut header = tar::Header::new_ustar();
        header.set_mtime(MTIME);
        header.set_uid(e.uid.into());
        header.set_gid(e.gid.into());
        header.set_mode(e.mode);
        match &e.data {
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                tar.append_data(&mut header, format!("{}/", e.path), std::io::empty())?;
            }
            Some(data) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(data.len() as u64);
                tar.append_data(&mut header, &e.path, data.as_slice())?;
            }
        }
    }
    Ok(tar.into_inner()?)
}

/// An OCI content descriptor of `blob`.
fn descriptor(media_type: &str, blob: &[u8]) -> Value {
    json!({"mediaType": media_type, "digest": Digest::of(blob).as_str(), "size": blob.len()})
}

fn manifest_json(config: &Value, layer: &Value) -> Value {
    json!({
        "schemaVersion": 2,
        "mediaType": media_type::MANIFEST,
        "config": config,
        "layers": [layer],
    })
}

/// The layout's index: one manifest, named by `reference`, for linux/amd64.
fn index_json(manifest: &Value, reference: &str) -> Value {
    let mut manifest = manifest.clone();
    manifest["annotations"] = json!({ REF_NAME: reference });
    manifest["platform"] = json!({"architecture": "amd64", "os": "linux"});
    json!({"schemaVersion": 2, "mediaType": media_type::INDEX, "manifests": [manifest]})
}

fn to_json(value: &Value) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(value)?)
}

/// The layout archive: `oci-layout`, `index.json` and each blob under
/// `blobs/sha256/<hex>` (a blob given twice is written once).
fn layout_archive<'a>(
    index: &[u8],
    blobs: impl IntoIterator<Item = &'a Vec<u8>>,
) -> Result<Vec<u8>> {
    let mut entries = vec![
        Entry {
            path: "blobs".into(),
            data: None,
            mode: 0o755,
            uid: 0,
            gid: 0,
        },
        Entry {
            path: "blobs/sha256".into(),
            data: None,
            mode: 0o755,
            uid: 0,
            gid: 0,
        },
    ];
    let mut seen = BTreeSet::new();
    for blob in blobs {
        let digest = Digest::of(blob);
        if seen.insert(digest.clone()) {
            let path = format!("blobs/sha256/{}", digest.hex());
            entries.push(Entry {
                path,
                data: Some(blob.clone()),
                mode: 0o644,
                uid: 0,
                gid: 0,
            });
        }
    }
    let layout = br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec();
    entries.push(Entry {
        path: "oci-layout".into(),
        data: Some(layout),
        mode: 0o644,
        uid: 0,
        gid: 0,
    });
    entries.push(Entry {
        path: "index.json".into(),
        data: Some(index.to_vec()),
        mode: 0o644,
        uid: 0,
        gid: 0,
    });
    tar_bytes(&entries)
}

/// distroless's `/etc/passwd`: root, nobody and nonroot (65532).
const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
/// distroless's `/etc/group`.
const GROUP: &str = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n";
/// Host names from `/etc/hosts`, then DNS: both built into glibc >= 2.34,
/// so the static binary needs no NSS module.
const NSSWITCH: &str = "hosts: files dns\n";
/// The CA bundle, taken from the host (distroless ships Debian's).
const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What `distroless/static-debian12:nonroot` gives every image here: the
/// users and groups, the CA bundle, `/tmp`, nonroot's home, PATH and
/// SSL_CERT_FILE, user 65532 in its home.
pub(crate) fn distroless_nonroot(
    reference: &str,
    mut files: Vec<ImageFile>,
    entrypoint: &[&str],
) -> ImageSpec {
    files.extend([
        ImageFile::bytes("/etc/passwd", PASSWD, 0o644),
        ImageFile::bytes("/etc/group", GROUP, 0o644),
        ImageFile::bytes("/etc/nsswitch.conf", NSSWITCH, 0o644),
        ImageFile::host(HOST_CA_BUNDLE, HOST_CA_BUNDLE, 0o644),
    ]);
    ImageSpec {
        reference: reference.into(),
        files,
        dirs: vec![
            ImageDir::new("/tmp", 0o1777, 0, 0),
            ImageDir::new("/home/nonroot", 0o700, NONROOT, NONROOT),
        ],
        user: format!("{NONROOT}:{NONROOT}"),
        entrypoint: entrypoint.iter().map(|s| (*s).to_owned()).collect(),
        cmd: Vec::new(),
        env: vec![PATH_ENV.into(), format!("SSL_CERT_FILE={HOST_CA_BUNDLE}")],
        working_dir: "/home/nonroot".into(),
    }
}

/// The project's image, as the Dockerfile builds it: the static `handoff`
/// at `/handoff` on distroless/static nonroot, entrypoint `/handoff`.
pub fn handoff_image(static_binary: &Path) -> ImageSpec {
    distroless_nonroot(
        HANDOFF_IMAGE,
        vec![ImageFile::host("/handoff", static_binary, 0o755)],
        &["/handoff"],
    )
}

/// The scripted agent (`/agent`, the entrypoint) with the static `handoff`
/// beside it, so the agent's `--stdio` mode can spawn `/handoff mcp --stdio`.
pub fn agent_image(agent_binary: &Path, static_handoff: &Path) -> ImageSpec {
    let files = vec![
        ImageFile::host("/agent", agent_binary, 0o755),
        ImageFile::host("/handoff", static_handoff, 0o755),
    ];
    distroless_nonroot(AGENT_IMAGE, files, &["/agent"])
}

/// The sandbox image: only `/pause`, run as 65535 like Kubernetes' own.
pub fn pause_image(pause_binary: &Path) -> ImageSpec {
    ImageSpec {
        reference: PAUSE_IMAGE.into(),
        files: vec![ImageFile::host("/pause", pause_binary, 0o755)],
        user: "65535:65535".into(),
        entrypoint: vec!["/pause".into()],
        ..ImageSpec::default()
    }
}

/// The static `handoff` of the image: `HANDOFF_E2E_BINARY` when set, else
/// what `make e2e-image-binary` builds (under `CARGO_TARGET_DIR`, else
/// `<workspace>/target`). Fails with what to run when it is missing or
/// linked dynamically (the image has no loader).
pub fn static_handoff_binary(workspace: &Path) -> Result<PathBuf> {
    let path = match std::env::var_os("HANDOFF_E2E_BINARY") {
        Some(path) => PathBuf::from(path),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| workspace.join("target"), PathBuf::from)
            .join("x86_64-unknown-linux-gnu/release/handoff"),
    };
    let elf = std::fs::read(&path).with_context(|| {
        format!(
            "the image's static handoff binary {} is missing: run `make e2e-image-binary`",
            path.display()
        )
    })?;
    if let Some(interpreter) = elf_interpreter(&elf)? {
        bail!(
            "{} is linked dynamically (interpreter {interpreter}): run `make e2e-image-binary`",
            path.display()
        );
    }
    Ok(path)
}

/// The ELF interpreter (dynamic loader) an x86-64 executable names, `None`
/// when it names none, that is when it is statically linked: an image here
/// has no loader and no shared libraries, so its binaries must be static.
pub fn elf_interpreter(elf: &[u8]) -> Result<Option<String>> {
    const PT_INTERP: u32 = 3;
    let field = |at: usize, len: usize| {
        elf.get(at..at + len)
            .with_context(|| format!("truncated ELF (offset {at})"))
    };
    if field(0, 5)? != b"\x7fELF\x02" || field(5, 1)? != [1] {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |at: usize| field(at, 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u64_at = |at: usize| {
        field(at, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32::from_le_bytes(field(ph, 4)?.try_into().unwrap_or_default()) == PT_INTERP {
            let (offset, size) = (u64_at(ph + 8)?, u64_at(ph + 32)?);
            let name = field(offset, size)?;
            let name = name.split(|b| *b == 0).next().unwrap_or_default();
            return Ok(Some(String::from_utf8_lossy(name).into_owned()));
        }
    }
    Ok(None)
}

/// The final stage of a Dockerfile, as far as an image's agreement with it
/// goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalStage {
    /// The `FROM` image.
    pub base: String,
    /// The last `USER`.
    pub user: Option<String>,
    /// The last `ENTRYPOINT`, exec form.
    pub entrypoint: Option<Vec<String>>,
    /// Each `COPY`'s destination.
    pub copied: Vec<String>,
}

/// Reads the final stage of `dockerfile`: comments dropped, continued lines
/// joined, instructions case-insensitive. A shell-form ENTRYPOINT is refused
/// (an image here has no shell).
pub fn final_stage(dockerfile: &str) -> Result<FinalStage> {
    let mut stage: Option<FinalStage> = None;
    for line in logical_lines(dockerfile) {
        let (instruction, rest) = line
            .split_once(char::is_whitespace)
            .unwrap_or((line.as_str(), ""));
        let rest = rest.trim();
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                let base = rest
                    .split_whitespace()
                    .find(|w| !w.starts_with("--"))
                    .unwrap_or_default();
                stage = Some(FinalStage {
                    base: base.into(),
                    ..FinalStage::default()
                });
            }
            other => {
                let Some(stage) = stage.as_mut() else {
                    continue;
                };
                match other {
                    "USER" => stage.user = Some(rest.into()),
                    "ENTRYPOINT" => {
                        let exec: Vec<String> = serde_json::from_str(rest)
                            .with_context(|| format!("ENTRYPOINT {rest} is not in exec form"))?;
                        stage.entrypoint = Some(exec);
                    }
                    "COPY" | "ADD" => {
                        let dest = rest.split_whitespace().rfind(|w| !w.starts_with("--"));
                        stage.copied.extend(dest.map(str::to_owned));
                    }
                    _ => {}
                }
            }
        }
    }
    stage.context("the Dockerfile has no FROM")
}

/// The Dockerfile's instructions, one per item: comments and blank lines
/// dropped, lines ending in `\` joined with the next.
fn logical_lines(dockerfile: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in dockerfile.lines() {
        let trimmed = raw.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.trim().is_empty() {
        lines.push(current);
    }
    lines
}

/// The base image the local images reproduce.
pub const DISTROLESS_NONROOT: &str = "gcr.io/distroless/static-debian12:nonroot";

/// How `spec` differs from what the Dockerfile's final stage `stage`
/// produces: base, user, entrypoint and copied files (empty when they
/// agree).
pub fn disagreements(stage: &FinalStage, spec: &ImageSpec) -> Vec<String> {
    let mut out = Vec::new();
    if stage.base != DISTROLESS_NONROOT {
        out.push(format!(
            "the Dockerfile's base is {}, the local image reproduces {DISTROLESS_NONROOT}",
            stage.base
        ));
    }
    if stage.user.as_deref() != Some(spec.user.as_str()) {
        out.push(format!(
            "USER is {:?}, the local image's user {:?}",
            stage.user, spec.user
        ));
    }
    if stage.entrypoint.as_ref() != Some(&spec.entrypoint) {
        out.push(format!(
            "ENTRYPOINT is {:?}, the local image's {:?}",
            stage.entrypoint, spec.entrypoint
        ));
    }
    for copied in &stage.copied {
        if !spec.files.iter().any(|f| &f.path == copied) {
            out.push(format!(
                "the Dockerfile copies {copied}, the local image has no such file"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKERFILE: &str = include_str!("../../Dockerfile");

    fn handoff_spec() -> ImageSpec {
        let mut spec = handoff_image(Path::new("/unused"));
        spec.files.retain(|f| matches!(f.source, Source::Bytes(_)));
        spec.files
            .push(ImageFile::bytes("/handoff", "#!binary", 0o755));
        spec
    }

    /// The archive's members by path.
    fn members(archive: &[u8]) -> BTreeMap<String, (tar::Header, Vec<u8>)> {
        let mut out = BTreeMap::new();
        let mut tar = tar::Archive::new(archive);
        for entry in tar.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let path = entry.path().expect("path").to_string_lossy().into_owned();
            let header = entry.header().clone();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).expect("read");
            out.insert(path, (header, data));
        }
        out
    }

    fn blob<'a>(
        members: &'a BTreeMap<String, (tar::Header, Vec<u8>)>,
        descriptor: &Value,
    ) -> &'a [u8] {
        let digest = descriptor["digest"].as_str().expect("digest");
        let hex = digest.strip_prefix("sha256:").expect("sha256");
        let (_, data) = &members[&format!("blobs/sha256/{hex}")];
        assert_eq!(
            Digest::of(data).as_str(),
            digest,
            "a blob's name is its digest"
        );
        assert_eq!(
            descriptor["size"].as_u64(),
            Some(data.len() as u64),
            "a descriptor's size"
        );
        data
    }

    #[test]
    fn the_dockerfile_and_the_local_image_agree() {
        let stage = final_stage(DOCKERFILE).expect("final stage");
        assert_eq!(stage.copied, ["/handoff"]);
        assert_eq!(
            disagreements(&stage, &handoff_image(Path::new("/b"))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_changed_dockerfile_disagrees() {
        let cases: &[(&str, &str, &str)] = &[
            ("USER 65532:65532", "USER 1000:1000", "USER is"),
            (
                r#"ENTRYPOINT ["/handoff"]"#,
                r#"ENTRYPOINT ["/handoff", "controller"]"#,
                "ENTRYPOINT is",
            ),
            (
                "COPY --from=build /handoff /handoff",
                "COPY --from=build /handoff /bin/handoff",
                "copies /bin/handoff",
            ),
            (
                "static-debian12:nonroot",
                "base-debian12:nonroot",
                "base is",
            ),
        ];
        let spec = handoff_image(Path::new("/b"));
        for (from, to, want) in cases {
            assert!(DOCKERFILE.contains(from), "the Dockerfile has {from}");
            let changed = DOCKERFILE.replace(from, to);
            let found = disagreements(&final_stage(&changed).expect("final stage"), &spec);
            assert!(found.iter().any(|d| d.contains(want)), "{to}: {found:?}");
        }
    }

    #[test]
    fn final_stage_reads_only_the_last_stage() {
        let cases: &[(&str, FinalStage)] = &[
            (
                "FROM a AS b\nUSER 1\nCOPY x /x\nFROM --platform=linux c\n# USER 9\nuser 2\nCOPY --chown=1 \\\n  y /y\nENTRYPOINT [\"/y\"]\n",
                FinalStage {
                    base: "c".into(),
                    user: Some("2".into()),
                    entrypoint: Some(vec!["/y".into()]),
                    copied: vec!["/y".into()],
                },
            ),
            (
                "FROM a\n",
                FinalStage {
                    base: "a".into(),
                    ..FinalStage::default()
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(&final_stage(text).expect("stage"), want, "{text}");
        }
        assert!(final_stage("USER 1\n").is_err(), "no FROM");
        assert!(
            final_stage("FROM a\nENTRYPOINT /handoff\n").is_err(),
            "shell form"
        );
    }

    #[test]
    fn the_same_spec_gives_the_same_digest_and_a_change_another() {
        let spec = handoff_spec();
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a.tar"), dir.path().join("b.tar"));
        let first = spec.write_archive(&a).expect("write");
        let second = spec.write_archive(&b).expect("write");
        assert_eq!(first, second);
        assert_eq!(
            std::fs::read(&a).expect("a"),
            std::fs::read(&b).expect("b"),
            "byte for byte"
        );
        let mut changed = spec.clone();
        changed.user = "0:0".into();
        assert_ne!(changed.write_archive(&a).expect("write"), first);
    }

    #[test]
    fn the_archive_is_an_oci_layout_containerd_imports() {
        let spec = handoff_spec();
        let entries = spec.entries().expect("entries");
        let (archive, digest) = spec.archive(&entries).expect("archive");
        let members = members(&archive);
        assert_eq!(
            members["oci-layout"].1,
            br#"{"imageLayoutVersion":"1.0.0"}"#
        );
        let index: Value = serde_json::from_slice(&members["index.json"].1).expect("index");
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["mediaType"], media_type::INDEX);
        let descriptor = &index["manifests"][0];
        assert_eq!(descriptor["mediaType"], media_type::MANIFEST);
        assert_eq!(descriptor["annotations"][REF_NAME], HANDOFF_IMAGE);
        assert_eq!(descriptor["digest"], digest.as_str());
        let manifest: Value = serde_json::from_slice(blob(&members, descriptor)).expect("manifest");
        assert_eq!(manifest["mediaType"], media_type::MANIFEST);
        assert_eq!(manifest["config"]["mediaType"], media_type::CONFIG);
        assert_eq!(manifest["layers"][0]["mediaType"], media_type::LAYER);
        let config: Value =
            serde_json::from_slice(blob(&members, &manifest["config"])).expect("config");
        let layer = blob(&members, &manifest["layers"][0]);
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            Digest::of(layer).as_str(),
            "uncompressed: diff id = digest"
        );
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(config["config"]["Entrypoint"], json!(["/handoff"]));
        assert_eq!(config["config"]["WorkingDir"], "/home/nonroot");
        assert_eq!(config["os"], "linux");
    }

    #[test]
    fn the_layer_has_distroless_owners_and_modes() {
        let spec = handoff_spec();
        let layer = tar_bytes(&spec.entries().expect("entries")).expect("layer");
        let members = members(&layer);
        let cases: &[(&str, u32, u64, tar::EntryType)] = &[
            ("handoff", 0o755, 0, tar::EntryType::Regular),
            ("etc/", 0o755, 0, tar::EntryType::Directory),
            ("etc/passwd", 0o644, 0, tar::EntryType::Regular),
            ("tmp/", 0o1777, 0, tar::EntryType::Directory),
            ("home/", 0o755, 0, tar::EntryType::Directory),
            ("home/nonroot/", 0o700, 65532, tar::EntryType::Directory),
        ];
        for (path, mode, uid, kind) in cases {
            let (header, _) = members
                .get(*path)
                .unwrap_or_else(|| panic!("{path} in {:?}", members.keys()));
            assert_eq!(header.mode().expect("mode"), *mode, "{path}");
            assert_eq!(header.uid().expect("uid"), *uid, "{path}");
            assert_eq!(header.entry_type(), *kind, "{path}");
            assert_eq!(header.mtime().expect("mtime"), MTIME, "{path}");
        }
        assert!(
            String::from_utf8_lossy(&members["etc/passwd"].1).contains("nonroot:x:65532:65532:")
        );
    }

    #[test]
    fn layer_entries_refuse_bad_paths_and_duplicates() {
        let cases: &[(&[ImageDir], &[&str], &str)] = &[
            (&[], &["relative"], "not absolute"),
            (&[], &["/a/../b"], "not a clean"),
            (&[], &["/"], "not a clean"),
            (&[], &["/a", "/a"], "given twice"),
            (
                &[ImageDir {
                    path: String::new(),
                    mode: 0,
                    uid: 0,
                    gid: 0,
                }],
                &[],
                "not absolute",
            ),
        ];
        for (dirs, paths, want) in cases {
            let files: Vec<ImageFile> = paths
                .iter()
                .map(|p| ImageFile::bytes(p, "x", 0o644))
                .collect();
            let err = layer_entries(dirs, files.iter().map(|f| (f, Vec::new())).collect())
                .expect_err("refused")
                .to_string();
            assert!(err.contains(want), "{paths:?}: {err}");
        }
    }

    #[test]
    fn parents_are_outermost_first() {
        let cases: &[(&str, &[&str])] = &[("a", &[]), ("a/b", &["a"]), ("a/b/c", &["a", "a/b"])];
        for (path, want) in cases {
            assert_eq!(parents(path), *want, "{path}");
        }
    }

    #[test]
    fn a_missing_host_file_names_the_image_and_the_path() {
        let spec = handoff_image(Path::new("/nonexistent/handoff"));
        let err = spec
            .write_archive(Path::new("/nonexistent/out.tar"))
            .expect_err("missing");
        let text = format!("{err:#}");
        assert!(
            text.contains("/nonexistent/handoff") && text.contains(HANDOFF_IMAGE),
            "{text}"
        );
    }

    /// A minimal ELF64 header with one program header of `p_type`, whose
    /// segment (at 0x78) holds `/lib/ld.so`.
    fn elf(p_type: u32) -> Vec<u8> {
        let mut e = vec![0u8; 0x78];
        e[..6].copy_from_slice(b"\x7fELF\x02\x01");
        e[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        e[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        e[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        e[0x40..0x44].copy_from_slice(&p_type.to_le_bytes());
        e[0x48..0x50].copy_from_slice(&0x78u64.to_le_bytes());
        e[0x60..0x68].copy_from_slice(&11u64.to_le_bytes());
        e.extend_from_slice(b"/lib/ld.so\0");
        e
    }

    #[test]
    fn elf_interpreter_finds_the_loader_of_a_dynamic_binary_only() {
        assert_eq!(
            elf_interpreter(&elf(3)).expect("elf").as_deref(),
            Some("/lib/ld.so")
        );
        assert_eq!(
            elf_interpreter(&elf(1)).expect("elf"),
            None,
            "PT_LOAD only: static"
        );
        let cases: &[(&[u8], &str)] = &[
            (b"#!/bin/sh\n", "not a 64-bit"),
            (b"\x7fELF\x02\x01", "truncated"),
        ];
        for (bytes, want) in cases {
            let err = elf_interpreter(bytes).expect_err("refused").to_string();
            assert!(err.contains(want), "{err}");
        }
        let mut truncated = elf(3);
        truncated.truncate(0x7a);
        assert!(
            elf_interpreter(&truncated).is_err(),
            "the loader's name cut short"
        );
    }

    #[test]
    fn elf_interpreter_reads_real_binaries() {
        let this = std::fs::read("/proc/self/exe").expect("this test binary");
        assert!(
            elf_interpreter(&this).expect("elf").is_some(),
            "the test binary is dynamic"
        );
    }
}
