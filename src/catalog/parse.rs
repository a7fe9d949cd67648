//! Agent files to definitions. (Stub: implemented by the catalog work.)

use std::path::Path;

use super::def::{AgentDef, Source};
use crate::diagnostic::Diagnostic;

/// Parses one agent file. `None` when the file defines no loadable agent.
pub fn parse_agent_file(
    path: &Path,
    text: &str,
    source: Source,
) -> (Option<AgentDef>, Vec<Diagnostic>) {
    let _ = (path, text, source);
    (None, Vec::new())
}

/// Parses `--agents JSON`: an object of name → definition. One bad entry
/// drops only that entry.
pub fn parse_cli_agents(json: &str) -> (Vec<AgentDef>, Vec<Diagnostic>) {
    let _ = json;
    (Vec::new(), Vec::new())
}
