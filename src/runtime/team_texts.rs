//! The texts of agent teams (docs/teams.md) as typed template contexts:
//! task list results, team messages, teammate notices and team errors.

use crate::contexts;
use crate::teams::{TaskStatus, TeamTask};

fn sample_task() -> TeamTask {
    TeamTask {
        id: "2".into(),
        subject: "Port the parser".into(),
        description: "Done when the parser tests pass.".into(),
        owner: Some("alice".into()),
        status: TaskStatus::InProgress,
        blocks: vec!["3".into()],
        blocked_by: vec!["1".into()],
    }
}

contexts! {
    /// TaskCreate's result.
    "team_task_created" => pub struct TaskCreatedText {
        pub id: String = "3".into(),
        pub subject: String = "Write the docs".into(),
    }

    /// TaskList's result: every task.
    "team_task_list" => pub struct TaskListText {
        pub tasks: Vec<TeamTask> = vec![sample_task()],
    }

    /// TaskGet's result: one task in full.
    "team_task" => pub struct TaskText {
        #[serde(flatten)]
        pub task: TeamTask = sample_task(),
    }

    /// TaskUpdate's result: the task after the change.
    "team_task_updated" => pub struct TaskUpdatedText {
        #[serde(flatten)]
        pub task: TeamTask = sample_task(),
    }

    /// A team operation that failed (a claim refused, a missing task, an
    /// unreadable team file).
    "error_team" => pub struct TeamFailed {
        pub problem: TeamProblem = TeamProblem::Claimed {
            id: "2".into(),
            owner: "alice".into(),
        },
    }

    /// A team tool used by a session that is in no team.
    "error_not_in_team" => pub struct NotInTeam {
        pub tool: String = "TaskList".into(),
    }

    /// SendMessage to `*` with nobody else in the team.
    "error_team_no_recipient" => pub struct NoRecipient {}

    /// SendMessage with an unknown `type`.
    "error_team_message_type" => pub struct BadMessageType {
        pub kind: String = "hello".into(),
        pub expected: String = "message, shutdown_request".into(),
    }

    /// An Agent call naming another team than the lead's.
    "error_team_other_team" => pub struct OtherTeam {
        pub team: String = "crew".into(),
        pub asked: String = "other".into(),
    }

    /// A teammate's Agent call with a `name`.
    "error_teammate_spawn" => pub struct TeammateCannotSpawn {}

    /// A message as its recipient reads it.
    "team_message" => pub struct TeamMessageText {
        pub from: String = "alice".into(),
        pub text: String = "Task 2 is done.".into(),
        /// The message's type when it is not a plain message.
        pub kind: Option<String> = None,
        /// A `plan_approval_response`'s verdict.
        pub approve: Option<bool> = None,
    }

    /// TeamCreate's result.
    "result_team_created" => pub struct TeamCreatedText {
        pub team_name: String = "crew-2".into(),
        /// The name asked for, when another team had it.
        pub asked: Option<String> = Some("crew".into()),
        /// The team's folder.
        pub path: String = ".cadre/teams/crew-2".into(),
    }

    /// TeamDelete's result.
    "result_team_deleted" => pub struct TeamDeletedText {
        pub team_name: String = "crew".into(),
    }

    /// TeamCreate or TeamDelete from a session that does not lead (a
    /// teammate, a sub-agent).
    "error_team_lead_only" => pub struct LeadOnly {
        pub tool: String = "TeamCreate".into(),
    }

    /// TeamCreate while this session already leads a team in use.
    "error_team_already_leading" => pub struct AlreadyLeading {
        pub team: String = "crew".into(),
    }

    /// TeamDelete while members still run.
    "error_team_members_running" => pub struct MembersRunning {
        pub team: String = "crew".into(),
        pub members: String = "alice, bob".into(),
    }

    /// A `plan_approval_response` that cannot be sent.
    "error_team_plan_response" => pub struct BadPlanResponse {
        /// Sent by a teammate, not the lead.
        pub not_lead: bool = false,
        /// Sent to `*` or to the lead rather than one teammate.
        pub not_one_teammate: bool = false,
        /// Without `approve`.
        pub no_verdict: bool = true,
    }

    /// An Agent call's `mode` other than `plan` for a teammate.
    "error_teammate_mode" => pub struct BadTeammateMode {
        pub mode: String = "bypassPermissions".into(),
    }

    /// An Agent call's `mode` without `name` (not a teammate).
    "error_agent_mode_needs_name" => pub struct ModeNeedsTeammate {}

    /// SendMessage's result in a team.
    "team_message_sent" => pub struct MessageSent {
        pub recipients: String = "alice, bob".into(),
    }

    /// The Agent tool's result for a teammate.
    "result_teammate_spawned" => pub struct TeammateSpawned {
        pub agent_id: String = "a0123456789abcdef".into(),
        pub name: String = "alice".into(),
        pub team_name: String = "crew".into(),
    }

    /// The notice the lead gets when a teammate goes idle.
    "team_idle" => pub struct IdleNotice {
        pub name: String = "alice".into(),
        pub last: Option<String> = Some("Task 2 is done.".into()),
    }

    /// The notice the lead gets when a teammate stops on its own.
    "team_ended" => pub struct EndedNotice {
        pub name: String = "alice".into(),
        pub problem: super::problem::RunProblem = super::problem::RunProblem::MaxTurns,
    }

    /// A teammate's first message, around the lead's prompt.
    "teammate_intro" => pub struct TeammateIntro {
        pub name: String = "alice".into(),
        pub team: String = "crew".into(),
        /// The other members, comma-separated.
        pub others: String = "bob".into(),
        pub prompt: String = "Take the parser tasks.".into(),
        /// Started in plan mode: read-only until the lead approves a plan.
        pub plan_mode: bool = false,
    }
}

/// What went wrong in a team operation, worded by `error_team`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TeamProblem {
    /// A team file could not be read or written: the system's or the
    /// parser's own words.
    File {
        path: String,
        error: String,
    },
    /// A tool input that does not read (serde's own words).
    Input {
        error: String,
    },
    BadName {
        name: String,
    },
    NoSuchTask {
        id: String,
    },
    Claimed {
        id: String,
        owner: String,
    },
    /// `by`: the unfinished blockers, comma-separated.
    Blocked {
        id: String,
        by: String,
    },
    NoSuchMember {
        name: String,
    },
}

impl From<serde_json::Error> for TeamProblem {
    fn from(e: serde_json::Error) -> Self {
        TeamProblem::Input {
            error: e.to_string(),
        }
    }
}

impl From<crate::teams::TeamError> for TeamProblem {
    fn from(e: crate::teams::TeamError) -> Self {
        TeamProblem::from(&e)
    }
}

impl From<&crate::teams::TeamError> for TeamProblem {
    fn from(e: &crate::teams::TeamError) -> Self {
        use crate::teams::TeamError as E;
        match e {
            E::Io { path, source } => TeamProblem::File {
                path: path.display().to_string(),
                error: source.to_string(),
            },
            E::Bad { path, message } => TeamProblem::File {
                path: path.display().to_string(),
                error: message.clone(),
            },
            E::BadName(name) => TeamProblem::BadName { name: name.clone() },
            E::NoSuchTask(id) => TeamProblem::NoSuchTask { id: id.clone() },
            E::Claimed { id, owner } => TeamProblem::Claimed {
                id: id.clone(),
                owner: owner.clone(),
            },
            E::Blocked { id, by } => TeamProblem::Blocked {
                id: id.clone(),
                by: by.join(", "),
            },
            E::NoSuchMember(name) => TeamProblem::NoSuchMember { name: name.clone() },
        }
    }
}
