//! A server's progress notifications reach the call that asked for them in
//! the order the server sent them, answers included, and none is lost to timing.
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
//! A call learns its progress token only once its request is on its way,
//! and a quick server may report before the call subscribes. So the
//! transport also notes the token of each `tools/call` request as it sends
//! it, before the server can see it: reports for a noted token are kept
//! until the call subscribes (or says it wants none).
//!
//! Being the one wrapper every client transport passes through, [`InOrder`]
//! is also where a server that ends the connection on its own is noticed
//! ([`InOrder::when_gone`]): its read ends while cadre has not closed it.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{
    ClientRequest, GetMeta, JsonRpcMessage, ProgressNotificationParam, ProgressToken,
    ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};
use tokio::sync::mpsc;

/// How many reports are kept for a call that has not subscribed yet (the
/// oldest go first).
const KEPT_PER_CALL: usize = 256;

/// How many calls may wait to subscribe at once (a call dropped before it
/// subscribed, or one that wanted no reports before its request left,
/// leaves its entry; the oldest go first).
const WAITING_CALLS: usize = 64;

/// Room in a subscription besides the reports kept for it.
const CHANNEL: usize = 32;

/// Routes progress notifications to the call that subscribed to their
/// token.
#[derive(Clone, Default)]
pub struct Progress {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    subscribers: HashMap<ProgressToken, mpsc::Sender<ProgressNotificationParam>>,
    /// Calls sent and not subscribed yet, with their reports so far.
    waiting: HashMap<ProgressToken, VecDeque<ProgressNotificationParam>>,
    /// `waiting`'s tokens, oldest first.
    order: VecDeque<ProgressToken>,
}

impl Progress {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call with `token` is being sent: its reports are kept for it.
    fn expect(&self, token: ProgressToken) {
        let mut state = self.state();
        if state.subscribers.contains_key(&token) {
            // (The call subscribed before its request left.)
            return;
        }
        if state.order.len() == WAITING_CALLS
            && let Some(oldest) = state.order.pop_front()
        {
            state.waiting.remove(&oldest);
        }
        state.order.push_back(token.clone());
        state.waiting.insert(token, VecDeque::new());
    }

    fn stop_waiting(
        state: &mut State,
        token: &ProgressToken,
    ) -> VecDeque<ProgressNotificationParam> {
        state.order.retain(|t| t != token);
        state.waiting.remove(token).unwrap_or_default()
    }

    /// The reports for `token`: those kept since its call was sent, then
    /// the ones to come.
    pub fn subscribe(&self, token: ProgressToken) -> Subscription {
        let mut state = self.state();
        let kept = Self::stop_waiting(&mut state, &token);
        let (tx, rx) = mpsc::channel(kept.len() + CHANNEL);
        for p in kept {
            // (The channel has room for every kept one.)
            let _ = tx.try_send(p);
        }
        state.subscribers.insert(token.clone(), tx);
        Subscription {
            token,
            rx,
            state: Arc::clone(&self.state),
        }
    }

    /// The call with `token` wants no reports.
    pub fn ignore(&self, token: &ProgressToken) {
        Self::stop_waiting(&mut self.state(), token);
    }

    /// Hands `p` to its subscriber, waiting while the subscriber's channel
    /// is full, or keeps it for a call that is still to subscribe; a
    /// report for no known call is dropped. Cancel-safe: a dropped
    /// dispatch has handed on nothing.
    async fn dispatch(&self, p: ProgressNotificationParam) {
        let sender = {
            let mut state = self.state();
            match state.subscribers.get(&p.progress_token) {
                Some(s) => s.clone(),
                None => {
                    if let Some(kept) = state.waiting.get_mut(&p.progress_token) {
                        if kept.len() == KEPT_PER_CALL {
                            kept.pop_front();
                        }
                        kept.push_back(p);
                    }
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

/// A transport that dispatches progress notifications as it reads them,
/// and tells when the server ends the connection on its own. Every
/// client transport cadre makes (stdio, SSE, streamable HTTP, an SDK
/// client's in-process server) is one.
pub struct InOrder<T> {
    inner: T,
    progress: Progress,
    /// A progress notification read and not yet handed on (see
    /// [`InOrder::receive`]).
    held: Option<RxJsonRpcMessage<RoleClient>>,
    /// Called once if the transport ends (a stdio server exited or closed
    /// its stdout, an SSE stream ended, rmcp's HTTP worker stopped) before
    /// cadre closes it.
    on_gone: Option<Box<dyn FnOnce() + Send + Sync>>,
    /// cadre is closing it: its end is no news.
    closing: bool,
}

impl<T> InOrder<T> {
    /// `gone` is called once if the server ends the connection while
    /// cadre still uses it.
    pub fn when_gone(mut self, gone: impl FnOnce() + Send + Sync + 'static) -> Self {
        self.on_gone = Some(Box::new(gone));
        self
    }
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
        on_gone: None,
        closing: false,
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for InOrder<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    /// Notes a `tools/call`'s progress token before the request leaves.
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(r) = &item
            && let ClientRequest::CallToolRequest(_) = &r.request
            && let Some(token) = r.request.get_meta().get_progress_token()
        {
            self.progress.expect(token);
        }
        self.inner.send(item)
    }

    /// Cancel-safe, as rmcp's read loop needs (it selects over this
    /// future): a progress notification waits in `held` while the
    /// dispatch waits for room in the call's subscription, so a dropped
    /// read leaves it to the next.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = match self.held.take() {
            Some(m) => m,
            None => match self.inner.receive().await {
                Some(m) => m,
                None => {
                    if !self.closing
                        && let Some(gone) = self.on_gone.take()
                    {
                        gone();
                    }
                    return None;
                }
            },
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
        self.closing = true;
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
    async fn a_call_gets_the_reports_that_came_before_it_subscribed() {
        let progress = Progress::default();
        progress.expect(token(1));
        progress.expect(token(2));
        for step in 1..=50 {
            progress.dispatch(report(1, step)).await;
        }
        progress.dispatch(report(2, 1)).await;
        progress.dispatch(report(3, 1)).await;
        let mut sub = progress.subscribe(token(1));
        progress.dispatch(report(1, 51)).await;
        for step in 1..=51 {
            assert_eq!(sub.next().await.unwrap().progress, f64::from(step));
        }
        assert!(sub.rx.try_recv().is_err(), "token 2's report is not ours");
        let mut other = progress.subscribe(token(2));
        assert_eq!(other.next().await.unwrap().progress, 1.0);
        // Token 3 was never sent: its report went nowhere.
        assert!(progress.subscribe(token(3)).rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn what_is_kept_is_bounded_and_a_call_that_ends_leaves_nothing() {
        let progress = Progress::default();
        for t in 0..100 {
            progress.expect(token(t));
        }
        assert_eq!(progress.state().waiting.len(), WAITING_CALLS);
        assert_eq!(progress.state().order.len(), WAITING_CALLS);
        for step in 0..1000 {
            progress.dispatch(report(99, step)).await;
        }
        assert_eq!(progress.state().waiting[&token(99)].len(), KEPT_PER_CALL);
        let mut sub = progress.subscribe(token(99));
        // The newest are kept.
        assert_eq!(
            sub.next().await.unwrap().progress,
            f64::from(1000 - KEPT_PER_CALL as u32)
        );
        drop(sub);
        progress.ignore(&token(98));
        let state = progress.state();
        assert!(state.subscribers.is_empty());
        assert_eq!(state.waiting.len(), WAITING_CALLS - 2);
        assert_eq!(state.order.len(), WAITING_CALLS - 2);
    }
}
