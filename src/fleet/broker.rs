//! The connection to the NATS server and the JetStream objects cadre uses:
//! the work-queue stream of task plans, the notices stream, the task-state
//! bucket, and each pool's consumer. Everything is created on first use
//! with the settings' names; an existing object is used as it is.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, stream};

use crate::config::DistributedSettings;
use crate::runtime::{QueueFailed, QueueProblem};

/// Why talking to the broker failed, as a sentence for the user. The
/// model is told [`FleetError::queue_failed`]'s typed problem instead.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FleetError {
    #[error("NATS server {url}: {message}")]
    Connect { url: String, message: String },
    #[error("NATS JetStream: {0}")]
    Broker(String),
    #[error(
        "background tasks on workers need transcripts (`transcripts.enabled`): a worker starts from the child's transcript"
    )]
    NoTranscripts,
    #[error("{0}")]
    Invalid(String),
}

impl FleetError {
    pub(crate) fn broker(e: impl std::fmt::Display) -> FleetError {
        FleetError::Broker(e.to_string())
    }

    /// A task this error kept from being queued: the typed problem the
    /// model is told, and this error's own words for people.
    pub(crate) fn queue_failed(&self) -> QueueFailed {
        let problem = match self {
            FleetError::Connect { .. } => QueueProblem::Unreachable,
            FleetError::Broker(_) => QueueProblem::Broker,
            FleetError::NoTranscripts => QueueProblem::NoTranscripts,
            FleetError::Invalid(_) => QueueProblem::Settings,
        };
        QueueFailed {
            problem,
            detail: self.to_string(),
        }
    }
}

/// The names of every subject, stream, bucket and consumer, from the
/// settings. A subject token (pool, session id, agent id) must not hold a
/// dot, a wildcard or white space.
#[derive(Debug, Clone)]
pub struct Names {
    pub prefix: String,
    pub tasks_stream: String,
    pub notices_stream: String,
    pub bucket: String,
    pub lines_stream: String,
    pub git_bucket: String,
}

impl Names {
    pub fn of(s: &DistributedSettings) -> Result<Names, FleetError> {
        for (what, v) in [
            ("distributed.subject_prefix", &s.subject_prefix),
            ("distributed.tasks_stream", &s.tasks_stream),
            ("distributed.notices_stream", &s.notices_stream),
            ("distributed.state_bucket", &s.state_bucket),
            ("distributed.pool", &s.pool),
            ("distributed.lines_stream", &s.lines_stream),
            ("distributed.git_bucket", &s.git_bucket),
        ] {
            check_token(what, v)?;
        }
        Ok(Names {
            prefix: s.subject_prefix.clone(),
            tasks_stream: s.tasks_stream.clone(),
            notices_stream: s.notices_stream.clone(),
            bucket: s.state_bucket.clone(),
            lines_stream: s.lines_stream.clone(),
            git_bucket: s.git_bucket.clone(),
        })
    }

    /// Where plans for `pool` are published.
    pub fn task_subject(&self, pool: &str) -> String {
        format!("{}.tasks.{pool}", self.prefix)
    }

    /// The one notice of task `agent` of session `session`.
    pub fn notice_subject(&self, session: &str, agent: &str) -> String {
        format!("{}.notices.{session}.{agent}", self.prefix)
    }

    /// The one notice of run `run` of task `agent` (see
    /// [`super::wire::TaskPlan::run`]): run 0's is [`Names::notice_subject`].
    pub fn run_notice_subject(&self, session: &str, agent: &str, run: u32) -> String {
        match run {
            0 => self.notice_subject(session, agent),
            n => format!("{}.notices.{session}.{agent}.r{n}", self.prefix),
        }
    }

    /// Every notice of session `session`.
    pub fn notices_of(&self, session: &str) -> String {
        format!("{}.notices.{session}.>", self.prefix)
    }

    /// SendMessage and TaskStop for a running task (request/reply).
    pub fn control_subject(&self, agent: &str) -> String {
        format!("{}.control.{agent}", self.prefix)
    }

    /// Progress lines of a session's remote tasks.
    pub fn progress_subject(&self, session: &str, agent: &str) -> String {
        format!("{}.progress.{session}.{agent}", self.prefix)
    }

    /// The transcript lines of task `agent` of session `session`.
    pub fn lines_subject(&self, session: &str, agent: &str) -> String {
        format!("{}.lines.{session}.{agent}", self.prefix)
    }

    /// Every transcript line of session `session`.
    pub fn lines_of(&self, session: &str) -> String {
        format!("{}.lines.{session}.>", self.prefix)
    }

    /// The durable consumer every worker of `pool` pulls from.
    pub fn consumer(&self, pool: &str) -> String {
        format!("pool-{pool}")
    }
}

/// `url` with its password (or token) replaced by `***`, for messages.
fn without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let shown = match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None => "***".to_string(),
            };
            format!("{}{shown}{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// A name used as one subject token or a stream/bucket name.
pub fn check_token(what: &str, v: &str) -> Result<(), FleetError> {
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(FleetError::Invalid(format!(
            "{what} = {v:?}: use letters, digits, '-' and '_' only"
        )))
    }
}

/// A connection with the streams and bucket in place.
pub struct Broker {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub state: kv::Store,
    pub names: Names,
    /// Git bundles (`distributed.git_bucket`), opened at first use.
    git: tokio::sync::OnceCell<async_nats::jetstream::object_store::ObjectStore>,
    settings: DistributedSettings,
}

impl Broker {
    /// Connects (with the credentials file, if set) and makes sure the
    /// streams and the bucket exist. The client reconnects by itself after
    /// a server restart; JetStream calls made meanwhile fail and are retried
    /// by their callers.
    pub async fn connect(s: &DistributedSettings) -> Result<Broker, FleetError> {
        let names = Names::of(s)?;
        let connect_err = |message: String| FleetError::Connect {
            url: without_password(&s.url),
            message,
        };
        let mut options = async_nats::ConnectOptions::new()
            .name("cadre")
            .connection_timeout(Duration::from_millis(s.connect_timeout_ms.max(1)))
            // Requests (JetStream API calls) give up after this long.
            .request_timeout(Some(Duration::from_millis(s.connect_timeout_ms.max(1000))));
        // `nats://USER:PASSWORD@host` or `nats://TOKEN@host`: the client
        // does not read them from the URL itself.
        if let Ok(addr) = s.url.parse::<async_nats::ServerAddr>() {
            match (addr.username(), addr.password()) {
                (Some(user), Some(pass)) => {
                    options = options.user_and_password(user.to_string(), pass.to_string());
                }
                (Some(token), None) if !token.is_empty() => {
                    options = options.token(token.to_string());
                }
                _ => {}
            }
        }
        if let Some(creds) = &s.credentials {
            options = options
                .credentials_file(creds)
                .await
                .map_err(|e| connect_err(format!("credentials {}: {e}", creds.display())))?;
        }
        let client = options
            .connect(s.url.as_str())
            .await
            .map_err(|e| connect_err(e.to_string()))?;
        let js = jetstream::new(client.clone());
        let max_age = Duration::from_secs(s.retention_s.max(60));
        js.get_or_create_stream(stream::Config {
            name: names.tasks_stream.clone(),
            subjects: vec![format!("{}.tasks.>", names.prefix)],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            max_age,
            ..Default::default()
        })
        .await
        .map_err(FleetError::broker)?;
        js.get_or_create_stream(stream::Config {
            name: names.notices_stream.clone(),
            subjects: vec![format!("{}.notices.>", names.prefix)],
            retention: stream::RetentionPolicy::Limits,
            storage: stream::StorageType::File,
            // One notice per task subject; a second one is refused, not
            // stored in place of the first.
            max_messages_per_subject: 1,
            discard: stream::DiscardPolicy::New,
            discard_new_per_subject: true,
            max_age,
            ..Default::default()
        })
        .await
        .map_err(FleetError::broker)?;
        // Whatever this process's `shared_folder`: a plan says which mode
        // its task runs in.
        js.get_or_create_stream(stream::Config {
            name: names.lines_stream.clone(),
            subjects: vec![format!("{}.lines.>", names.prefix)],
            retention: stream::RetentionPolicy::Limits,
            storage: stream::StorageType::File,
            max_age,
            ..Default::default()
        })
        .await
        .map_err(FleetError::broker)?;
        let state = match js.get_key_value(&names.bucket).await {
            Ok(kv) => kv,
            Err(_) => js
                .create_key_value(kv::Config {
                    bucket: names.bucket.clone(),
                    history: 1,
                    max_age,
                    storage: stream::StorageType::File,
                    ..Default::default()
                })
                .await
                .map_err(FleetError::broker)?,
        };
        let broker = Broker {
            client,
            js,
            state,
            names,
            git: tokio::sync::OnceCell::new(),
            settings: s.clone(),
        };
        if !s.shared_folder {
            broker.git_store().await?;
        }
        Ok(broker)
    }

    /// The object store of git bundles, created at first use.
    pub async fn git_store(
        &self,
    ) -> Result<&async_nats::jetstream::object_store::ObjectStore, FleetError> {
        self.git
            .get_or_try_init(|| async {
                // Under a burst of spawns a JetStream request may time out.
                let mut tries = 0;
                loop {
                    let made = match self.js.get_object_store(&self.names.git_bucket).await {
                        Ok(o) => Ok(o),
                        Err(_) => self
                            .js
                            .create_object_store(async_nats::jetstream::object_store::Config {
                                bucket: self.names.git_bucket.clone(),
                                max_age: Duration::from_secs(self.settings.retention_s.max(60)),
                                storage: stream::StorageType::File,
                                ..Default::default()
                            })
                            .await
                            .map_err(FleetError::broker),
                    };
                    match made {
                        Err(e) if tries < 3 => {
                            tracing::debug!("the git bundle store: {e}; trying again");
                            tries += 1;
                        }
                        done => return done,
                    }
                }
            })
            .await
    }

    pub fn settings(&self) -> &DistributedSettings {
        &self.settings
    }

    /// The lease: how long a task stays with a worker without a heartbeat.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.settings.lease_ms.max(100))
    }

    /// The durable consumer of `pool`, created or updated with this
    /// lease and `max_running` as its `max_ack_pending`: the server hands
    /// out no more unfinished tasks than that across every worker.
    pub async fn pool_consumer(
        &self,
        pool: &str,
        max_running: usize,
    ) -> Result<consumer::PullConsumer, FleetError> {
        check_token("--pool", pool)?;
        let stream = self
            .js
            .get_stream(&self.names.tasks_stream)
            .await
            .map_err(FleetError::broker)?;
        let name = self.names.consumer(pool);
        stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(name),
                filter_subject: self.names.task_subject(pool),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: self.lease(),
                max_deliver: -1,
                max_ack_pending: i64::try_from(max_running.max(1)).unwrap_or(i64::MAX),
                ..Default::default()
            })
            .await
            .map_err(FleetError::broker)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The model is told each kind of fleet failure in its own words, and
    /// never the error's own text (the NATS client's words).
    #[test]
    fn a_fleet_error_reaches_the_model_as_its_typed_problem() {
        let (t, _) = crate::templates::Templates::load(None);
        let errors = [
            FleetError::Connect {
                url: "nats://user:secret@10.0.0.9:4222".into(),
                message: "OWN WORDS".into(),
            },
            FleetError::Broker("OWN WORDS".into()),
            FleetError::NoTranscripts,
            FleetError::Invalid("OWN WORDS".into()),
        ];
        let mut texts = std::collections::BTreeSet::new();
        for e in &errors {
            let failed = e.queue_failed();
            assert_eq!(failed.detail, e.to_string());
            let text = t.show(&crate::runtime::texts::TaskBackendFailed {
                stage: "queue".into(),
                backend: "nats".into(),
                worker: String::new(),
                detail: String::new(),
                problem: Some(failed.problem),
            });
            assert!(
                text.starts_with(
                    "The background task could not be handed to the nats worker fleet: "
                ),
                "{text}"
            );
            assert!(
                !text.contains("OWN WORDS") && !text.contains("NATS"),
                "{text}"
            );
            texts.insert(text);
        }
        assert!(
            texts.iter().all(|t| !t.contains("10.0.0.9")),
            "the URL may carry a password: {texts:#?}"
        );
        assert_eq!(texts.len(), errors.len(), "{texts:#?}");
    }

    #[test]
    fn a_url_s_password_is_not_shown() {
        assert_eq!(
            without_password("nats://parent:S3CRET@h:4222"),
            "nats://parent:***@h:4222"
        );
        assert_eq!(without_password("nats://TOKEN@h:4222"), "nats://***@h:4222");
        assert_eq!(without_password("nats://h:4222"), "nats://h:4222");
    }

    #[test]
    fn names_are_single_subject_tokens() {
        for bad in ["", "a.b", "a*", ">", "a b", "../x", "a/b"] {
            assert!(check_token("pool", bad).is_err(), "{bad:?} accepted");
        }
        for good in ["default", "gpu-1", "CADRE_TASKS", "a0123456789abcdef"] {
            assert!(check_token("pool", good).is_ok(), "{good:?} refused");
        }
        let s = DistributedSettings {
            pool: "has.dot".into(),
            ..DistributedSettings::default()
        };
        let e = Names::of(&s).unwrap_err().to_string();
        assert!(e.contains("distributed.pool"), "{e}");
    }

    #[test]
    fn subjects_keep_each_task_apart() {
        let n = Names::of(&DistributedSettings::default()).unwrap();
        assert_eq!(n.task_subject("default"), "cadre.tasks.default");
        assert_eq!(n.notice_subject("s1", "a1"), "cadre.notices.s1.a1");
        assert_eq!(n.notices_of("s1"), "cadre.notices.s1.>");
        assert_eq!(n.run_notice_subject("s1", "a1", 0), "cadre.notices.s1.a1");
        assert_eq!(
            n.run_notice_subject("s1", "a1", 2),
            "cadre.notices.s1.a1.r2"
        );
        assert_eq!(n.control_subject("a1"), "cadre.control.a1");
        assert_eq!(n.consumer("gpu"), "pool-gpu");
    }
}
