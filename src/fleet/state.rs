//! A task's state as the key-value bucket holds it, and the transitions
//! between states as pure functions. The bucket write that applies a
//! transition is a compare-and-set on the revision the transition was
//! computed from (see `worker`), so of two workers racing on one task at
//! most one write lands; these functions add the rules a write must obey
//! (only the lease holder renews or finishes, nothing leaves an end state).

use serde::{Deserialize, Serialize};

use super::wire::Notice;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FleetStatus {
    /// Published; no worker holds it yet.
    Queued,
    /// A worker holds its lease.
    Running,
    Completed,
    Failed,
    Killed,
}

impl FleetStatus {
    pub fn is_end(self) -> bool {
        matches!(
            self,
            FleetStatus::Completed | FleetStatus::Failed | FleetStatus::Killed
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FleetStatus::Queued => "queued",
            FleetStatus::Running => "running",
            FleetStatus::Completed => "completed",
            FleetStatus::Failed => "failed",
            FleetStatus::Killed => "killed",
        }
    }
}

/// One task's entry in the bucket (key: its agent id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub agent_id: String,
    pub session_id: String,
    pub parent_agent_id: String,
    pub pool: String,
    pub agent_type: String,
    pub description: String,
    pub status: FleetStatus,
    /// The worker holding (or that last held) the lease.
    #[serde(default)]
    pub owner: Option<String>,
    /// How many times a worker has taken the task (1 = first run).
    #[serde(default)]
    pub attempt: u32,
    /// Unix milliseconds: when it was published, the last heartbeat of its
    /// lease, and its end.
    pub queued_at_ms: u64,
    #[serde(default)]
    pub lease_at_ms: Option<u64>,
    #[serde(default)]
    pub ended_at_ms: Option<u64>,
    /// Set with an end state: the notice, so that a worker that finds the
    /// task ended but its notice missing (its finisher died in between)
    /// publishes it.
    #[serde(default)]
    pub notice: Option<Notice>,
    /// Which run of the task this is: 0 for its spawn, n after the n-th
    /// SendMessage that resumed it once it had ended.
    #[serde(default)]
    pub run: u32,
}

/// Why a transition is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("task {0} has already ended ({1})")]
    Ended(String, &'static str),
    #[error("task {agent} is held by {holder}, not {worker}")]
    NotHolder {
        agent: String,
        holder: String,
        worker: String,
    },
    #[error("task {0} is not running")]
    NotRunning(String),
    #[error("task {0} has not ended")]
    NotEnded(String),
}

impl TaskRecord {
    /// A worker takes the task: a queued one, or a running one whose lease
    /// ran out (the broker redelivers only then). The attempt counts up.
    pub fn claim(&self, worker: &str, now_ms: u64) -> Result<TaskRecord, Refused> {
        if self.status.is_end() {
            return Err(Refused::Ended(self.agent_id.clone(), self.status.as_str()));
        }
        Ok(TaskRecord {
            status: FleetStatus::Running,
            owner: Some(worker.to_string()),
            attempt: self.attempt + 1,
            lease_at_ms: Some(now_ms),
            ..self.clone()
        })
    }

    /// The parent resumes an ended task (SendMessage): queued again as its
    /// next run, to be claimed like a new one.
    pub fn reopen(&self, now_ms: u64) -> Result<TaskRecord, Refused> {
        if !self.status.is_end() {
            return Err(Refused::NotEnded(self.agent_id.clone()));
        }
        Ok(TaskRecord {
            status: FleetStatus::Queued,
            owner: None,
            attempt: 0,
            queued_at_ms: now_ms,
            lease_at_ms: None,
            ended_at_ms: None,
            notice: None,
            run: self.run + 1,
            ..self.clone()
        })
    }

    /// The holder renews its lease.
    pub fn renew(&self, worker: &str, now_ms: u64) -> Result<TaskRecord, Refused> {
        self.held_by(worker)?;
        Ok(TaskRecord {
            lease_at_ms: Some(now_ms),
            ..self.clone()
        })
    }

    /// The holder ends the task with its notice.
    pub fn finish(
        &self,
        worker: &str,
        status: FleetStatus,
        notice: Notice,
        now_ms: u64,
    ) -> Result<TaskRecord, Refused> {
        self.held_by(worker)?;
        if !status.is_end() {
            return Err(Refused::NotRunning(self.agent_id.clone()));
        }
        Ok(TaskRecord {
            status,
            ended_at_ms: Some(now_ms),
            notice: Some(notice),
            ..self.clone()
        })
    }

    fn held_by(&self, worker: &str) -> Result<(), Refused> {
        if self.status.is_end() {
            return Err(Refused::Ended(self.agent_id.clone(), self.status.as_str()));
        }
        if self.status != FleetStatus::Running {
            return Err(Refused::NotRunning(self.agent_id.clone()));
        }
        match &self.owner {
            Some(o) if o == worker => Ok(()),
            other => Err(Refused::NotHolder {
                agent: self.agent_id.clone(),
                holder: other.clone().unwrap_or_default(),
                worker: worker.to_string(),
            }),
        }
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn queued() -> TaskRecord {
        TaskRecord {
            agent_id: "a1".into(),
            session_id: "s".into(),
            parent_agent_id: "main".into(),
            pool: "default".into(),
            agent_type: "general-purpose".into(),
            description: "d".into(),
            status: FleetStatus::Queued,
            owner: None,
            attempt: 0,
            queued_at_ms: 1,
            lease_at_ms: None,
            ended_at_ms: None,
            notice: None,
            run: 0,
        }
    }

    fn notice() -> Notice {
        Notice {
            agent_id: "a1".into(),
            session_id: "s".into(),
            status: FleetStatus::Completed,
            texts: Some(vec!["done".into()]),
            error: None,
            problem: None,
            usage: crate::message::Usage::default(),
            total_tokens: 0,
            tool_uses: 0,
            duration_ms: 0,
            worker: "w1".into(),
            attempt: 1,
            worktree: None,
            run: 0,
            branch_object: None,
        }
    }

    #[test]
    fn a_queued_task_is_claimed_and_finished_by_its_holder() {
        let r = queued().claim("w1", 10).unwrap();
        assert_eq!(
            (r.status, r.owner.as_deref(), r.attempt),
            (FleetStatus::Running, Some("w1"), 1)
        );
        let r = r.renew("w1", 20).unwrap();
        assert_eq!(r.lease_at_ms, Some(20));
        let done = r
            .finish("w1", FleetStatus::Completed, notice(), 30)
            .unwrap();
        assert_eq!(done.status, FleetStatus::Completed);
        assert_eq!(done.notice, Some(notice()));
    }

    /// SendMessage to an ended task: only an ended task reopens, as its
    /// next run, queued with no holder; its old holder cannot renew it.
    #[test]
    fn an_ended_task_reopens_as_its_next_run() {
        let running = queued().claim("w1", 10).unwrap();
        assert!(matches!(running.reopen(15), Err(Refused::NotEnded(_))));
        let done = running
            .finish("w1", FleetStatus::Completed, notice(), 20)
            .unwrap();
        let again = done.reopen(30).unwrap();
        assert_eq!(
            (again.status, again.run, again.attempt, again.owner.clone()),
            (FleetStatus::Queued, 1, 0, None)
        );
        assert_eq!((again.notice.clone(), again.ended_at_ms), (None, None));
        assert!(again.renew("w1", 40).is_err());
        let claimed = again.claim("w2", 50).unwrap();
        assert_eq!((claimed.run, claimed.attempt), (1, 1));
    }

    #[test]
    fn a_taken_over_task_refuses_its_old_holder() {
        let first = queued().claim("w1", 10).unwrap();
        let second = first.claim("w2", 50).unwrap();
        assert_eq!(second.attempt, 2);
        assert!(matches!(
            second.renew("w1", 60),
            Err(Refused::NotHolder { .. })
        ));
        assert!(matches!(
            second.finish("w1", FleetStatus::Completed, notice(), 60),
            Err(Refused::NotHolder { .. })
        ));
        assert!(
            second
                .finish("w2", FleetStatus::Completed, notice(), 60)
                .is_ok()
        );
    }

    #[test]
    fn nothing_leaves_an_end_state() {
        let done = queued()
            .claim("w1", 1)
            .unwrap()
            .finish("w1", FleetStatus::Failed, notice(), 2)
            .unwrap();
        assert!(matches!(done.claim("w2", 3), Err(Refused::Ended(..))));
        assert!(matches!(done.renew("w1", 3), Err(Refused::Ended(..))));
        assert!(matches!(
            done.finish("w1", FleetStatus::Completed, notice(), 3),
            Err(Refused::Ended(..))
        ));
    }

    #[test]
    fn a_queued_task_cannot_be_finished_or_renewed() {
        assert!(matches!(
            queued().renew("w1", 1),
            Err(Refused::NotRunning(_))
        ));
        assert!(matches!(
            queued().finish("w1", FleetStatus::Completed, notice(), 1),
            Err(Refused::NotRunning(_))
        ));
        let running = queued().claim("w1", 1).unwrap();
        assert!(matches!(
            running.finish("w1", FleetStatus::Running, notice(), 2),
            Err(Refused::NotRunning(_))
        ));
    }
}
