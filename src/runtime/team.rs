//! Agent teams in a session (docs/teams.md): the shared task list tools,
//! team messages (SendMessage to a member name or `*`), mailbox delivery at
//! each turn, spawning a teammate, and a teammate's life: turns separated
//! by idle waits for its mailbox, until it is shut down.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent_tool::AgentInput;
use crate::config::PermissionMode;
use crate::message::{ContentBlock, History, Message, ToolResultContent, Usage};
use crate::snapshot::Snapshot;
use crate::teams::{self, Member, MemberStatus, TaskPatch, TeamStore};

use super::exec::text_content;
use super::hooks::{HookEvent, fire};
use super::plan::plan_teammate;
use super::session::{Session, SessionSpec, TeamSeat};
use super::team_texts::*;
use super::transcript::Transcript;
use super::{Engine, new_agent_id};
use crate::clock::now_rfc3339;

/// How often an idle member (or a lead waiting for its team) looks at its
/// mailbox file; another process may write it, so it is read, not awaited.
const POLL: Duration = Duration::from_millis(50);

/// The kind of the notice a teammate sends its lead when it goes idle.
const IDLE: &str = "idle";

/// Message kinds SendMessage accepts in a team (plain first, then the
/// shutdown request).
const KINDS: &[&str] = &[
    "message",
    "shutdown_request",
    "shutdown_response",
    "plan_approval_request",
    PLAN_RESPONSE,
];

/// The lead's answer to a teammate's plan (with `approve`).
const PLAN_RESPONSE: &str = "plan_approval_response";

#[derive(Deserialize)]
struct IdInput {
    #[serde(rename = "taskId")]
    task_id: String,
}

#[derive(Deserialize)]
struct CreateInput {
    subject: String,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamCreateInput {
    team_name: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct UpdateInput {
    #[serde(rename = "taskId")]
    task_id: String,
    #[serde(flatten)]
    patch: TaskPatch,
}

impl Session {
    /// The team this session is in now.
    pub(super) fn seat(&self) -> Option<TeamSeat> {
        self.team
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set_seat(&self, seat: Option<TeamSeat>) {
        *self
            .team
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = seat;
    }

    /// A teammate in plan mode whose plan the lead approved leaves plan
    /// mode now (before its next request).
    pub(super) fn apply_plan_approval(&mut self) {
        if !self.plan_approved.swap(false, Ordering::SeqCst) {
            return;
        }
        if let Some(after) = self.seat().and_then(|s| s.after_plan)
            && self.spec.mode == PermissionMode::Plan
        {
            self.transcript
                .record("plan_approved", json!({"permission_mode": after}));
            self.set_mode(after, "plan_approval");
        }
    }

    /// TeamCreate: this session (the main one) leads a new team.
    fn team_create(&self, snap: &Snapshot, input: Value) -> Result<String, String> {
        let t = &snap.templates;
        let err = |problem: TeamProblem| t.show(&TeamFailed { problem });
        let i: TeamCreateInput = serde_json::from_value(input).map_err(|e| err(e.into()))?;
        let current = self.seat();
        if !self.spec.is_main || current.as_ref().is_some_and(|s| !s.is_lead()) {
            return Err(t.show(&LeadOnly {
                tool: "TeamCreate".into(),
            }));
        }
        if !teams::valid_name(&i.team_name) {
            return Err(err(teams::TeamError::BadName(i.team_name).into()));
        }
        // The team every session with the flag starts in (named after the
        // session) may be left while nobody but the lead has used it; any
        // other team has to be deleted first.
        if let Some(seat) = &current {
            let team = seat.store.team().map_err(|e| err(e.into()))?;
            let implicit = seat.store.name == self.engine.session_id && !seat.from_file;
            let used = team.members.iter().any(|m| m.name != teams::LEAD)
                || !seat.store.tasks().map_err(|e| err(e.into()))?.is_empty();
            if !implicit || used {
                return Err(t.show(&AlreadyLeading {
                    team: seat.store.name.clone(),
                }));
            }
            if let Err(e) = seat.store.remove_unless_running(teams::LEAD) {
                tracing::warn!("team {}: {e}", seat.store.name);
            }
        }
        let dir = self.spec.cwd.join(&snap.settings().agents.teams_dir);
        // A name another team already has gets a number.
        let mut name = i.team_name.clone();
        let mut n = 2;
        while teams::TeamStore::existing(&dir, &name).is_some() {
            name = format!("{}-{n}", i.team_name);
            n += 1;
        }
        let store = teams::TeamStore::open(&dir, &name).map_err(|e| err(e.into()))?;
        let description = i.description.filter(|d| !d.trim().is_empty());
        store
            .set_description(description.clone())
            .map_err(|e| err(e.into()))?;
        store
            .join(Member {
                name: teams::LEAD.into(),
                agent_id: self.spec.agent_id.clone(),
                agent_type: self
                    .spec
                    .def
                    .as_ref()
                    .map_or("main", |d| d.name.as_str())
                    .into(),
                status: MemberStatus::Active,
                session_id: self.engine.session_id.clone(),
                joined: now_rfc3339(),
            })
            .map_err(|e| err(e.into()))?;
        self.transcript.record(
            "team_created",
            json!({"team": name, "description": description}),
        );
        let path = store.root.display().to_string();
        self.set_seat(Some(TeamSeat {
            store,
            member: teams::LEAD.into(),
            from_file: false,
            after_plan: None,
        }));
        Ok(t.show(&TeamCreatedText {
            asked: (name != i.team_name).then_some(i.team_name),
            team_name: name,
            path,
        }))
    }

    /// TeamDelete: the lead removes its team once every teammate has
    /// stopped.
    fn team_delete(&self, snap: &Snapshot) -> Result<String, String> {
        let t = &snap.templates;
        let Some(seat) = self.seat() else {
            return Err(t.show(&NotInTeam {
                tool: "TeamDelete".into(),
            }));
        };
        if !seat.is_lead() || !self.spec.is_main {
            return Err(t.show(&LeadOnly {
                tool: "TeamDelete".into(),
            }));
        }
        let running = seat
            .store
            .remove_unless_running(&seat.member)
            .map_err(|e| {
                t.show(&TeamFailed {
                    problem: (&e).into(),
                })
            })?;
        if !running.is_empty() {
            return Err(t.show(&MembersRunning {
                team: seat.store.name.clone(),
                members: running.join(", "),
            }));
        }
        self.transcript
            .record("team_deleted", json!({"team": seat.store.name}));
        self.set_seat(None);
        Ok(t.show(&TeamDeletedText {
            team_name: seat.store.name,
        }))
    }

    /// TaskCreate, TaskList, TaskGet, TaskUpdate, TeamCreate, TeamDelete.
    /// `Err` is an error result.
    pub(super) async fn team_call(
        &self,
        snap: &Snapshot,
        name: &str,
        input: Value,
    ) -> Result<String, String> {
        let t = &snap.templates;
        let err = |problem: TeamProblem| t.show(&TeamFailed { problem });
        match name {
            "TeamCreate" => return self.team_create(snap, input),
            "TeamDelete" => return self.team_delete(snap),
            _ => {}
        }
        let Some(seat) = &self.seat() else {
            return Err(t.show(&NotInTeam { tool: name.into() }));
        };
        let store = &seat.store;
        match name {
            "TaskCreate" => {
                let i: CreateInput = serde_json::from_value(input).map_err(|e| err(e.into()))?;
                let task = store
                    .create_task(&i.subject, &i.description)
                    .map_err(|e| err(e.into()))?;
                self.task_hook(snap, HookEvent::TaskCreated, seat, &task)
                    .await;
                Ok(t.show(&TaskCreatedText {
                    id: task.id,
                    subject: task.subject,
                }))
            }
            "TaskList" => {
                let tasks = store.tasks().map_err(|e| err(e.into()))?;
                Ok(t.show(&TaskListText { tasks }))
            }
            "TaskGet" => {
                let i: IdInput = serde_json::from_value(input).map_err(|e| err(e.into()))?;
                match store.task(&i.task_id).map_err(|e| err(e.into()))? {
                    Some(task) => Ok(t.show(&TaskText { task })),
                    None => Err(err(teams::TeamError::NoSuchTask(i.task_id).into())),
                }
            }
            "TaskUpdate" => {
                let i: UpdateInput = serde_json::from_value(input).map_err(|e| err(e.into()))?;
                let claim = store
                    .update_task(&i.task_id, &seat.member, &i.patch)
                    .map_err(|e| err(e.into()))?;
                if claim.completed_now {
                    self.task_hook(snap, HookEvent::TaskCompleted, seat, &claim.task)
                        .await;
                }
                Ok(t.show(&TaskUpdatedText { task: claim.task }))
            }
            other => Err(t.show(&super::texts::NoSuchTool {
                name: other.to_string(),
            })),
        }
    }

    /// TaskCreated / TaskCompleted hooks (matcher: the team's name).
    async fn task_hook(
        &self,
        snap: &Snapshot,
        event: HookEvent,
        seat: &TeamSeat,
        task: &teams::TeamTask,
    ) {
        let hooks = self.hooks_for(snap, event, &seat.store.name);
        if hooks.is_empty() {
            return;
        }
        let mut m = self.hook_input(event);
        m.insert("team_name".into(), json!(seat.store.name));
        m.insert("teammate_name".into(), json!(seat.member));
        m.insert("task_id".into(), json!(task.id));
        m.insert("task_subject".into(), json!(task.subject));
        m.insert("task_description".into(), json!(task.description));
        let fired = fire(&hooks, event, &Value::Object(m), &self.hook_place(snap)).await;
        for b in fired.blocks {
            tracing::warn!("{} hook: {b}", event.as_str());
        }
    }

    /// Whether SendMessage `to` is a team address for this session: `*`,
    /// `team-lead`, or a member's name.
    pub(super) fn is_team_address(&self, to: &str) -> bool {
        let Some(seat) = &self.seat() else {
            return false;
        };
        to == teams::BROADCAST
            || to == teams::LEAD
            || seat
                .store
                .team()
                .is_ok_and(|t| t.members.iter().any(|m| m.name == to))
    }

    /// SendMessage to a team address: into the recipients' mailboxes.
    pub(super) fn team_send(
        &self,
        snap: &Snapshot,
        to: &str,
        text: &str,
        kind: Option<&str>,
        approve: Option<bool>,
    ) -> Result<String, String> {
        let t = &snap.templates;
        let err = |problem: TeamProblem| t.show(&TeamFailed { problem });
        let Some(seat) = &self.seat() else {
            return Err(t.show(&NotInTeam {
                tool: "SendMessage".into(),
            }));
        };
        let kind = kind.unwrap_or(KINDS[0]);
        if !KINDS.contains(&kind) {
            return Err(t.show(&BadMessageType {
                kind: kind.into(),
                expected: KINDS.join(", "),
            }));
        }
        // The lead answers one teammate's plan, approving it or not.
        let approve = if kind == PLAN_RESPONSE {
            let not_lead = !seat.is_lead();
            let not_one_teammate = to == teams::BROADCAST || to == teams::LEAD;
            if not_lead || not_one_teammate || approve.is_none() {
                return Err(t.show(&BadPlanResponse {
                    not_lead,
                    not_one_teammate,
                    no_verdict: approve.is_none(),
                }));
            }
            approve
        } else {
            None
        };
        let recipients = seat
            .store
            .send_verdict(&seat.member, to, text, kind, approve)
            .map_err(|e| err(e.into()))?;
        if recipients.is_empty() {
            return Err(t.show(&NoRecipient {}));
        }
        Ok(t.show(&MessageSent {
            recipients: recipients.join(", "),
        }))
    }

    /// Unread team messages for this session, as text blocks (marked read).
    /// A `shutdown_request` to a teammate makes it stop after this turn.
    pub(super) fn team_incoming(&self) -> Vec<ContentBlock> {
        let Some(seat) = &self.seat() else {
            return Vec::new();
        };
        let messages = match seat.store.take_unread(&seat.member) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("team {}: {e}", seat.store.name);
                return Vec::new();
            }
        };
        if messages.is_empty() {
            return Vec::new();
        }
        let snap = self.engine.snapshot.load_full();
        messages
            .into_iter()
            .map(|m| {
                if m.kind == KINDS[1] && !seat.is_lead() {
                    self.shutdown.store(true, Ordering::SeqCst);
                }
                // Only the lead's approval ends a teammate's plan mode.
                let approve = (m.kind == PLAN_RESPONSE).then_some(m.approve).flatten();
                if approve == Some(true) && m.from == teams::LEAD && seat.after_plan.is_some() {
                    self.plan_approved.store(true, Ordering::SeqCst);
                }
                let kind = (m.kind != KINDS[0]).then(|| m.kind.clone());
                ContentBlock::text(snap.templates.show(&TeamMessageText {
                    from: m.from,
                    text: m.text,
                    kind,
                    approve,
                }))
            })
            .collect()
    }

    /// The lead with a team file, before its turn loads the snapshot: a
    /// team file changed since the snapshot was read is read now by a
    /// rebuild of the snapshot (what the file watcher does a moment later),
    /// so that a member added there joins at this turn.
    pub(super) async fn catch_up_team_file(&self) {
        if !self.seat().is_some_and(|s| s.is_lead() && s.from_file) {
            return;
        }
        let Some(catch_up) = self.engine.catch_up.clone() else {
            return;
        };
        let dirs = vec![self.spec.cwd.join(crate::catalog::teams::TEAMS_DIR)];
        if tokio::task::spawn_blocking(move || catch_up(&dirs))
            .await
            .is_err()
        {
            tracing::warn!("the snapshot was not brought up to date with the team file");
        }
    }

    /// The lead with a team file: starts every member the file names (as
    /// `snap` has it) that has not joined from this session yet (at the
    /// first turn, and after the file gained a member). A file that no
    /// longer validates was reported when the snapshot was built, and
    /// its last good form counts.
    pub(super) async fn sync_team_file(&self, snap: &Arc<Snapshot>) {
        let Some(seat) = self.seat().filter(|s| s.is_lead() && s.from_file) else {
            return;
        };
        let Some(file) = snap.teams.get(&seat.store.name) else {
            return;
        };
        // Broken since the session started: said once per snapshot, with
        // the position; the last good form counts meanwhile.
        if !file.errors.is_empty()
            && self
                .team_file_reported
                .swap(snap.generation, std::sync::atomic::Ordering::SeqCst)
                != snap.generation
        {
            for d in &file.errors {
                tracing::warn!("{d}; the team file as last read without errors counts");
            }
        }
        let Some(def) = &file.def else {
            return;
        };
        let Ok(team) = seat.store.team() else {
            return;
        };
        for m in &def.members {
            let joined = team
                .members
                .iter()
                .any(|x| x.name == m.name && x.session_id == self.engine.session_id);
            if joined {
                continue;
            }
            let input = AgentInput {
                description: m.name.clone(),
                prompt: m.prompt.clone(),
                subagent_type: m.agent.clone(),
                name: Some(m.name.clone()),
                ..AgentInput::default()
            };
            if let Err(e) = self.spawn_teammate(snap, &input, &m.name).await {
                tracing::warn!("team file {}: member {}: {e}", def.path.display(), m.name);
            }
        }
    }

    /// The lead of a team, after an answer: waits while a teammate of this
    /// process is working (or has mail to read), until a message reaches
    /// its mailbox. `false`
    /// when no teammate works and no message waits (the lead may end).
    pub(super) async fn wait_for_team(&self) -> bool {
        let Some(seat) = self.seat().filter(TeamSeat::is_lead) else {
            return false;
        };
        loop {
            if seat.store.has_unread(&seat.member) {
                return true;
            }
            let working = self.teammates_working(&seat);
            if !working || self.cancel.is_cancelled() {
                return seat.store.has_unread(&seat.member);
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = self.cancel.cancelled() => return false,
            }
        }
    }

    /// Whether a teammate of this process is working or has mail to read.
    /// Its mail is looked at first, its status after, in a fresh read: a
    /// teammate marks itself active before it takes its mail, so one whose
    /// mail is gone by the first look shows active in the second (or, done
    /// already, has sent the lead its idle notice first). Read the other
    /// way round, a teammate that took its mail in between would seem idle
    /// with nothing to do, and the lead would end without it.
    fn teammates_working(&self, seat: &TeamSeat) -> bool {
        let mine = |m: &Member| {
            m.name != seat.member
                && m.session_id == self.engine.session_id
                && m.status != MemberStatus::Ended
        };
        let Ok(team) = seat.store.team() else {
            return false;
        };
        let names: Vec<&str> = team
            .members
            .iter()
            .filter(|m| mine(m))
            .map(|m| m.name.as_str())
            .collect();
        if names.iter().any(|n| seat.store.has_unread(n)) {
            return true;
        }
        seat.store.team().is_ok_and(|t| {
            t.members.iter().any(|m| {
                mine(m) && m.status == MemberStatus::Active && names.contains(&m.name.as_str())
            })
        })
    }

    /// An Agent call with `name` from a team's lead: starts a teammate.
    pub(super) async fn spawn_teammate(
        &self,
        snap: &Arc<Snapshot>,
        input: &AgentInput,
        name: &str,
    ) -> Result<(Vec<ToolResultContent>, Usage), String> {
        let t = &snap.templates;
        let err = |problem: TeamProblem| t.show(&TeamFailed { problem });
        let Some(seat) = &self.seat() else {
            return Err(t.show(&NotInTeam {
                tool: crate::agent_tool::AGENT_TOOL.into(),
            }));
        };
        if !seat.is_lead() {
            return Err(t.show(&TeammateCannotSpawn {}));
        }
        if let Some(asked) = input.team_name.as_deref().filter(|n| *n != seat.store.name) {
            return Err(t.show(&OtherTeam {
                team: seat.store.name.clone(),
                asked: asked.into(),
            }));
        }
        if !teams::valid_name(name) || name == teams::LEAD || name == teams::BROADCAST {
            return Err(err(teams::TeamError::BadName(name.into()).into()));
        }
        let available = self.engine.available_tools(snap);
        let parent = self.spawn_parent(&available, None);
        let plan = plan_teammate(snap, &parent, input, new_agent_id()).map_err(|r| r.text(t))?;
        let (mut spec, _) = plan.session(snap).map_err(|r| r.text(t))?;
        let team = seat.store.team().map_err(|e| err(e.into()))?;
        // A name in use by a live member gets a number.
        let taken = |n: &str| {
            team.members
                .iter()
                .any(|m| m.name == n && m.status != MemberStatus::Ended)
        };
        let mut member = name.to_string();
        let mut n = 2;
        while taken(&member) {
            member = format!("{name}-{n}");
            n += 1;
        }
        let agent_id = plan.agent_id.clone();
        let store = seat.store.clone();
        spec.team = Some(TeamSeat {
            store: store.clone(),
            member: member.clone(),
            from_file: false,
            after_plan: plan.after_plan,
        });
        let others: Vec<String> = team
            .members
            .iter()
            .filter(|m| m.name != teams::LEAD && m.status != MemberStatus::Ended)
            .map(|m| m.name.clone())
            .collect();
        let intro = t.show(&TeammateIntro {
            name: member.clone(),
            team: store.name.clone(),
            others: others.join(", "),
            prompt: input.prompt.clone(),
            plan_mode: plan.after_plan.is_some(),
        });
        store
            .join(Member {
                name: member.clone(),
                agent_id: agent_id.clone(),
                agent_type: plan.agent.name.clone(),
                status: MemberStatus::Active,
                session_id: self.engine.session_id.clone(),
                joined: now_rfc3339(),
            })
            .map_err(|e| err(e.into()))?;
        let transcript = Arc::new(match &self.engine.session_dir {
            Some(dir) => Transcript::open(
                super::resume::subagents_dir(dir).join(format!("agent-{agent_id}.jsonl")),
                &agent_id,
                Some(&self.spec.agent_id),
            ),
            None => Transcript::disabled(&agent_id, Some(&self.spec.agent_id)),
        });
        transcript.record_line(
            "spawn",
            &super::plan_record::SpawnLine::teammate(&plan, &store.name, &member),
        );
        let history: History = vec![Arc::new(Message::user(vec![ContentBlock::text(intro)]))];
        start_teammate(
            Arc::clone(&self.engine),
            spec,
            history,
            transcript,
            self.engine.team_cancel.child_token(),
        );
        Ok((
            text_content([t.show(&TeammateSpawned {
                agent_id,
                name: member,
                team_name: store.name,
            })]),
            Usage::default(),
        ))
    }
}

/// Runs a teammate: a turn, then idle until its mailbox has mail, then a
/// turn again; until it is shut down (a `shutdown_request` it has read, or
/// its process ending), its turn limit, or an error.
fn start_teammate(
    engine: Arc<Engine>,
    spec: SessionSpec,
    history: History,
    transcript: Arc<Transcript>,
    cancel: CancellationToken,
) {
    let Some(seat) = spec.team.clone() else {
        return;
    };
    let handles = Arc::clone(&engine);
    let handle = tokio::spawn(async move {
        let store: TeamStore = seat.store.clone();
        let me = seat.member.clone();
        for m in &history {
            transcript.message(m);
        }
        let mut session = Session::new(
            Arc::clone(&engine),
            spec,
            history,
            Arc::clone(&transcript),
            cancel.clone(),
        );
        loop {
            let _ = store.set_status(&me, MemberStatus::Active);
            let outcome = session.run().await;
            let snap = engine.snapshot.load_full();
            let failed = match &outcome {
                Err(super::RunError::Cancelled) => None,
                Err(e) => Some((e.to_string(), super::RunProblem::from(e))),
                Ok(o) => super::RunProblem::stopped(o.stop).map(|p| (o.stop.as_str().into(), p)),
            };
            if let Some((error, problem)) = failed {
                // The lead hears why a teammate stopped on its own.
                tracing::info!("teammate {me}: {error}");
                let notice = snap.templates.show(&EndedNotice {
                    name: me.clone(),
                    problem,
                });
                let _ = store.send(&me, teams::LEAD, &notice, KINDS[0]);
                break;
            }
            if outcome.is_err() || session.shutdown.load(Ordering::SeqCst) || cancel.is_cancelled()
            {
                break;
            }
            // TeammateIdle hooks: exit 2 keeps it working, with their words.
            if let Some(feedback) = teammate_idle_hooks(&session, &snap, &seat).await {
                session.push_blocks(vec![ContentBlock::text(feedback)]);
                continue;
            }
            // The lead hears of it first, then the member shows idle: a lead
            // that sees every member idle has the notice in its mailbox.
            let last = super::session::last_text(session.history()).map(|t| t.join("\n"));
            let notice = snap.templates.show(&IdleNotice {
                name: me.clone(),
                last,
            });
            if let Err(e) = store.send(&me, teams::LEAD, &notice, IDLE) {
                tracing::warn!("teammate {me}: {e}");
            }
            let _ = store.set_status(&me, MemberStatus::Idle);
            transcript.record("idle", json!({}));
            // Idle: woken by the next message in its mailbox.
            loop {
                if cancel.is_cancelled() {
                    break;
                }
                if store.has_unread(&me) {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    () = cancel.cancelled() => {}
                }
            }
            if cancel.is_cancelled() {
                break;
            }
            // Active before the mail is taken: a lead that saw this member
            // idle with no mail left would think the team done and end.
            let _ = store.set_status(&me, MemberStatus::Active);
            let incoming = session.team_incoming();
            session.push_blocks(incoming);
            session.apply_plan_approval();
        }
        let _ = store.set_status(&me, MemberStatus::Ended);
        transcript.record("result", json!({"status": "ended"}));
    });
    handles
        .team_handles
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(handle);
}

async fn teammate_idle_hooks(
    session: &Session,
    snap: &Snapshot,
    seat: &TeamSeat,
) -> Option<String> {
    let event = HookEvent::TeammateIdle;
    let hooks = session.hooks_for(snap, event, &seat.member);
    if hooks.is_empty() {
        return None;
    }
    let mut m = session.hook_input(event);
    m.insert("team_name".into(), json!(seat.store.name));
    m.insert("teammate_name".into(), json!(seat.member));
    let fired = fire(&hooks, event, &Value::Object(m), &session.hook_place(snap)).await;
    if fired.blocks.is_empty() {
        return None;
    }
    Some(snap.templates.show(&super::texts::HookStopFeedback {
        event: event.as_str().to_string(),
        reason: fired.blocks.join("\n"),
    }))
}
