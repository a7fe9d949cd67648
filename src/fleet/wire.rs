//! What travels through the broker: a task's plan (the work-queue
//! message), its completion notice, and control requests for a running
//! task. All JSON. A plan never carries credentials: a worker uses its own
//! host's provider settings and keys.

use serde::{Deserialize, Serialize};

use crate::message::Usage;
use crate::runtime::RunProblem;
use crate::runtime::plan::SpawnPlan;
use crate::runtime::plan_record::SubagentMeta;
use crate::runtime::tasks::{Task, TaskResult, TaskStatus};
use crate::runtime::worktree::KeptWorktree;

use super::state::FleetStatus;

/// The plan format this build publishes.
pub const PLAN_VERSION: u32 = 1;

/// A background spawn, as published to the work queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPlan {
    pub version: u32,
    pub agent_id: String,
    pub parent_agent_id: String,
    /// The parent's session: the folder its transcripts live in, and the
    /// notices subject its parent listens to.
    pub session_id: String,
    pub pool: String,
    /// The spawn decision (agent by name, model and its source, tool pool,
    /// permission mode, depth, effort, a fork's request parts), without its
    /// starting messages: those are the child's transcript, which the
    /// parent wrote before publishing and a worker continues.
    pub spawn: SpawnPlan,
    /// Which run of the task: 0 for its spawn, n when SendMessage resumed
    /// it for the n-th time after it ended (its message is the last line
    /// of its transcript).
    #[serde(default)]
    pub run: u32,
    /// The child's meta file as the parent wrote it (description, tool use
    /// id, name; `docs/transcripts.md`).
    pub meta: SubagentMeta,
    /// The worker reads and writes the transcript in the parent's session
    /// folder (`distributed.shared_folder`) instead of through the broker.
    #[serde(default)]
    pub shared_folder: bool,
}

/// A registered background child and the plan it was made from, as
/// published.
pub fn plan_of(task: &Task, plan: &SpawnPlan, session_id: &str, pool: &str) -> TaskPlan {
    TaskPlan {
        version: PLAN_VERSION,
        agent_id: task.id.clone(),
        parent_agent_id: task.parent_agent_id.clone(),
        session_id: session_id.to_string(),
        pool: pool.to_string(),
        spawn: SpawnPlan {
            messages: Vec::new(),
            ..plan.clone()
        },
        meta: SubagentMeta::from_value(task.meta()),
        run: 0,
        shared_folder: false,
    }
}

/// A task's end, published once to the notices stream and kept with its
/// end state in the bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    pub agent_id: String,
    pub session_id: String,
    pub status: FleetStatus,
    /// The final (or, when it did not complete, latest) text blocks.
    #[serde(default)]
    pub texts: Option<Vec<String>>,
    /// Why it did not complete, for people (meta files, logs) …
    #[serde(default)]
    pub error: Option<String>,
    /// … and for the model (worded by `run_problem` in the notification).
    #[serde(default)]
    pub problem: Option<RunProblem>,
    #[serde(default)]
    pub usage: Usage,
    pub total_tokens: u64,
    pub tool_uses: u32,
    pub duration_ms: u64,
    /// The worker that finished it, and on which attempt.
    pub worker: String,
    pub attempt: u32,
    /// The child's worktree (`isolation: worktree`) when it was kept
    /// (it holds changes); `None` when removed or never made.
    #[serde(default)]
    pub worktree: Option<KeptWorktree>,
    /// The run it ends (see [`TaskPlan::run`]).
    #[serde(default)]
    pub run: u32,
    /// The object-store bundle holding the kept worktree's branch (a
    /// shared-nothing fleet): the parent fetches it into its repository.
    #[serde(default)]
    pub branch_object: Option<String>,
}

impl Notice {
    pub fn of(
        agent_id: &str,
        session_id: &str,
        r: &TaskResult,
        worker: &str,
        attempt: u32,
    ) -> Notice {
        Notice {
            agent_id: agent_id.to_string(),
            session_id: session_id.to_string(),
            status: match r.status {
                TaskStatus::Completed => FleetStatus::Completed,
                TaskStatus::Killed => FleetStatus::Killed,
                TaskStatus::Failed | TaskStatus::Running => FleetStatus::Failed,
            },
            texts: r.texts.clone(),
            error: r.error.clone(),
            problem: r.problem.clone(),
            usage: r.usage,
            total_tokens: r.total_tokens,
            tool_uses: r.tool_uses,
            duration_ms: r.duration_ms,
            worker: worker.to_string(),
            attempt,
            worktree: r.worktree.clone(),
            run: 0,
            branch_object: None,
        }
    }

    /// Keeps at most `limit` bytes of text (whole blocks first, then a
    /// cut at a character boundary), so the notice fits in one message.
    pub fn bound_texts(&mut self, limit: usize) {
        fn cut(t: &mut String, at: usize) {
            let mut at = at.min(t.len());
            while !t.is_char_boundary(at) {
                at -= 1;
            }
            t.truncate(at);
        }
        if let Some(texts) = &mut self.texts {
            let mut left = limit;
            for t in texts.iter_mut() {
                cut(t, left);
                left -= t.len();
            }
        }
        if let Some(e) = &mut self.error {
            cut(e, limit);
        }
    }

    /// The result the parent records and renders its notification from.
    pub fn result(&self) -> TaskResult {
        TaskResult {
            status: match self.status {
                FleetStatus::Completed => TaskStatus::Completed,
                FleetStatus::Killed => TaskStatus::Killed,
                _ => TaskStatus::Failed,
            },
            texts: self.texts.clone(),
            error: self.error.clone(),
            problem: self.problem.clone(),
            usage: self.usage,
            total_tokens: self.total_tokens,
            tool_uses: self.tool_uses,
            duration_ms: self.duration_ms,
            worktree: self.worktree.clone(),
        }
    }
}

/// A request to a running task's worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Control {
    /// SendMessage: queue a message for the child's next turn.
    Message { text: String },
    /// TaskStop: end the child (`killed`, with its notice).
    Stop,
}

/// The worker's answer to a [`Control`] request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlReply {
    /// Queued, or the stop is under way.
    Accepted,
    /// The child no longer reads messages (it is ending).
    Ending,
}

/// A progress line of a remote task (plain subject, at most once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub agent_id: String,
    pub tool_uses: u32,
    pub duration_ms: u64,
    pub last_tool: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_long_answer_is_cut_to_fit_one_message() {
        let mut n = Notice {
            agent_id: "a1".into(),
            session_id: "s".into(),
            status: FleetStatus::Completed,
            texts: Some(vec!["ab".repeat(10), "é".repeat(10), "tail".into()]),
            error: Some("x".repeat(40)),
            problem: None,
            usage: Usage::default(),
            total_tokens: 0,
            tool_uses: 0,
            duration_ms: 0,
            worker: "w".into(),
            attempt: 1,
            worktree: None,
            run: 0,
            branch_object: None,
        };
        n.bound_texts(25);
        let texts = n.texts.clone().unwrap();
        assert_eq!(texts[0], "ab".repeat(10));
        // 5 bytes left: two é (2 bytes each), not half of a third; the
        // last byte goes to the next block.
        assert_eq!(texts[1], "éé");
        assert_eq!(texts[2], "t");
        assert_eq!(texts.iter().map(String::len).sum::<usize>(), 25);
        assert_eq!(n.error.as_deref().map(str::len), Some(25));
        let back: Notice = serde_json::from_slice(&serde_json::to_vec(&n).unwrap()).unwrap();
        assert_eq!(back, n);
    }

    /// Why a remote task did not complete reaches the parent as the same
    /// typed problem, so its notification is worded as a local one's.
    #[test]
    fn a_problem_crosses_the_wire_unchanged() {
        let provider =
            crate::provider::ProviderProblem::from(&crate::provider::ProviderError::new(
                crate::provider::ProviderErrorKind::Status(529),
                "cadre's words",
            ));
        for problem in [
            RunProblem::MaxTurns,
            RunProblem::Cancelled,
            RunProblem::Provider { provider },
            RunProblem::Backend { text: "t".into() },
        ] {
            let r = TaskResult {
                status: TaskStatus::Failed,
                texts: None,
                error: Some("for people".into()),
                problem: Some(problem.clone()),
                usage: Usage::default(),
                total_tokens: 1,
                tool_uses: 2,
                duration_ms: 3,
                worktree: None,
            };
            let n = Notice::of("a1", "s", &r, "w", 1);
            let back: Notice = serde_json::from_slice(&serde_json::to_vec(&n).unwrap()).unwrap();
            assert_eq!(back.result().problem, Some(problem));
            assert_eq!(back.result().error.as_deref(), Some("for people"));
        }
    }
}
