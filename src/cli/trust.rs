//! `cadre trust`: record, list and revoke the folders whose project
//! settings cadre obeys in full (see `docs/trust.md`). Trust is written to
//! the user's own configuration, never into the project.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{CliError, GlobalArgs, working_dir};
use crate::config::trust::{self, TrustStore};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The folder to trust (default: the git root of the working directory,
    /// or the working directory itself outside a repository).
    #[arg(value_name = "PATH", conflicts_with_all = ["list", "revoke"])]
    path: Option<PathBuf>,
    /// List the trusted folders.
    #[arg(long, conflicts_with = "revoke")]
    list: bool,
    /// Stop trusting PATH.
    #[arg(long, value_name = "PATH")]
    revoke: Option<PathBuf>,
}

fn store() -> Result<TrustStore, CliError> {
    TrustStore::load(trust::store_path(|k| std::env::var(k).ok())).map_err(CliError::Usage)
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_relative() {
        cwd.join(p)
    } else {
        p.to_path_buf()
    }
}

pub fn trust(g: &GlobalArgs, args: TrustArgs) -> Result<(), CliError> {
    let cwd = working_dir(g)?;
    let mut store = store()?;
    if args.list {
        for f in &store.folders {
            outln!("{}", f.display());
        }
        return Ok(());
    }
    if let Some(p) = args.revoke {
        let p = absolute(&cwd, &p);
        if !store.revoke(&p) {
            return Err(CliError::Failed(format!(
                "{} was not trusted (see `cadre trust --list`)",
                p.display()
            )));
        }
        store.save().map_err(CliError::Failed)?;
        outln!("no longer trusted: {}", p.display());
        return Ok(());
    }
    let dir = match args.path {
        Some(p) => {
            let p = absolute(&cwd, &p);
            if !p.is_dir() {
                return Err(CliError::Usage(format!("{}: not a folder", p.display())));
            }
            p
        }
        None => trust::project_root(&cwd),
    };
    store.grant(&dir);
    store.save().map_err(CliError::Failed)?;
    let shown = std::fs::canonicalize(&dir).unwrap_or(dir);
    outln!("trusted: {}", shown.display());
    Ok(())
}
