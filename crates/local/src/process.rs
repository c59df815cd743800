//! Child processes that never outlive us.
//!
//! Every control-plane process is started
//! - in its own process group, so stopping it also stops anything it forked
//!   (PostgreSQL's backends), and
//! - with `PR_SET_PDEATHSIG = SIGKILL`, so the kernel kills it when this
//!   process dies, even by SIGKILL or a panic that aborts.
//!
//! The parent-death signal fires when the *thread* that forked the child
//! exits, not the process. Test harnesses run on short-lived threads, so all
//! spawns go through one dedicated, never-ending spawner thread: the children
//! then die exactly when the process does.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// The spawner thread's inbox.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("handoff-spawner".into())
            .spawn(move || {
                // Lives as long as the process: the receiver never closes
                // because the sender sits in a static.
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| panic!("cannot start the spawner thread: {e}"));
        Mutex::new(tx)
    })
}

/// A supervised child: its own process group, killed with us, logs to a file.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    child: Child,
    log: PathBuf,
    stop_signal: Signal,
}

impl Supervised {
    /// Starts `command` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> anyhow::Result<Self> {
        let out = File::options().create(true).append(true).open(log)?;
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe functions (prctl, getppid, _exit).
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let (tx, rx) = mpsc::channel();
        spawner()
            .lock()
            .map_err(|_| anyhow::anyhow!("spawner lock poisoned"))?
            .send((command, tx))
            .map_err(|_| anyhow::anyhow!("the spawner thread is gone"))?;
        let child = rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the spawner thread is gone"))?
            .map_err(|e| anyhow::anyhow!("cannot start {name}: {e}"))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
            stop_signal: Signal::SIGTERM,
        })
    }

    /// Use `signal` instead of SIGTERM to ask the child to stop (PostgreSQL's
    /// SIGTERM waits for every client to leave; SIGINT is its fast shutdown).
    pub(crate) fn with_stop_signal(mut self, signal: Signal) -> Self {
        self.stop_signal = signal;
        self
    }

    /// The child's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the child has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Fails with the tail of the log when the child has exited.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        match self.exited() {
            None => Ok(()),
            Some(status) => anyhow::bail!(
                "{} exited ({status}) — last lines of {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 25)
            ),
        }
    }

    /// The last lines of the child's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// SIGKILL to the group, at once; reaps the child.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = killpg(
                Pid::from_raw(self.child.id() as libc::pid_t),
                Signal::SIGKILL,
            );
            let _ = self.child.wait();
        }
    }

    /// The stop signal (SIGTERM by default) to the group, then SIGKILL after
    /// `grace`; reaps the child.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        let group = Pid::from_raw(self.child.id() as libc::pid_t);
        let _ = killpg(group, self.stop_signal);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                // Stragglers in the group (forked helpers) go too.
                let _ = killpg(group, Signal::SIGKILL);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// The last `lines` lines of a file (best effort, for diagnostics).
fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::from("(no log)");
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let all: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A free TCP port on 127.0.0.1 (bind to port 0 and release it; the usual
/// envtest approach, racy only against other processes grabbing it between).
pub fn free_port() -> anyhow::Result<u16> {
    port_or_free(0)
}

/// `preferred` when it is free on 127.0.0.1 (a kept `handoff dev` reuses
/// its ports), else a free one; 0 means any.
pub(crate) fn port_or_free(preferred: u16) -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", preferred))
        .or_else(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))?;
    Ok(listener.local_addr()?.port())
}
