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
use super::tasks::Task;

/// Runs background children somewhere other than this process.
pub trait TaskBackend: Send + Sync {
    /// Takes over `task` (registered, running, its transcript and meta
    /// file written), made from `plan`. `Ok` once the task is durably
    /// queued; `Err` (a sentence) when it could not be, and then the caller
    /// ends the task `failed` with that error, so it still notifies once.
    fn submit<'a>(
        &'a self,
        engine: &'a Arc<Engine>,
        task: &'a Arc<Task>,
        plan: &'a SpawnPlan,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Runs `task` again (SendMessage after it ended: restarted, its
    /// message the last line of its transcript). `Ok` once queued; `Err`
    /// (a sentence) when it could not be, and then the caller ends the
    /// task `failed` with that error.
    fn resume<'a>(
        &'a self,
        engine: &'a Arc<Engine>,
        task: &'a Arc<Task>,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// The backend's name for meta files and `tasks list` (`nats`).
    fn name(&self) -> &'static str;
}
