//! Agent teams on disk (docs/teams.md): one folder per team holding its
//! members, one mailbox per member and the shared task list, so that every
//! session of a team — in this process or in another cadre process that
//! opens the same folder — sees the same state.
//!
//! Layout of `TEAMS_DIR/TEAM/`:
//! - `team.json`: the members (name, agent id, agent type, status);
//! - `inboxes/NAME.json`: a member's messages, oldest first, each marked
//!   read once delivered;
//! - `tasks/ID.json`: one task each (subject, description, owner, status,
//!   blocks / blockedBy);
//! - `.lock`: every read-modify-write of the files above holds an exclusive
//!   lock on it (`std::fs::File::lock`, an advisory OS lock that also works
//!   between processes), so two members never both claim one task and no
//!   message is lost when two senders write one inbox at once.
//!
//! This module only stores; the runtime decides who may do what and the
//! templates say it to the model.

mod store;

pub use store::{
    Claim, Member, MemberStatus, Message, TaskPatch, TaskStatus, TeamError, TeamFile, TeamStore,
    TeamTask, valid_name,
};

/// The name a team's lead has in its team (the address teammates write to).
pub const LEAD: &str = "team-lead";

/// The address of every member but the sender (SendMessage `to: "*"`).
pub const BROADCAST: &str = "*";
