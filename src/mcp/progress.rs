//! A server's progress notifications reach the call that asked for them in
//! the order the server sent them, answers included, and none is lost.
//!
//! rmcp hands each incoming notification to the client handler on a task
//! of its own, while it delivers an answer from its read loop at once; a
//! report the server sent just before its answer could so reach the call
//! after the call had ended, and be lost. [`InOrder`] wraps the transport
//! and gives each progress notification to [`Progress`] as it is read,
//! before the read loop sees the next message: by the time a call has its
//! answer, every report sent before it waits in the call's subscription.
//! (The notification still goes on to rmcp, whose handler ignores it.)
//!
//! A call learns its progress token when its request is on its way, so a
//! quick server may report before the call subscribes: [`Progress`] keeps
//! the last few reports nobody has subscribed to, and a subscription starts
//! with those of its token.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ProgressNotificationParam, ProgressToken, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};
use tokio::sync::mpsc;

/// How many reports for tokens nobody has subscribed to are kept (the
/// oldest go first); reports for calls that asked for none end up here too.
const EARLY_MAX: usize = 16;

/// Room in a subscription: the early reports always fit.
const CHANNEL: usize = 2 * EARLY_MAX;

/// Routes progress notifications to the call that subscribed to their
/// token.
#[derive(Clone, Default)]
pub struct Progress {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    subscribers: HashMap<ProgressToken, mpsc::Sender<ProgressNotificationParam>>,
    early: VecDeque<ProgressNotificationParam>,
}

impl Progress {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reports for `token` from now on, after those that came before.
    pub fn subscribe(&self, token: ProgressToken) -> Subscription {
        let (tx, rx) = mpsc::channel(CHANNEL);
        let mut state = self.state();
        let (mine, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut state.early)
            .into_iter()
            .partition(|p| p.progress_token == token);
        state.early = rest;
        for p in mine {
            // (At most EARLY_MAX, into an empty channel twice as large.)
            let _ = tx.try_send(p);
        }
        state.subscribers.insert(token.clone(), tx);
        Subscription {
            token,
            rx,
            state: Arc::clone(&self.state),
        }
    }

    /// Hands `p` to its subscriber, waiting while the subscriber's channel
    /// is full, or keeps it for a subscriber to come. Cancel-safe: a
    /// dropped dispatch has handed on nothing.
    async fn dispatch(&self, p: ProgressNotificationParam) {
        let sender = {
            let mut state = self.state();
            match state.subscribers.get(&p.progress_token) {
                Some(s) => s.clone(),
                None => {
                    if state.early.len() == EARLY_MAX {
                        state.early.pop_front();
                    }
                    state.early.push_back(p);
                    return;
                }
            }
        };
        // A subscription dropped meanwhile: its call has ended.
        let _ = sender.send(p).await;
    }
}

/// One call's progress reports; dropping it unsubscribes.
pub struct Subscription {
    token: ProgressToken,
    rx: mpsc::Receiver<ProgressNotificationParam>,
    state: Arc<Mutex<State>>,
}

impl Subscription {
    /// The next report (never `None` while subscribed).
    pub async fn next(&mut self) -> Option<ProgressNotificationParam> {
        self.rx.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .subscribers
            .remove(&self.token);
    }
}

/// A transport that dispatches progress notifications as it reads them.
pub struct InOrder<T> {
    inner: T,
    progress: Progress,
    /// A progress notification read and not yet handed on (see
    /// [`InOrder::receive`]).
    held: Option<RxJsonRpcMessage<RoleClient>>,
}

/// Wraps what rmcp would accept as a client transport (a transport, a
/// child process, a byte stream).
pub fn in_order<T, E, A>(
    transport: T,
    progress: Progress,
) -> InOrder<impl Transport<RoleClient, Error = E>>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    InOrder {
        inner: transport.into_transport(),
        progress,
        held: None,
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for InOrder<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    /// Cancel-safe, as rmcp's read loop needs (it selects over this
    /// future): a progress notification waits in `held` while the
    /// dispatch waits for room in the call's subscription, so a dropped
    /// read leaves it to the next.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = match self.held.take() {
            Some(m) => m,
            None => self.inner.receive().await?,
        };
        let JsonRpcMessage::Notification(n) = &message else {
            return Some(message);
        };
        let ServerNotification::ProgressNotification(p) = &n.notification else {
            return Some(message);
        };
        let params = p.params.clone();
        self.held = Some(message);
        self.progress.dispatch(params).await;
        self.held.take()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn report(t: i64, step: u32) -> ProgressNotificationParam {
        ProgressNotificationParam::new(token(t), f64::from(step))
    }

    #[tokio::test]
    async fn a_subscription_starts_with_the_reports_that_came_before_it() {
        let progress = Progress::default();
        progress.dispatch(report(1, 1)).await;
        progress.dispatch(report(2, 1)).await;
        progress.dispatch(report(1, 2)).await;
        let mut sub = progress.subscribe(token(1));
        progress.dispatch(report(1, 3)).await;
        for step in 1..=3 {
            assert_eq!(sub.next().await.unwrap().progress, f64::from(step));
        }
        assert!(sub.rx.try_recv().is_err(), "token 2's report is not ours");
        // The other token's report is still kept for its call.
        let mut other = progress.subscribe(token(2));
        assert_eq!(other.next().await.unwrap().progress, 1.0);
    }

    #[tokio::test]
    async fn reports_nobody_subscribes_to_are_bounded_and_a_dropped_call_gets_none() {
        let progress = Progress::default();
        for step in 0..100 {
            progress.dispatch(report(7, step)).await;
        }
        assert_eq!(progress.state().early.len(), EARLY_MAX);
        let mut sub = progress.subscribe(token(7));
        // The newest are kept.
        assert_eq!(
            sub.next().await.unwrap().progress,
            f64::from(100 - EARLY_MAX as u32)
        );
        drop(sub);
        assert!(progress.state().subscribers.is_empty());
        progress.dispatch(report(7, 200)).await;
        assert_eq!(progress.state().early.len(), 1);
    }
}
