//! The session-only tools: TodoWrite and Skill.
//!
//! TodoWrite: each session's own todo list, in Claude Code's schema
//! (`todos: [{content, status, activeForm}]`). A call replaces the list
//! whole; the new list is emitted as a `todos` engine event (stream-json,
//! and the progress line of a sub-agent shows the item in progress). The
//! list belongs to the session that wrote it: a sub-agent's list is not its
//! parent's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::EngineEvent;
use super::session::Session;
use super::texts::{InvalidInput, SkillLoaded, TodoWriteResult, UnknownSkill};
use crate::snapshot::Snapshot;

/// The tool's name.
pub const TODO_WRITE: &str = "TodoWrite";
/// The Skill tool's name. It loads a skill's instructions (see
/// `crate::catalog::skills`) into the conversation as its result.
pub const SKILL: &str = "Skill";

/// One item, as Claude Code's TodoWrite takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// Who asked for a skill or command to be expanded (the `invoked_by` of
/// Claude Code's `PreSkillShellCommand` hook); see `super::commands`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvokedBy {
    User,
    Model,
}

/// A skill loaded into a session, for what it grants while active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSkill {
    pub name: String,
    /// `allowed-tools`: rules that allow without asking (deny and ask
    /// rules still win).
    pub allowed_tools: Vec<String>,
    pub model: Option<String>,
}

impl ActiveSkill {
    pub fn of(skill: &crate::catalog::Skill) -> Self {
        ActiveSkill {
            name: skill.name.clone(),
            allowed_tools: skill.allowed_tools.clone().unwrap_or_default(),
            model: skill.model.clone(),
        }
    }
}

#[derive(Deserialize)]
struct TodoInput {
    todos: Vec<Todo>,
}

impl Session {
    /// Replaces this session's list; `Err` is the error text for the model.
    pub(super) fn todo_write(&self, snap: &Snapshot, input: Value) -> Result<String, String> {
        let t = &snap.templates;
        let TodoInput { todos } = serde_json::from_value(input).map_err(|e| {
            t.show(&InvalidInput {
                tool: TODO_WRITE.into(),
                issues: e.to_string(),
                plural: false,
            })
        })?;
        if let Ok(mut list) = self.todos.lock() {
            list.clone_from(&todos);
        }
        let count = |s: TodoStatus| todos.iter().filter(|t| t.status == s).count();
        let text = t.show(&TodoWriteResult {
            total: todos.len(),
            pending: count(TodoStatus::Pending),
            in_progress: count(TodoStatus::InProgress),
            completed: count(TodoStatus::Completed),
        });
        self.engine.emit(EngineEvent::Todos {
            agent_id: self.spec.agent_id.clone(),
            todos,
        });
        Ok(text)
    }

    /// Loads a skill or command (the Skill tool), expanded as a user's
    /// `/name` would be (without `@path` reads); `Err` is the error text
    /// for the model.
    pub(super) async fn skill_call(
        &self,
        snap: &std::sync::Arc<Snapshot>,
        input: &Value,
    ) -> Result<String, String> {
        let t = &snap.templates;
        let name = input.get("skill").and_then(Value::as_str).unwrap_or("");
        let name = name.trim().trim_start_matches('/');
        // A skill with `disable-model-invocation` is the user's to run.
        let Some(skill) = snap.skills.get(name).filter(|s| s.model_invocable) else {
            let known: Vec<&str> = snap
                .skills
                .skills
                .values()
                .filter(|s| s.model_invocable)
                .map(|s| s.name.as_str())
                .collect();
            return Err(t.show(&UnknownSkill {
                name: name.to_string(),
                known: known.join(", "),
            }));
        };
        if let Ok(mut active) = self.active_skills.lock() {
            active.push(ActiveSkill::of(skill));
        }
        let args = input.get("args").and_then(Value::as_str).unwrap_or("");
        // Boxed: a shell line is a call through the pipeline, which could
        // reach this tool again.
        let expanded = Box::pin(self.expand(snap, skill, args, InvokedBy::Model)).await?;
        Ok(t.show(&SkillLoaded {
            name: skill.name.clone(),
            dir: skill.dir.display().to_string(),
            body: expanded.text.trim().to_string(),
            args: if expanded.placed_args {
                String::new()
            } else {
                args.to_string()
            },
        }))
    }

    /// This session's todo list now.
    pub fn todos(&self) -> Vec<Todo> {
        self.todos.lock().map(|l| l.clone()).unwrap_or_default()
    }
}
