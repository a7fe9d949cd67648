//! Where a background child runs. By default in this process
//! ([`super::spawn`] starts it as a tokio task); with a [`TaskBackend`]
//! set on the engine (the NATS worker fleet, `crate::fleet`), a
//! background child that is registered and has its transcript and meta
//! file written is handed to the backend instead, which runs it elsewhere
//! and ends the task (through [`super::tasks::TaskRegistry::finish`]) when
//! its one completion notice arrives.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::Engine;
use super::plan::SpawnPlan;
use super::problem::QueueFailed;
use super::tasks::Task;

/// Runs background children somewhere other than this process.
pub trait TaskBackend: Send + Sync {
    /// Takes over `task` (registered, running, its transcript and meta
    /// file written), made from `plan`. `Ok` once the task is durably
    /// queued; `Err` when it could not be, and then the caller ends the
    /// task `failed` (the model told the typed problem, people the
    /// detail), so it still notifies once.
    fn submit<'a>(
        &'a self,
        engine: &'a Arc<Engine>,
        task: &'a Arc<Task>,
        plan: &'a SpawnPlan,
    ) -> BoxFuture<'a, Result<(), QueueFailed>>;

    /// Runs `task` again (SendMessage after it ended: restarted, its
    /// message the last line of its transcript). `Ok` once queued; `Err`
    /// when it could not be, and then the caller ends the task `failed`
    /// as for [`TaskBackend::submit`].
    fn resume<'a>(
        &'a self,
        engine: &'a Arc<Engine>,
        task: &'a Arc<Task>,
    ) -> BoxFuture<'a, Result<(), QueueFailed>>;

    /// The backend's name for meta files and `tasks list` (`nats`).
    fn name(&self) -> &'static str;
}
