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
//! A worker needs only the broker, its own settings and a clone of the
//! repository: a remote child's transcript travels line by line through a
//! stream (`lines`: the parent publishes its first lines, the worker its
//! copy's new ones, the parent appends them to its own copy), and a
//! worktree child's starting commit and its result branch travel as git
//! bundles in the object store (`git`). With `shared_folder = true` the
//! worker reads and appends the transcript in the parent's session folder
//! and makes worktrees in the shared repository instead. A worker that
//! takes over a task whose worker died continues from the transcript (tool
//! calls already recorded are not run again). This module knows the
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
