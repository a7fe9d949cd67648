//! Loading a whole catalog. (Stub: implemented by the catalog work.)

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::def::{AgentDef, Source};
use super::sources::SourceDir;
use crate::diagnostic::Diagnostic;

/// What a catalog is built from.
#[derive(Debug, Clone, Default)]
pub struct CatalogInput {
    /// A folder whose agent files replace the embedded built-ins by name.
    pub builtin_dir: Option<PathBuf>,
    /// Source folders, lowest precedence first.
    pub dirs: Vec<SourceDir>,
    /// `--agents JSON`.
    pub cli_json: Option<String>,
    /// Tool names that `tools` entries may name (empty: no check).
    pub known_tools: Vec<String>,
}

/// An agent hidden by a same-named agent from a later source.
#[derive(Debug, Clone, PartialEq)]
pub struct Shadowed {
    pub def: Arc<AgentDef>,
    pub shadowed_by: Source,
}

/// Every loaded agent, the effective one per name, and what went wrong.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// Effective agents by name (includes the synthetic `fork`).
    pub agents: BTreeMap<String, Arc<AgentDef>>,
    pub shadowed: Vec<Shadowed>,
    pub diagnostics: Vec<Diagnostic>,
    /// How many files were read.
    pub files: usize,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Arc<AgentDef>> {
        self.agents.get(name)
    }
}

/// Loads every source. Never fails: problems become diagnostics.
pub fn load(input: &CatalogInput) -> Catalog {
    let _ = input;
    Catalog::default()
}
