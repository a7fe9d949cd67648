//! The tools that manage sub-agents: SendMessage, TaskOutput, TaskStop.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::message::{ContentBlock, Message};

use super::session::Session;
use super::spawn::{fail_unqueued, start_task};
use super::tasks::TaskStatus;
use super::texts::{
    InvalidInput, MessageQueued, MessageResumed, NoSuchTool, SubagentCancelled, TaskOutputText,
    TaskStopped, UnknownTask,
};
use super::transcript::Transcript;
use crate::snapshot::Snapshot;

#[derive(Deserialize)]
struct SendInput {
    to: String,
    message: String,
    /// A team message's kind (shutdown_request, …).
    #[serde(rename = "type", default)]
    kind: Option<String>,
    /// A `plan_approval_response`'s verdict.
    #[serde(default)]
    approve: Option<bool>,
}

#[derive(Deserialize)]
struct OutputInput {
    task_id: String,
    #[serde(default)]
    block: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
struct StopInput {
    task_id: String,
}

impl Session {
    /// Runs one of the management tools. `Err` is an error result's text.
    pub(super) async fn manage_call(
        &self,
        snap: &Snapshot,
        name: &str,
        input: Value,
    ) -> Result<String, String> {
        let bad_input = |e: serde_json::Error| {
            snap.templates.show(&InvalidInput {
                tool: name.to_string(),
                issues: e.to_string(),
                plural: false,
            })
        };
        match name {
            "SendMessage" => {
                let i: SendInput = serde_json::from_value(input).map_err(bad_input)?;
                self.send_message(snap, i).await
            }
            "TaskOutput" => {
                let i: OutputInput = serde_json::from_value(input).map_err(bad_input)?;
                self.task_output(snap, i).await
            }
            "TaskStop" => {
                let i: StopInput = serde_json::from_value(input).map_err(bad_input)?;
                self.task_stop(snap, i).await
            }
            "TaskCreate" | "TaskList" | "TaskGet" | "TaskUpdate" | "TeamCreate" | "TeamDelete" => {
                self.team_call(snap, name, input).await
            }
            other => Err(snap.templates.show(&NoSuchTool {
                name: other.to_string(),
            })),
        }
    }

    /// The text for a task id or name this agent has not started: the ones
    /// it has.
    fn unknown_task(&self, snap: &Snapshot, to: &str) -> String {
        let mut known: Vec<String> = self
            .engine
            .tasks
            .all()
            .into_iter()
            .filter(|t| t.parent_agent_id == self.spec.agent_id)
            .map(|t| {
                t.name
                    .clone()
                    .map_or_else(|| t.id.clone(), |n| format!("{n} ({})", t.id))
            })
            .collect();
        known.sort();
        snap.templates.show(&UnknownTask {
            to: to.to_string(),
            known: known.join(", "),
        })
    }

    /// SendMessage: to a team member's mailbox, or to a sub-agent, which
    /// reads it at its next turn or is resumed with it.
    async fn send_message(&self, snap: &Snapshot, i: SendInput) -> Result<String, String> {
        let t = &snap.templates;
        let tasks = &self.engine.tasks;
        // A team member's name, `team-lead` or `*`: its mailbox.
        if self.is_team_address(&i.to) {
            return self.team_send(snap, &i.to, &i.message, i.kind.as_deref(), i.approve);
        }
        let task = tasks
            .get(&i.to)
            .ok_or_else(|| self.unknown_task(snap, &i.to))?;
        // Delivered or refused, never left behind: a running child
        // that still reads its inbox gets the message at its next
        // turn; one that is ending is waited for, then resumed
        // with it, like a child that had already ended.
        let (history, unread) = loop {
            if tasks.send(&task, i.message.clone()) {
                return Ok(t.show(&MessageQueued { to: i.to }));
            }
            if task.status() == TaskStatus::Running {
                tokio::select! {
                    _ = task.wait(Duration::from_secs(3600)) => {}
                    () = self.cancel.cancelled() => {
                        return Err(t.show(&SubagentCancelled {}));
                    }
                }
                continue;
            }
            if let Some(resumable) = tasks.restart(&task) {
                break resumable;
            }
            // Another SendMessage resumed it first: queue for that run.
        };
        // Resume it in the background from where it ended, with any
        // message it never read before this one.
        let mut history = history;
        let mut blocks: Vec<ContentBlock> = unread.into_iter().map(ContentBlock::text).collect();
        blocks.push(ContentBlock::text(i.message));
        // A child killed before its model answered ends with its
        // prompt: the message joins it, so roles keep alternating.
        let added = Message::user(blocks);
        let joined = match history.pop() {
            Some(last) if last.role == crate::message::Role::User => {
                let mut content = last.content.clone();
                content.extend(added.content.iter().cloned());
                history.push(Arc::new(Message::user(content)));
                true
            }
            last => {
                history.extend(last);
                history.push(Arc::new(added.clone()));
                false
            }
        };
        let transcript = Arc::new(match &task.output_file {
            Some(p) => Transcript::open(p.clone(), &task.id, Some(&task.parent_agent_id)),
            None => Transcript::disabled(&task.id, Some(&task.parent_agent_id)),
        });
        if joined {
            transcript.joined_message(&added);
        } else {
            transcript.message(&added);
        }
        // A task that ran on the engine's task backend (the worker
        // fleet) runs there again, where background children run.
        if task.is_remote() {
            match self.engine.backend.clone() {
                Some(backend) => {
                    drop(transcript);
                    if let Err(failed) = backend.resume(&self.engine, &task).await {
                        fail_unqueued(&self.engine, &task, history, backend.name(), failed);
                    }
                    return Ok(t.show(&MessageResumed { to: i.to }));
                }
                // No backend now (settings changed): it runs here.
                None => task.mark_resumed_here(),
            }
        }
        start_task(
            Arc::clone(&self.engine),
            Arc::clone(&task),
            task.spec.clone(),
            history,
            transcript,
            true,
            // A kept worktree stays where it is; the resumed run
            // works in it again (its cwd is in the spec).
            None,
        );
        Ok(t.show(&MessageResumed { to: i.to }))
    }

    /// TaskOutput: a task's status and what it has said so far.
    async fn task_output(&self, snap: &Snapshot, i: OutputInput) -> Result<String, String> {
        let t = &snap.templates;
        let tasks = &self.engine.tasks;
        let task = tasks
            .get(&i.task_id)
            .ok_or_else(|| self.unknown_task(snap, &i.task_id))?;
        if i.block {
            task.wait(Duration::from_millis(i.timeout_ms.unwrap_or(30_000)))
                .await;
        }
        let state = task.state();
        let output = state
            .result
            .as_ref()
            .and_then(|r| r.texts.clone())
            .or_else(|| state.latest_text.clone())
            .map(|t| t.join("\n"));
        let status = state.status;
        drop(state);
        Ok(t.show(&TaskOutputText {
            task_id: task.id.clone(),
            status,
            output,
            output_file: task.output_file.as_ref().map(|p| p.display().to_string()),
        }))
    }

    /// TaskStop: cancels a running task and waits a moment for it to end.
    async fn task_stop(&self, snap: &Snapshot, i: StopInput) -> Result<String, String> {
        let t = &snap.templates;
        let tasks = &self.engine.tasks;
        let task = tasks
            .get(&i.task_id)
            .ok_or_else(|| self.unknown_task(snap, &i.task_id))?;
        let already = task.status() != TaskStatus::Running;
        if !already {
            task.cancel.cancel();
            task.wait(Duration::from_secs(10)).await;
        }
        Ok(t.show(&TaskStopped {
            task_id: task.id.clone(),
            already,
            status: task.status(),
        }))
    }
}
