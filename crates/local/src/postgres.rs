//! A local PostgreSQL: `initdb` + `postgres` from the distribution's
//! packages, in a temporary directory (or a kept one: `handoff dev`, where
//! an existing cluster is started again instead of initialised), on a free
//! loopback port.
//!
//! `initdb` refuses to run as root, and CI runs as root: then both programs
//! run as the `postgres` system user (which the Debian packages create) and
//! the directory is handed to that user.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::home::Place;
use super::process::{Supervised, port_or_free};
use nix::sys::signal::Signal;
use nix::unistd::{Uid, User, chown};

/// A running PostgreSQL server. Dropping it stops the server and removes its data.
pub struct Postgres {
    server: Supervised,
    port: u16,
    /// `listen_addresses`: 127.0.0.1, and a pod network's gateway for
    /// [`Postgres::start_for_pods`].
    listen: String,
    bindir: PathBuf,
    run_as: Option<User>,
    dir: Place,
}

impl Postgres {
    /// Runs `initdb` and starts `postgres` in a new temporary directory,
    /// waiting until it accepts connections.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_in(&std::env::temp_dir())
    }

    /// [`Postgres::start`] with the temporary directory created under
    /// `parent`. As root the directory goes under the system temp dir
    /// instead: the `postgres` user must be able to reach it, and `parent`
    /// may be private to root.
    pub(crate) fn start_in(parent: &Path) -> anyhow::Result<Self> {
        Initialized::new(parent)?.start(0)
    }

    /// Starts the cluster kept in `dir` (initialised on first use), on
    /// `preferred_port` when it is free. A cluster of another PostgreSQL
    /// major version is refused with what to do. As root, `dir` is handed
    /// to the `postgres` user, so its parents must be searchable by it.
    pub fn start_kept(dir: &Path, preferred_port: u16) -> anyhow::Result<Self> {
        let bindir = bindir()?;
        let run_as = server_user()?;
        let data = dir.join("data");
        let initialized = if data.join("PG_VERSION").exists() {
            let found = data_major(dir)?;
            let installed = installed_major(&bindir)?;
            anyhow::ensure!(
                found == installed,
                "the PostgreSQL data in {} is version {found}, the installed server is {installed}:                  start over with `handoff dev --fresh` (its mirror is rebuilt from the handoffs),                  or point HANDOFF_PG_BINDIR at a PostgreSQL {found} installation",
                dir.display()
            );
            Initialized {
                bindir,
                run_as,
                dir: Place::Kept(dir.to_owned()),
                listen: LOOPBACK.to_owned(),
            }
        } else {
            std::fs::create_dir_all(dir)?;
            Initialized::init(bindir, run_as, Place::Kept(dir.to_owned()))?
        };
        initialized.start(preferred_port)
    }

    /// [`Postgres::start`] with TLS: `ssl=on` with a serving certificate for
    /// `host_names` (and nothing else) from a new throwaway CA, and only
    /// TLS connections accepted over TCP (`hostssl` in `pg_hba.conf`, so a
    /// connection that succeeds is encrypted). Returns the server and the
    /// path of the CA certificate (PEM) that clients trust.
    pub fn start_tls(host_names: &[&str]) -> anyhow::Result<(Self, PathBuf)> {
        let init = Initialized::new(&std::env::temp_dir())?;
        let ca = init.enable_tls(host_names)?;
        Ok((init.start(0)?, ca))
    }

    /// [`Postgres::start`], also listening on `address` (a pod network's
    /// gateway on this host) and trusting clients from `clients` (that
    /// network's CIDR), for Pods of a local node (`handoff_testkit::cluster`).
    pub fn start_for_pods(address: std::net::Ipv4Addr, clients: &str) -> anyhow::Result<Self> {
        use std::io::Write;
        let mut init = Initialized::new(&std::env::temp_dir())?;
        let hba = init.dir.path().join("data").join("pg_hba.conf");
        writeln!(
            std::fs::OpenOptions::new().append(true).open(hba)?,
            "host all all {clients} trust"
        )?;
        init.listen = format!("127.0.0.1,{address}");
        init.start(0)
    }

    /// Waits until the postmaster reports `ready` in `postmaster.pid` (its
    /// 8th line, PostgreSQL ≥ 10): no client program needed.
    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let pid_file = self.dir.path().join("data").join("postmaster.pid");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.server.ensure_running()?;
            let ready = std::fs::read_to_string(&pid_file)
                .is_ok_and(|s| s.lines().nth(7).is_some_and(|l| l.trim() == "ready"));
            if ready {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "postgres did not accept connections within 60s:\n{}",
                self.server.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port it listens on (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the data, socket and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Stops the server, keeping its data (fault injection).
    pub fn stop_server(&mut self) {
        self.server.stop(Duration::from_secs(10));
    }

    /// Starts the server again on the same port and data.
    pub fn restart_server(&mut self) -> anyhow::Result<()> {
        self.server.stop(Duration::from_secs(10));
        self.server = spawn_server(
            &self.bindir,
            self.run_as.as_ref(),
            self.dir.path(),
            self.port,
            &self.listen,
        )?;
        self.wait_ready()
    }
}

/// A data directory `initdb` made, before the server first starts.
struct Initialized {
    bindir: PathBuf,
    run_as: Option<User>,
    dir: Place,
    listen: String,
}

impl Initialized {
    /// Runs `initdb` in a new temporary directory under `parent` (see
    /// [`Postgres::start_in`]).
    fn new(parent: &Path) -> anyhow::Result<Self> {
        let bindir = bindir()?;
        let run_as = server_user()?;
        let parent = if run_as.is_some() {
            std::env::temp_dir()
        } else {
            parent.to_owned()
        };
        let dir = tempfile::Builder::new()
            .prefix("handoff-pg-")
            .tempdir_in(parent)?;
        Self::init(bindir, run_as, Place::Temporary(dir))
    }

    /// Runs `initdb` in `dir` (handed to the server user first).
    fn init(bindir: PathBuf, run_as: Option<User>, dir: Place) -> anyhow::Result<Self> {
        if let Some(user) = &run_as {
            chown(dir.path(), Some(user.uid), Some(user.gid))?;
        }
        let data = dir.path().join("data");
        let log = dir.path().join("initdb.log");
        let mut initdb = command(&bindir, "initdb", run_as.as_ref());
        initdb.args(["-D"]).arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]);
        let mut init = Supervised::spawn("initdb", initdb, &log)?;
        let started = Instant::now();
        let status = loop {
            if let Some(status) = init.exited() {
                break status;
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(120),
                "initdb did not finish within 120s"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        anyhow::ensure!(
            status.success(),
            "initdb failed ({status}):\n{}",
            init.log_tail(20)
        );
        Ok(Self {
            bindir,
            run_as,
            dir,
            listen: LOOPBACK.to_owned(),
        })
    }

    /// Writes a CA and a serving certificate for `host_names`, turns `ssl`
    /// on and lets TCP clients in over TLS only; returns the CA's path.
    /// The key is the server user's, mode 0600, as PostgreSQL demands.
    fn enable_tls(&self, host_names: &[&str]) -> anyhow::Result<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let tls = super::ServerTls::generate("handoff-postgres-test-ca", host_names)?;
        let dir = self.dir.path();
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, &tls.ca_cert)?;
        for (file, pem, mode) in [
            ("server.crt", &tls.cert, 0o644),
            ("server.key", &tls.key, 0o600),
        ] {
            let path = dir.join(file);
            std::fs::write(&path, pem)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            if let Some(user) = &self.run_as {
                chown(&path, Some(user.uid), Some(user.gid))?;
            }
        }
        let data = dir.join("data");
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))?;
        writeln!(
            conf,
            "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'",
            dir.join("server.crt").display(),
            dir.join("server.key").display()
        )?;
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostssl all all ::1/128 trust\n",
        )?;
        Ok(ca)
    }

    /// Starts the server and waits until it accepts connections.
    fn start(self, preferred_port: u16) -> anyhow::Result<Postgres> {
        let port = port_or_free(preferred_port)?;
        let server = spawn_server(
            &self.bindir,
            self.run_as.as_ref(),
            self.dir.path(),
            port,
            &self.listen,
        )?;
        let mut pg = Postgres {
            server,
            port,
            listen: self.listen,
            bindir: self.bindir,
            run_as: self.run_as,
            dir: self.dir,
        };
        pg.wait_ready()?;
        Ok(pg)
    }
}

/// Where every server listens.
const LOOPBACK: &str = "127.0.0.1";

/// The user the server runs as: `None` (ourselves) unless we are root.
fn server_user() -> anyhow::Result<Option<User>> {
    if !Uid::effective().is_root() {
        return Ok(None);
    }
    let user = User::from_name("postgres")?.ok_or_else(|| {
        anyhow::anyhow!(
            "running as root, and initdb refuses root: create a `postgres` user \
             (the postgresql package does) or run as a normal user"
        )
    })?;
    Ok(Some(user))
}

fn spawn_server(
    bindir: &Path,
    run_as: Option<&User>,
    dir: &Path,
    port: u16,
    listen: &str,
) -> anyhow::Result<Supervised> {
    let mut cmd = command(bindir, "postgres", run_as);
    cmd.arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir)
        .args([
            "-c",
            &format!("listen_addresses={listen}"),
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
        ])
        .args(["-c", "full_page_writes=off", "-c", "max_connections=200"]);
    Ok(
        Supervised::spawn("postgres", cmd, &dir.join("postgres.log"))?
            .with_stop_signal(Signal::SIGINT),
    )
}

fn command(bindir: &Path, program: &str, run_as: Option<&User>) -> Command {
    let mut cmd = Command::new(bindir.join(program));
    if let Some(user) = run_as {
        use std::os::unix::process::CommandExt;
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        cmd.env("HOME", &user.dir);
    }
    cmd
}

/// The major version of the cluster in `dir` (`data/PG_VERSION`).
fn data_major(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("data").join("PG_VERSION");
    Ok(std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?
        .trim()
        .to_owned())
}

/// The major version of the installed server (`postgres --version` prints
/// `postgres (PostgreSQL) 17.6 (Debian …)`).
fn installed_major(bindir: &Path) -> anyhow::Result<String> {
    let out = Command::new(bindir.join("postgres"))
        .arg("--version")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    major_of_version_line(&text)
        .ok_or_else(|| anyhow::anyhow!("cannot read the PostgreSQL version from {text:?}"))
}

/// Pure: the major version in a `postgres --version` line.
fn major_of_version_line(line: &str) -> Option<String> {
    let version = line.split_whitespace().nth(2)?;
    let major = version.split(['.', 'b', 'r']).next()?;
    (!major.is_empty() && major.chars().all(|c| c.is_ascii_digit())).then(|| major.to_owned())
}

/// Where `initdb` and `postgres` are: `HANDOFF_PG_BINDIR`, then `PATH`, then
/// the newest `/usr/lib/postgresql/<major>/bin` (Debian does not put them on PATH).
pub(crate) fn bindir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("HANDOFF_PG_BINDIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let has_both = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(path) = std::env::var_os("PATH")
        && let Some(dir) = std::env::split_paths(&path).find(|d| has_both(d))
    {
        return Ok(dir);
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, d)| has_both(d))
        .collect();
    debian.sort();
    debian.pop().map(|(_, d)| d).ok_or_else(|| {
        anyhow::anyhow!(
            "PostgreSQL server binaries (initdb, postgres) not found: install them \
             (`apt-get install postgresql`, which `make test` does when run as root) \
             or set HANDOFF_PG_BINDIR"
        )
    })
}

/// Whether PostgreSQL server binaries are installed.
pub fn available() -> bool {
    bindir().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions_of_version_lines() {
        let cases = [
            ("postgres (PostgreSQL) 17.6 (Debian 17.6-1)", Some("17")),
            ("postgres (PostgreSQL) 18beta1", Some("18")),
            ("postgres (PostgreSQL) 16rc1\n", Some("16")),
            ("postgres", None),
            ("postgres (PostgreSQL) x", None),
        ];
        for (line, want) in cases {
            assert_eq!(major_of_version_line(line).as_deref(), want, "{line:?}");
        }
    }
}
