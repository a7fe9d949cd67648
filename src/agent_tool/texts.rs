//! The Agent tool's own words, as typed template contexts: an agent's
//! tools as the listing and `cadre agents show` name them.

use crate::contexts;

/// An agent's tools as the Agent tool's listing and `agents show` name
/// them, as data: the `agent_tools` template words it. `kind` names the
/// variant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolsColumn {
    /// An allowlist (minus the denylist).
    Only { tools: Vec<String> },
    /// An allowlist that leaves nothing.
    NoTools,
    /// No allowlist and no denylist.
    All,
    /// No allowlist; these are denied.
    AllExcept { tools: Vec<String> },
}

impl ToolsColumn {
    /// The column in words, through the `agent_tools` template.
    pub fn words(&self, templates: &crate::templates::Templates) -> String {
        templates.show(&AgentTools {
            column: self.clone(),
        })
    }
}

contexts! {
    /// An agent's tools in the Agent tool's listing (`agent_listing`) and in
    /// `cadre agents show`.
    "agent_tools" => pub struct AgentTools {
        pub column: ToolsColumn = ToolsColumn::AllExcept {
            tools: vec!["Edit".into(), "Write".into()],
        },
    }
}
