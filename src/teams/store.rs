//! The team folder: members, mailboxes and tasks, each change made under
//! the team's file lock.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The largest team file read (a member list, an inbox, a task).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Bad { path: PathBuf, message: String },
    #[error(
        "{0:?} is not a valid name: use letters, digits, `-`, `_` and `.`, not starting with `.`"
    )]
    BadName(String),
    #[error("no task {0}")]
    NoSuchTask(String),
    #[error("task {id} is already owned by {owner}")]
    Claimed { id: String, owner: String },
    #[error("task {id} is blocked by unfinished task(s) {}", by.join(", "))]
    Blocked { id: String, by: Vec<String> },
    #[error("no member {0} in this team")]
    NoSuchMember(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TeamError + '_ {
    move |source| TeamError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A team or member name: safe as a file name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    /// Working on a turn.
    Active,
    /// Between tasks, waiting for a message.
    Idle,
    /// Shut down (or its process ended).
    Ended,
}

/// One member of a team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub agent_id: String,
    pub agent_type: String,
    pub status: MemberStatus,
    /// The session (process) it runs in.
    #[serde(default)]
    pub session_id: String,
    pub joined: String,
}

/// `team.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamFile {
    pub name: String,
    /// What the team is for (TeamCreate's `description`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Everyone, the lead (`team-lead`) included.
    pub members: Vec<Member>,
}

/// One message in a mailbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub from: String,
    pub text: String,
    /// `message`, `shutdown_request`, `shutdown_response`,
    /// `plan_approval_request`, `plan_approval_response` or `idle`.
    #[serde(rename = "type", default = "plain")]
    pub kind: String,
    pub timestamp: String,
    #[serde(default)]
    pub read: bool,
    /// A `plan_approval_response`'s verdict: the plan is approved or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<bool>,
}

fn plain() -> String {
    "message".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Completed,
}

/// One task of the shared list (`tasks/ID.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamTask {
    pub id: String,
    pub subject: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub status: TaskStatus,
    #[serde(default)]
    pub blocks: Vec<String>,
    #[serde(rename = "blockedBy", default)]
    pub blocked_by: Vec<String>,
}

/// A change to a task (TaskUpdate).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TaskPatch {
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub status: Option<TaskStatus>,
    #[serde(rename = "addBlocks", default)]
    pub add_blocks: Vec<String>,
    #[serde(rename = "addBlockedBy", default)]
    pub add_blocked_by: Vec<String>,
}

/// What an update did.
#[derive(Debug, Clone)]
pub struct Claim {
    pub task: TeamTask,
    /// The update moved the task to `completed`.
    pub completed_now: bool,
}

/// One team's folder.
#[derive(Debug, Clone)]
pub struct TeamStore {
    pub name: String,
    pub root: PathBuf,
}

impl TeamStore {
    /// The team `name` under `teams_dir`, its folders created.
    pub fn open(teams_dir: &Path, name: &str) -> Result<TeamStore, TeamError> {
        if !valid_name(name) {
            return Err(TeamError::BadName(name.into()));
        }
        let root = teams_dir.join(name);
        for d in [root.join("inboxes"), root.join("tasks")] {
            fs_err::create_dir_all(&d).map_err(|e| TeamError::Io {
                path: d.clone(),
                source: std::io::Error::new(e.kind(), e.to_string()),
            })?;
        }
        Ok(TeamStore {
            name: name.into(),
            root,
        })
    }

    /// An existing team, without creating anything.
    pub fn existing(teams_dir: &Path, name: &str) -> Option<TeamStore> {
        let root = teams_dir.join(name);
        (valid_name(name) && root.join("team.json").is_file()).then(|| TeamStore {
            name: name.into(),
            root,
        })
    }

    /// The teams under `teams_dir`, sorted.
    pub fn list(teams_dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(teams_dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().join("team.json").is_file())
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Runs `f` holding the team's exclusive lock (blocking until it is
    /// free); released when `f` returns, also on error.
    fn locked<T>(&self, f: impl FnOnce() -> Result<T, TeamError>) -> Result<T, TeamError> {
        let path = self.root.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        file.lock().map_err(io(&path))?;
        let out = f();
        // Closing the file releases the lock too; unlocking first is explicit.
        let _ = file.unlock();
        out
    }

    fn team_path(&self) -> PathBuf {
        self.root.join("team.json")
    }

    fn inbox_path(&self, member: &str) -> PathBuf {
        self.root.join("inboxes").join(format!("{member}.json"))
    }

    fn task_path(&self, id: &str) -> PathBuf {
        self.root.join("tasks").join(format!("{id}.json"))
    }

    /// The member list (empty for a new team).
    pub fn team(&self) -> Result<TeamFile, TeamError> {
        Ok(read_json(&self.team_path())?.unwrap_or_else(|| TeamFile {
            name: self.name.clone(),
            description: None,
            members: Vec::new(),
        }))
    }

    /// Adds `member`, or replaces the member of the same name.
    pub fn join(&self, member: Member) -> Result<(), TeamError> {
        self.locked(|| {
            let mut team = self.team()?;
            team.members.retain(|m| m.name != member.name);
            team.members.push(member);
            write_json(&self.team_path(), &team)
        })
    }

    /// Sets the team's description.
    pub fn set_description(&self, description: Option<String>) -> Result<(), TeamError> {
        self.locked(|| {
            let mut team = self.team()?;
            team.description = description;
            write_json(&self.team_path(), &team)
        })
    }

    /// Removes the team's folder (members, mailboxes, tasks), under the
    /// lock, when no member but `keep` is still running (`Ended`). Returns
    /// the members still running instead, removing nothing.
    pub fn remove_unless_running(&self, keep: &str) -> Result<Vec<String>, TeamError> {
        let running = self.locked(|| {
            let team = self.team()?;
            let running: Vec<String> = team
                .members
                .iter()
                .filter(|m| m.name != keep && m.status != MemberStatus::Ended)
                .map(|m| m.name.clone())
                .collect();
            if running.is_empty() {
                // Everything but the lock file, which is held right now.
                for sub in ["inboxes", "tasks"] {
                    let d = self.root.join(sub);
                    if d.exists() {
                        std::fs::remove_dir_all(&d).map_err(io(&d))?;
                    }
                }
                let t = self.team_path();
                std::fs::remove_file(&t).map_err(io(&t))?;
            }
            Ok(running)
        })?;
        if running.is_empty() {
            std::fs::remove_dir_all(&self.root).map_err(io(&self.root))?;
        }
        Ok(running)
    }

    /// Sets a member's status.
    pub fn set_status(&self, name: &str, status: MemberStatus) -> Result<(), TeamError> {
        self.locked(|| {
            let mut team = self.team()?;
            let Some(m) = team.members.iter_mut().find(|m| m.name == name) else {
                return Err(TeamError::NoSuchMember(name.into()));
            };
            m.status = status;
            write_json(&self.team_path(), &team)
        })
    }

    /// Puts a message in the inbox of `to` (a member name, or `*`: every
    /// member but the sender that has not ended). Returns the recipients.
    pub fn send(
        &self,
        from: &str,
        to: &str,
        text: &str,
        kind: &str,
    ) -> Result<Vec<String>, TeamError> {
        self.send_verdict(from, to, text, kind, None)
    }

    /// [`TeamStore::send`] with a plan approval's verdict (`approve`).
    pub fn send_verdict(
        &self,
        from: &str,
        to: &str,
        text: &str,
        kind: &str,
        approve: Option<bool>,
    ) -> Result<Vec<String>, TeamError> {
        self.locked(|| {
            let team = self.team()?;
            let recipients: Vec<String> = if to == super::BROADCAST {
                team.members
                    .iter()
                    .filter(|m| m.name != from && m.status != MemberStatus::Ended)
                    .map(|m| m.name.clone())
                    .collect()
            } else if team.members.iter().any(|m| m.name == to) {
                vec![to.to_string()]
            } else {
                return Err(TeamError::NoSuchMember(to.into()));
            };
            let message = Message {
                from: from.into(),
                text: text.into(),
                kind: kind.into(),
                timestamp: crate::clock::now_rfc3339(),
                read: false,
                approve,
            };
            for r in &recipients {
                let path = self.inbox_path(r);
                let mut inbox: Vec<Message> = read_json(&path)?.unwrap_or_default();
                inbox.push(message.clone());
                write_json(&path, &inbox)?;
            }
            Ok(recipients)
        })
    }

    /// A member's whole inbox, read and unread.
    pub fn inbox(&self, member: &str) -> Result<Vec<Message>, TeamError> {
        Ok(read_json(&self.inbox_path(member))?.unwrap_or_default())
    }

    /// Whether `member` has unread messages (without taking them).
    pub fn has_unread(&self, member: &str) -> bool {
        self.inbox(member).is_ok_and(|i| i.iter().any(|m| !m.read))
    }

    /// The unread messages of `member`, marked read in the same locked step,
    /// so each is delivered once.
    pub fn take_unread(&self, member: &str) -> Result<Vec<Message>, TeamError> {
        let path = self.inbox_path(member);
        if !path.is_file() {
            return Ok(Vec::new());
        }
        self.locked(|| {
            let mut inbox: Vec<Message> = read_json(&path)?.unwrap_or_default();
            let unread: Vec<Message> = inbox.iter().filter(|m| !m.read).cloned().collect();
            if unread.is_empty() {
                return Ok(unread);
            }
            for m in &mut inbox {
                m.read = true;
            }
            write_json(&path, &inbox)?;
            Ok(unread)
        })
    }

    /// Every task, by numeric id.
    pub fn tasks(&self) -> Result<Vec<TeamTask>, TeamError> {
        let dir = self.root.join("tasks");
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(&dir)(e)),
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json")
                && let Some(t) = read_json::<TeamTask>(&p)?
            {
                out.push(t);
            }
        }
        out.sort_by_key(|t| (t.id.parse::<u64>().unwrap_or(u64::MAX), t.id.clone()));
        Ok(out)
    }

    pub fn task(&self, id: &str) -> Result<Option<TeamTask>, TeamError> {
        if !valid_name(id) {
            return Ok(None);
        }
        read_json(&self.task_path(id))
    }

    /// Adds a pending task with the next free id.
    pub fn create_task(&self, subject: &str, description: &str) -> Result<TeamTask, TeamError> {
        self.locked(|| {
            let next = self
                .tasks()?
                .iter()
                .filter_map(|t| t.id.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
                + 1;
            let task = TeamTask {
                id: next.to_string(),
                subject: subject.into(),
                description: description.into(),
                owner: None,
                status: TaskStatus::Pending,
                blocks: Vec::new(),
                blocked_by: Vec::new(),
            };
            write_json(&self.task_path(&task.id), &task)?;
            Ok(task)
        })
    }

    /// Changes task `id` on behalf of member `by`, under the lock. A task
    /// has at most one owner: setting `owner` (or moving it to
    /// `in_progress`, which claims it for `by`) fails
    /// while another member owns it, and starting it fails while a task in
    /// its `blockedBy` is unfinished.
    pub fn update_task(&self, id: &str, by: &str, patch: &TaskPatch) -> Result<Claim, TeamError> {
        self.locked(|| {
            let Some(mut task) = self.task(id)? else {
                return Err(TeamError::NoSuchTask(id.into()));
            };
            let was_completed = task.status == TaskStatus::Completed;
            // Starting a task claims it for `by` unless an owner is named.
            let wants_owner = patch
                .owner
                .clone()
                .or_else(|| (patch.status == Some(TaskStatus::InProgress)).then(|| by.to_string()));
            if let Some(new_owner) = &wants_owner
                && let Some(current) = &task.owner
                && current != new_owner
                && !new_owner.is_empty()
            {
                return Err(TeamError::Claimed {
                    id: id.into(),
                    owner: current.clone(),
                });
            }
            if patch.status == Some(TaskStatus::InProgress) {
                let all = self.tasks()?;
                let open: Vec<String> = task
                    .blocked_by
                    .iter()
                    .chain(&patch.add_blocked_by)
                    .filter(|b| {
                        all.iter()
                            .any(|t| &t.id == *b && t.status != TaskStatus::Completed)
                    })
                    .cloned()
                    .collect();
                if !open.is_empty() {
                    return Err(TeamError::Blocked {
                        id: id.into(),
                        by: open,
                    });
                }
            }
            if let Some(o) = wants_owner {
                // An empty owner releases the task.
                task.owner = (!o.is_empty()).then_some(o);
            }
            if let Some(s) = &patch.subject {
                task.subject = s.clone();
            }
            if let Some(d) = &patch.description {
                task.description = d.clone();
            }
            if let Some(s) = patch.status {
                task.status = s;
            }
            for b in &patch.add_blocks {
                if !task.blocks.contains(b) {
                    task.blocks.push(b.clone());
                }
            }
            for b in &patch.add_blocked_by {
                if !task.blocked_by.contains(b) {
                    task.blocked_by.push(b.clone());
                }
            }
            write_json(&self.task_path(id), &task)?;
            // The other side of each new link.
            for (list, other_ids) in [(true, &patch.add_blocks), (false, &patch.add_blocked_by)] {
                for other_id in other_ids {
                    if let Some(mut other) = self.task(other_id)? {
                        let side = if list {
                            &mut other.blocked_by
                        } else {
                            &mut other.blocks
                        };
                        if !side.iter().any(|x| x == id) {
                            side.push(id.to_string());
                            write_json(&self.task_path(other_id), &other)?;
                        }
                    }
                }
            }
            Ok(Claim {
                completed_now: !was_completed && task.status == TaskStatus::Completed,
                task,
            })
        })
    }
}

/// Reads a JSON file; `None` when it does not exist.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, TeamError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io(path))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(TeamError::Bad {
            path: path.into(),
            message: format!("larger than {MAX_FILE_BYTES} bytes"),
        });
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| TeamError::Bad {
            path: path.into(),
            message: format!("{}:{}: {e}", e.line(), e.column()),
        })
}

/// Writes a JSON file whole: to a temporary name, then renamed over it.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), TeamError> {
    let tmp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| TeamError::Bad {
        path: path.into(),
        message: e.to_string(),
    })?;
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str) -> Member {
        Member {
            name: name.into(),
            agent_id: format!("a-{name}"),
            agent_type: "general-purpose".into(),
            status: MemberStatus::Active,
            session_id: "s".into(),
            joined: "t".into(),
        }
    }

    #[test]
    fn names_are_safe_file_names() {
        assert!(valid_name("alpha-1.b_c"));
        for bad in ["", ".hidden", "a/b", "a b", "..", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn messages_are_delivered_once_and_broadcast_skips_the_sender() {
        let dir = tempfile::tempdir().unwrap();
        let team = TeamStore::open(dir.path(), "t").unwrap();
        for n in [crate::teams::LEAD, "a", "b"] {
            team.join(member(n)).unwrap();
        }
        assert_eq!(
            team.send("a", "*", "hello", "message").unwrap(),
            ["team-lead", "b"]
        );
        assert!(team.has_unread("b"));
        let got = team.take_unread("b").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].from, "a");
        assert!(team.take_unread("b").unwrap().is_empty(), "delivered once");
        assert!(
            team.take_unread("a").unwrap().is_empty(),
            "not to the sender"
        );
        assert!(matches!(
            team.send("a", "nobody", "x", "message"),
            Err(TeamError::NoSuchMember(_))
        ));
    }

    #[test]
    fn a_task_has_one_owner_and_waits_for_its_blockers() {
        let dir = tempfile::tempdir().unwrap();
        let team = TeamStore::open(dir.path(), "t").unwrap();
        let first = team.create_task("one", "").unwrap();
        let second = team.create_task("two", "").unwrap();
        assert_eq!((first.id.as_str(), second.id.as_str()), ("1", "2"));
        let link = TaskPatch {
            add_blocked_by: vec!["1".into()],
            ..Default::default()
        };
        team.update_task("2", "a", &link).unwrap();
        assert_eq!(team.task("1").unwrap().unwrap().blocks, ["2"]);
        let start = TaskPatch {
            status: Some(TaskStatus::InProgress),
            ..Default::default()
        };
        assert!(matches!(
            team.update_task("2", "a", &start),
            Err(TeamError::Blocked { .. })
        ));
        let c = team.update_task("1", "a", &start).unwrap();
        assert_eq!(c.task.owner.as_deref(), Some("a"));
        assert!(matches!(
            team.update_task("1", "b", &start),
            Err(TeamError::Claimed { .. })
        ));
        let done = TaskPatch {
            status: Some(TaskStatus::Completed),
            ..Default::default()
        };
        assert!(team.update_task("1", "a", &done).unwrap().completed_now);
        assert!(!team.update_task("1", "a", &done).unwrap().completed_now);
        assert!(team.update_task("2", "b", &start).is_ok(), "unblocked");
    }

    /// Many claimers, each with its own open of the lock file (as separate
    /// processes have), race for every task: each task ends with exactly
    /// one owner, and each claimer that was told it won is that owner.
    #[test]
    fn concurrent_claims_never_give_a_task_two_owners() {
        for round in 0..100 {
            let dir = tempfile::tempdir().unwrap();
            let team = TeamStore::open(dir.path(), "race").unwrap();
            for i in 0..4 {
                team.create_task(&format!("task {i}"), "").unwrap();
            }
            let wins: Vec<Vec<String>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|w| {
                        let root = dir.path().to_path_buf();
                        s.spawn(move || {
                            let team = TeamStore::open(&root, "race").unwrap();
                            let mut won = Vec::new();
                            for id in ["1", "2", "3", "4"] {
                                let claim = TaskPatch {
                                    status: Some(TaskStatus::InProgress),
                                    ..Default::default()
                                };
                                if team.update_task(id, &format!("w{w}"), &claim).is_ok() {
                                    won.push(id.to_string());
                                }
                            }
                            won
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let total: usize = wins.iter().map(Vec::len).sum();
            assert_eq!(total, 4, "round {round}: {wins:?}");
            for (w, ids) in wins.iter().enumerate() {
                for id in ids {
                    let t = team.task(id).unwrap().unwrap();
                    assert_eq!(t.owner, Some(format!("w{w}")), "round {round}");
                }
            }
        }
    }
}
