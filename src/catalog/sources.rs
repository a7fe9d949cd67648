//! Source folders and their precedence. (Stub: implemented by the catalog work.)

use std::path::{Path, PathBuf};

use super::def::Source;
use crate::config::Settings;

/// One folder of agent files and the source it counts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDir {
    pub source: Source,
    pub path: PathBuf,
}

/// Every agent folder for these settings, lowest precedence first.
pub fn source_dirs(settings: &Settings, cwd: &Path, home: Option<&Path>) -> Vec<SourceDir> {
    let _ = (settings, cwd, home);
    Vec::new()
}
