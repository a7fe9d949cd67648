//! Background sub-agents on other hosts: the NATS JetStream backend of the
//! runtime's task-backend trait ([`crate::runtime::backend::TaskBackend`]),
//! `cadre worker`, leases, fenced task state and exactly-once notices.
//!
//! The broker does the hard parts; cadre schedules nothing itself:
//! - a **work-queue stream** holds each background spawn's plan, published
//!   with the agent id as its message id (a retried publish is dropped);
//!   one durable pull consumer per pool hands each plan to one worker at a
//!   time, its ack-wait is the lease, and its `max_ack_pending` bounds how
//!   many tasks run across the fleet (`agents.max_concurrent`);
//! - a **key-value bucket** holds each task's state, and every transition
//!   is a compare-and-set on the entry's revision, so a worker whose lease
//!   was taken over can neither renew nor finish the task;
//! - a **notices stream** keeps at most one message per task subject and
//!   refuses a second one, so a task notifies its parent once whatever
//!   fails;
//! - progress lines, SendMessage and TaskStop travel on plain subjects.
//!
//! The transcript folder is shared (`transcripts.dir`, by default the
//! user's folder for the project under `~/.claude/projects/`, so a worker
//! runs as the same user, or with the same `CLAUDE_CONFIG_DIR`, in the
//! same project folder, or both name one `transcripts.dir`): the
//! parent writes a child's first lines, a worker appends as it runs, and a
//! worker that takes over a task whose worker died continues from the file
//! (tool calls already recorded are not run again). This module knows the
//! runtime only through its public API: it runs a child with
//! [`crate::runtime::spawn::start_task`] on an engine the worker built.

mod broker;
pub mod git;
pub mod lease;
pub mod lines;
pub mod parent;
pub mod state;
pub mod wire;
pub mod worker;

pub use broker::{Broker, FleetError, Names};
