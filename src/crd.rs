//! `handoff crd`: the CustomResourceDefinitions printed as one YAML stream,
//! or written one file each (what `make crds` commits under `crds/`). The
//! definitions and their rendering are pure, in `handoff_core::api`; this
//! module does the printing and the file writes.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use handoff_core::api::{crd_file_name, crds, render};

/// Prints every CRD as one multi-document YAML stream.
pub fn print(out: &mut dyn Write) -> anyhow::Result<()> {
    for crd in crds() {
        writeln!(out, "---")?;
        out.write_all(render(&crd)?.as_bytes())?;
    }
    Ok(())
}

/// Writes each CRD to `dir/<group>_<plural>.yaml`.
pub fn write(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--dir {}", dir.display()))?;
    for crd in crds() {
        let path = dir.join(crd_file_name(&crd));
        std::fs::write(&path, render(&crd)?).with_context(|| format!("{}", path.display()))?;
    }
    Ok(())
}
