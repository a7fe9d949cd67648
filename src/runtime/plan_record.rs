//! A sub-agent's plan as its files record it: the meta file
//! (`<session>/subagents/agent-ID.meta.json`) and its transcript's `spawn`
//! line are written from its [`SpawnPlan`] by serde, and read back by the
//! same types (resume, the fleet worker). Nothing is rebuilt by hand on
//! either side.
//!
//! The meta file also carries Claude Code's sidecar fields (`agentType`,
//! `toolUseId`, `spawnDepth`, `parentAgentId`), which the SDKs read; a
//! sidecar Claude Code wrote (only those) reads back too. The status,
//! times and result a running task adds are written over these fields by
//! [`super::tasks::Task::write_meta`] and ignored here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent_tool::ModelSource;
use crate::config::PermissionMode;

use super::plan::{Recorded, SpawnPlan};
use super::session::Frozen;
use super::worktree::KeptWorktree;

/// The main session's agent id, a sub-agent's parent when a file names none.
const MAIN: &str = "main";

/// Why a meta file does not describe a sub-agent (for the log).
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("{}:{line}:{column}: not a sub-agent meta file: {why}", path.display())]
    NotMeta {
        path: PathBuf,
        line: usize,
        column: usize,
        why: String,
    },
    #[error("{}: no agent_id, parent_agent_id or agent_type", path.display())]
    Incomplete { path: PathBuf },
    #[error("{}: agent_id {id:?} is not an id", path.display())]
    BadId { path: PathBuf, id: String },
}

/// A branch of one of the parent's remotes that holds a worktree child's
/// starting commit (as the parent last fetched or pushed it): a worker
/// whose clone has that remote fetches the commit from there, and the
/// parent publishes no bundle of it. The URL carries no user or password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteBranch {
    pub name: String,
    pub url: String,
    pub branch: String,
}

/// The fixed fields of a sub-agent's meta file, in the order they are
/// written. Every field defaults when absent, so that older files and
/// Claude Code's sidecar read back; [`SubagentMeta::recorded`] says what a
/// file must hold to resume from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SubagentMeta {
    pub agent_id: Option<String>,
    pub parent_agent_id: Option<String>,
    pub agent_type: Option<String>,
    pub description: Option<String>,
    pub name: Option<String>,
    pub tool_use_id: Option<String>,
    pub model: Option<String>,
    pub model_source: Option<ModelSource>,
    pub effort: Option<String>,
    pub tools: Option<Vec<String>>,
    pub permission_mode: Option<PermissionMode>,
    pub fork: bool,
    /// The worktree the child runs in (then the one it kept, or `null`).
    pub worktree: Option<KeptWorktree>,
    pub depth: Option<u32>,
    /// The task backend it was sent to (the worker fleet), if any.
    pub backend: Option<String>,
    /// The commit a worker makes the child's worktree from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree_base: Option<String>,
    /// A remote branch of the parent's that holds `worktree_base`, when
    /// the fleet fetches it from there instead of a bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree_remote: Option<RemoteBranch>,
    /// Claude Code's sidecar fields.
    #[serde(rename = "agentType")]
    pub cc_agent_type: Option<String>,
    #[serde(rename = "toolUseId")]
    pub cc_tool_use_id: Option<String>,
    #[serde(rename = "spawnDepth")]
    pub cc_spawn_depth: Option<u32>,
    /// Only for a sub-agent's own sub-agent.
    #[serde(rename = "parentAgentId", skip_serializing_if = "Option::is_none")]
    pub cc_parent_agent_id: Option<String>,
}

impl SubagentMeta {
    /// The meta file of the child `plan` describes, started by the tool
    /// call `tool_use_id`.
    pub fn of(
        plan: &SpawnPlan,
        tool_use_id: &str,
        worktree: Option<KeptWorktree>,
        backend: Option<String>,
    ) -> Self {
        SubagentMeta {
            agent_id: Some(plan.agent_id.clone()),
            parent_agent_id: Some(plan.parent_agent_id.clone()),
            agent_type: Some(plan.agent.name.clone()),
            description: Some(plan.description.clone()),
            name: plan.name.clone(),
            tool_use_id: Some(tool_use_id.to_string()),
            model: Some(plan.core.model.clone()),
            model_source: Some(plan.model_source),
            effort: plan.core.effort.clone(),
            tools: Some(plan.core.tools.clone()),
            permission_mode: Some(plan.core.mode),
            fork: plan.fork,
            worktree,
            depth: Some(plan.core.depth),
            backend,
            worktree_base: None,
            worktree_remote: None,
            cc_agent_type: Some(plan.agent.name.clone()),
            cc_tool_use_id: Some(tool_use_id.to_string()),
            cc_spawn_depth: Some(plan.core.depth),
            cc_parent_agent_id: Some(plan.parent_agent_id.clone()).filter(|p| p != MAIN),
        }
    }

    /// Reads a meta file's text; a file that is not one is an error with
    /// its path, line and column.
    pub fn parse(path: &Path, text: &str) -> Result<Self, MetaError> {
        serde_json::from_str(text).map_err(|e| MetaError::NotMeta {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            why: e.to_string(),
        })
    }

    /// The meta file as a JSON object (what a task keeps and writes its
    /// status over).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The meta file read from a JSON value (a task plan's copy); an
    /// object of other shapes reads as empty.
    pub fn from_value(v: &serde_json::Value) -> Self {
        Self::deserialize(v).unwrap_or_default()
    }

    /// The child's id: cadre's field, else the one in the file's name
    /// (`agent-ID.meta.json`, as Claude Code names it).
    fn id(&self, path: &Path) -> Option<String> {
        self.agent_id.clone().or_else(|| {
            path.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("agent-")?.strip_suffix(".meta.json"))
                .map(str::to_string)
        })
    }

    /// What the file says the child was, for [`super::plan::plan_resumed`]
    /// (which trusts none of it), with a fork's request parts from its
    /// spawn line. `None` when it does not name the child's id, parent
    /// and type, or the id is not one.
    pub fn recorded(&self, path: &Path, frozen: Option<Frozen>) -> Result<Recorded, MetaError> {
        // Claude Code's sidecar names the parent only for a sub-agent's
        // own sub-agent; a sidecar without it is the main session's child.
        let parent = self
            .parent_agent_id
            .clone()
            .or_else(|| self.cc_parent_agent_id.clone())
            .or_else(|| self.cc_agent_type.as_ref().map(|_| MAIN.to_string()));
        let (Some(id), Some(parent), Some(agent_type)) = (
            self.id(path),
            parent,
            self.agent_type
                .clone()
                .or_else(|| self.cc_agent_type.clone()),
        ) else {
            return Err(MetaError::Incomplete {
                path: path.to_path_buf(),
            });
        };
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(MetaError::BadId {
                path: path.to_path_buf(),
                id,
            });
        }
        Ok(Recorded {
            agent_id: id,
            parent_agent_id: parent,
            agent_type,
            description: self.description.clone().unwrap_or_default(),
            name: self.name.clone(),
            fork: self.fork,
            model: self.model.clone(),
            effort: self.effort.clone(),
            mode: self.permission_mode,
            tools: self.tools.clone(),
            depth: self.depth,
            frozen: frozen.filter(|_| self.fork),
        })
    }

    /// The tool call that started the child (cadre's field, else Claude
    /// Code's).
    pub fn tool_use_id(&self) -> String {
        self.tool_use_id
            .clone()
            .or_else(|| self.cc_tool_use_id.clone())
            .unwrap_or_default()
    }
}

/// A sub-agent transcript's `spawn` line after its head (kind, ids, time):
/// what the child was started as, from its plan. A fork's inherited
/// request parts are here, so that a later process resumes it with the
/// bytes it sent. A teammate's line names its team and its name there
/// instead of its model and background.
#[derive(Debug, Serialize)]
pub struct SpawnLine<'a> {
    pub agent_type: &'a str,
    pub description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_source: Option<ModelSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub tools: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frozen: Option<&'a Frozen>,
}

impl<'a> SpawnLine<'a> {
    /// A sub-agent's.
    pub fn of(plan: &'a SpawnPlan) -> Self {
        SpawnLine {
            agent_type: &plan.agent.name,
            description: &plan.description,
            model: Some(&plan.core.model),
            model_source: Some(plan.model_source),
            team: None,
            name: None,
            tools: &plan.core.tools,
            background: Some(plan.background),
            frozen: plan.frozen.as_ref(),
        }
    }

    /// A teammate's, as `member` of `team`.
    pub fn teammate(plan: &'a SpawnPlan, team: &'a str, member: &'a str) -> Self {
        SpawnLine {
            agent_type: &plan.agent.name,
            description: &plan.description,
            model: None,
            model_source: None,
            team: Some(team),
            name: Some(member),
            tools: &plan.core.tools,
            background: None,
            frozen: None,
        }
    }
}

/// What resume reads from a `spawn` line: a fork's request parts.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RecordedSpawn {
    pub frozen: Option<Frozen>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_sidecar_and_an_older_cadre_file_read_back() {
        let p = Path::new("/s/subagents/agent-a1b2.meta.json");
        let cc =
            SubagentMeta::parse(p, r#"{"agentType":"Explore","toolUseId":"toolu_1"}"#).unwrap();
        let r = cc.recorded(p, None).unwrap();
        assert_eq!(
            (
                r.agent_id.as_str(),
                r.parent_agent_id.as_str(),
                r.agent_type.as_str()
            ),
            ("a1b2", "main", "Explore")
        );
        assert_eq!(cc.tool_use_id(), "toolu_1");
        // A file an earlier cadre wrote, status and result included.
        let old = r#"{"agent_id":"c3","parent_agent_id":"main","agent_type":"general-purpose",
            "description":"d","name":null,"tool_use_id":"t","model":"m","model_source":"inherit",
            "effort":null,"tools":["Read"],"permission_mode":"acceptEdits","fork":false,
            "worktree":null,"depth":1,"backend":null,"status":"completed","background":true,
            "started":"x","ended":"y","usage":{"total_tokens":3}}"#;
        let m = SubagentMeta::parse(p, old).unwrap();
        let r = m.recorded(p, None).unwrap();
        assert_eq!(r.agent_id, "c3");
        assert_eq!(r.mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(r.tools, Some(vec!["Read".to_string()]));
        assert_eq!(r.depth, Some(1));
        let broken = SubagentMeta::parse(p, "{\n \"depth\": \"deep\"}")
            .unwrap_err()
            .to_string();
        assert!(
            broken.starts_with("/s/subagents/agent-a1b2.meta.json:2:"),
            "{broken}"
        );
        let bad_id = SubagentMeta::parse(
            p,
            r#"{"agent_id":"../x","parent_agent_id":"main","agent_type":"a"}"#,
        )
        .unwrap();
        assert!(bad_id.recorded(p, None).is_err());
    }
}
