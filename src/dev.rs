//! `handoff dev`: the embedded default for a laptop with no cluster.
//!
//! Starts the local control plane (and PostgreSQL when its binaries are
//! installed), installs the CRDs, writes `<dir>/kubeconfig` and `<dir>/env`,
//! prints how to use them, and runs in the foreground until Ctrl-C or
//! SIGTERM, then stops everything (the processes also die with this one if
//! it is killed).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::testing::{Assets, ControlPlane, Postgres, Versions, install_crds, postgres};

/// The line `handoff dev` prints once everything is up (scripts wait for it).
pub const READY_LINE: &str = "handoff dev: ready";

/// Runs the local system until Ctrl-C.
pub async fn run(dir: PathBuf) -> anyhow::Result<()> {
    std::fs::create_dir_all(&dir)?;
    let dir = std::path::absolute(&dir)?;
    let versions = Versions::pinned();
    let assets = Assets::locate()?;
    eprintln!(
        "handoff dev: starting etcd {} and kube-apiserver {} …",
        versions.etcd, versions.kubernetes
    );
    let plane = ControlPlane::start_in(assets.clone(), &dir).await?;
    install_crds(&plane.client().await?).await?;

    let pg = if postgres::available() {
        eprintln!("handoff dev: starting PostgreSQL …");
        Some(tokio::task::block_in_place(|| Postgres::start_in(&dir))?)
    } else {
        eprintln!("handoff dev: PostgreSQL binaries not found; running without the mirror");
        None
    };

    let kubeconfig = dir.join("kubeconfig");
    std::fs::copy(plane.kubeconfig_path(), &kubeconfig)?;
    let env_file = dir.join("env");
    std::fs::write(
        &env_file,
        env_script(
            &kubeconfig,
            &assets.dir,
            pg.as_ref().map(Postgres::url).as_deref(),
        ),
    )?;

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{READY_LINE} (Kubernetes {}, etcd {})",
        versions.kubernetes, versions.etcd
    )?;
    writeln!(out, "  kubeconfig: {}", kubeconfig.display())?;
    writeln!(out, "  logs:       {}", plane.dir().display())?;
    if let Some(pg) = &pg {
        writeln!(out, "  postgres:   {}", pg.url())?;
        writeln!(out, "  pg data:    {}", pg.dir().display())?;
    }
    writeln!(
        out,
        "\nIn another shell:\n  source {}\n  kubectl get handoffs",
        env_file.display()
    )?;
    writeln!(out, "\nPress Ctrl-C to stop.")?;
    out.flush()?;
    drop(out);

    crate::telemetry::shutdown_signal().await;
    eprintln!("handoff dev: stopping …");
    drop(pg);
    plane.stop();
    let _ = std::fs::remove_file(&env_file);
    let _ = std::fs::remove_file(&kubeconfig);
    eprintln!("handoff dev: stopped");
    Ok(())
}

/// A shell snippet that points `kubectl` at the local control plane.
fn env_script(kubeconfig: &Path, bin_dir: &Path, database_url: Option<&str>) -> String {
    let mut script = format!(
        "export KUBECONFIG='{}'\nexport PATH='{}':\"$PATH\"\n",
        kubeconfig.display(),
        bin_dir.display()
    );
    if let Some(url) = database_url {
        script.push_str(&format!("export DATABASE_URL='{url}'\n"));
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_script_exports_kubeconfig_path_and_database() {
        let s = env_script(
            Path::new("/a/kubeconfig"),
            Path::new("/bin/dir"),
            Some("postgres://x"),
        );
        assert!(s.contains("export KUBECONFIG='/a/kubeconfig'"));
        assert!(s.contains("export PATH='/bin/dir':\"$PATH\""));
        assert!(s.contains("export DATABASE_URL='postgres://x'"));
        assert!(!env_script(Path::new("/k"), Path::new("/b"), None).contains("DATABASE_URL"));
    }
}
