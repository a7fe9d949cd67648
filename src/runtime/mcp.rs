//! A session's view of the MCP tools: which of the manager's tools it gets
//! (see `crate::mcp::session_mcp_tools`) and finding one by name when the
//! model calls it.

use std::sync::Arc;

use crate::catalog::base_name;
use crate::mcp::{McpTool, ResourceTool, session_mcp_tools};
use crate::permissions::Rules;
use crate::snapshot::Snapshot;

use super::session::Session;

/// Whether `name` is an MCP tool's name.
pub(super) fn is_mcp_name(name: &str) -> bool {
    name.starts_with("mcp__")
}

impl Session {
    /// The agent ids whose inline servers this session sees: its own, and
    /// for a fork child its parent's (a fork inherits the parent's tools).
    fn mcp_owner_ids(&self) -> Vec<&str> {
        let mut ids = vec![self.spec.agent_id.as_str()];
        if self.spec.started_by_fork
            && let Some(p) = &self.spec.parent_agent_id
        {
            ids.push(p);
        }
        ids
    }

    /// The MCP tools this session gets now: ready shared servers and its
    /// own inline servers, through its definition's allowlist and
    /// denylist and the settings' deny rules.
    pub(super) fn mcp_tools(&self, snap: &Snapshot) -> Vec<Arc<McpTool>> {
        let all = self.engine.mcp.tools(&self.mcp_owner_ids());
        let rules: &Rules = &snap.rules;
        session_mcp_tools(all, self.spec.def.as_deref(), rules, &self.spec.cwd)
    }

    /// `ListMcpResources` and `ReadMcpResource`, while a ready shared server
    /// declares resources, through the definition's allowlist and
    /// denylist and the deny rules that cover a whole tool.
    pub(super) fn resource_tool_names(&self, snap: &Snapshot) -> Vec<String> {
        if self.engine.mcp.resource_servers().is_empty() {
            return Vec::new();
        }
        let rules: &Rules = &snap.rules;
        let def = self.spec.def.as_deref();
        crate::mcp::RESOURCE_TOOLS
            .into_iter()
            .filter(|n| snap.tools.get(n).is_some())
            .filter(|n| {
                def.and_then(|d| d.tools.as_ref())
                    .is_none_or(|allow| allow.iter().any(|e| base_name(e) == *n))
            })
            .filter(|n| def.is_none_or(|d| !d.disallowed_tools.iter().any(|e| base_name(e) == *n)))
            .filter(|n| rules.denies_whole_tool(n).is_none())
            .map(str::to_string)
            .collect()
    }

    /// The resource tool the model called.
    pub(super) fn resource_tool(&self, name: &str) -> Option<Arc<ResourceTool>> {
        ResourceTool::new(name, Arc::clone(&self.engine.mcp)).map(Arc::new)
    }

    /// The MCP tool the model called, if it is (still) connected.
    pub(super) fn mcp_tool(&self, name: &str) -> Option<Arc<McpTool>> {
        if !is_mcp_name(name) {
            return None;
        }
        self.engine.mcp.tool(&self.mcp_owner_ids(), name)
    }
}
