//! A task's lease and its end, as a worker holds them: claiming it
//! (compare-and-set to `running`), renewing the lease, and finishing it
//! (compare-and-set to its end state, then the one notice, then the ack).
//! Every bucket write names the revision this worker last saw, so a worker
//! whose lease was taken over is refused instead of overwriting.

use std::time::{Duration, Instant};

use async_nats::jetstream;

use super::broker::{Broker, FleetError};
use super::state::{FleetStatus, TaskRecord, now_ms};
use super::wire::{Notice, TaskPlan};

/// What a claim found.
pub(super) enum Claim {
    /// This worker holds the lease: the record written and its revision.
    Held(TaskRecord, u64),
    /// The task has ended already (its notice is republished).
    Ended(TaskRecord),
    /// Another writer kept winning; try later.
    Busy,
    /// The plan is of an earlier run than the task's state (the task was
    /// resumed since): nothing to do.
    Stale,
}

pub(super) async fn claim(broker: &Broker, me: &str, plan: &TaskPlan) -> Result<Claim, FleetError> {
    let kv = &broker.state;
    for _ in 0..5 {
        let entry = kv.entry(&plan.agent_id).await.map_err(FleetError::broker)?;
        let (current, revision) = match entry {
            Some(e) if e.operation == jetstream::kv::Operation::Put => {
                match serde_json::from_slice::<TaskRecord>(&e.value) {
                    Ok(r) => (Some(r), e.revision),
                    Err(err) => {
                        tracing::warn!(
                            "task {}: unreadable state ({err}); taken over",
                            plan.agent_id
                        );
                        (None, e.revision)
                    }
                }
            }
            Some(e) => (None, e.revision),
            None => (None, 0),
        };
        let base = match current {
            Some(r) if r.run > plan.run => return Ok(Claim::Stale),
            Some(r) if r.status.is_end() && r.run == plan.run => return Ok(Claim::Ended(r)),
            // A state of an earlier run: the parent's reopening did not
            // land; this plan's run starts from it.
            Some(r) if r.run < plan.run => TaskRecord {
                run: plan.run,
                ..queued_record(plan)
            },
            Some(r) => r,
            None => queued_record(plan),
        };
        let Ok(next) = base.claim(me, now_ms()) else {
            continue;
        };
        let bytes = serde_json::to_vec(&next).map_err(FleetError::broker)?;
        let written = if revision == 0 {
            kv.create(&plan.agent_id, bytes.into())
                .await
                .map_err(|e| e.to_string())
        } else {
            kv.update(&plan.agent_id, bytes.into(), revision)
                .await
                .map_err(|e| e.to_string())
        };
        match written {
            Ok(rev) => return Ok(Claim::Held(next, rev)),
            Err(e) => tracing::debug!("task {}: claim lost a race ({e})", plan.agent_id),
        }
    }
    Ok(Claim::Busy)
}

/// The state of a task whose plan is published (the parent writes it; a
/// worker writes it when the parent's write did not land).
pub fn queued_record(plan: &TaskPlan) -> TaskRecord {
    TaskRecord {
        agent_id: plan.agent_id.clone(),
        session_id: plan.session_id.clone(),
        parent_agent_id: plan.parent_agent_id.clone(),
        pool: plan.pool.clone(),
        agent_type: plan.spawn.agent.name.clone(),
        description: plan.meta.description.clone().unwrap_or_default(),
        status: FleetStatus::Queued,
        owner: None,
        attempt: 0,
        queued_at_ms: now_ms(),
        lease_at_ms: None,
        ended_at_ms: None,
        notice: None,
        run: plan.run,
    }
}

/// The message id of run `run` of task `agent` (its plan's and its
/// notice's): the agent id for its spawn, `AGENT.rN` for a resumed run.
pub fn run_message_id(agent: &str, run: u32) -> String {
    match run {
        0 => agent.to_string(),
        n => format!("{agent}.r{n}"),
    }
}

/// Publishes a task's notice: at most one per task subject is stored, so
/// a second publish (a retry, a stalled worker) is refused by the stream.
/// `Ok` when the notice is in the stream, whoever put it there.
pub async fn publish_notice(broker: &Broker, notice: &Notice) -> Result<(), FleetError> {
    let subject = broker
        .names
        .run_notice_subject(&notice.session_id, &notice.agent_id, notice.run);
    let payload = serde_json::to_vec(notice).map_err(FleetError::broker)?;
    let sending = Instant::now();
    let sent = broker
        .js
        .send_publish(
            subject.clone(),
            jetstream::message::PublishMessage::build()
                .payload(payload.into())
                .message_id(run_message_id(&notice.agent_id, notice.run)),
        )
        .await;
    let acked = match sent {
        Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match acked {
        Ok(()) => Ok(()),
        Err(e) => {
            if sending.elapsed() > Duration::from_secs(1) {
                tracing::warn!(
                    "task {}: publishing its notice failed after {:?} ({e})",
                    notice.agent_id,
                    sending.elapsed()
                );
            }
            // Refused because one is already stored: that one counts.
            let stream = broker
                .js
                .get_stream(&broker.names.notices_stream)
                .await
                .map_err(FleetError::broker)?;
            match stream.get_last_raw_message_by_subject(&subject).await {
                Ok(_) => Ok(()),
                Err(_) => Err(FleetError::Broker(format!("publishing the notice: {e}"))),
            }
        }
    }
}

pub(super) enum Renewal {
    Renewed(Box<TaskRecord>, u64),
    Lost,
    Unreachable(String),
}

pub(super) async fn renew(
    broker: &Broker,
    me: &str,
    id: &str,
    record: &TaskRecord,
    revision: u64,
) -> Renewal {
    let Ok(next) = record.renew(me, now_ms()) else {
        return Renewal::Lost;
    };
    let Ok(bytes) = serde_json::to_vec(&next) else {
        return Renewal::Unreachable("state not serialisable".into());
    };
    match broker.state.update(id, bytes.into(), revision).await {
        Ok(rev) => Renewal::Renewed(Box::new(next), rev),
        Err(e) if e.kind() == jetstream::kv::UpdateErrorKind::WrongLastRevision => Renewal::Lost,
        Err(e) => Renewal::Unreachable(e.to_string()),
    }
}

/// Moves the task to its end state (compare-and-set on the revision this
/// worker last wrote), publishes its notice, then acks the plan. A refused
/// write means another worker holds the task: nothing is published.
pub(super) async fn finish(
    broker: &Broker,
    me: &str,
    plan: &TaskPlan,
    msg: &jetstream::Message,
    record: TaskRecord,
    revision: u64,
) {
    let id = &plan.agent_id;
    let Some(notice) = record.notice.clone() else {
        return;
    };
    let next = match record.finish(me, notice.status, notice.clone(), now_ms()) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!("task {id}: {e}");
            return;
        }
    };
    let Ok(bytes) = serde_json::to_vec(&next) else {
        return;
    };
    // The broker may be restarting: retry for about one lease.
    let deadline = Instant::now() + broker.lease();
    loop {
        match broker
            .state
            .update(id, bytes.clone().into(), revision)
            .await
        {
            Ok(_) => break,
            Err(e) if e.kind() == jetstream::kv::UpdateErrorKind::WrongLastRevision => {
                tracing::warn!("task {id}: finishing refused (another worker holds it now)");
                return;
            }
            Err(e) if Instant::now() < deadline => {
                tracing::warn!("task {id}: finishing: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                // The plan is redelivered; the next worker finds the
                // transcript ended and finishes from it.
                tracing::warn!("task {id}: finishing: {e}; left for redelivery");
                return;
            }
        }
    }
    let deadline = Instant::now() + broker.lease();
    loop {
        match publish_notice(broker, &notice).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                tracing::warn!("task {id}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                // Redelivered: the next worker finds the end state and
                // publishes the notice from it.
                tracing::warn!("task {id}: {e}; left for redelivery");
                return;
            }
        }
    }
    for _ in 0..5 {
        if msg.double_ack().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::info!("task {id}: {} on {}", notice.status.as_str(), me);
}
