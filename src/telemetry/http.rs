//! The HTTP client the OTLP exporters send with: cadre's own reqwest
//! client (rustls with ring, the platform's trust store), its requests run
//! on the process's tokio runtime. The SDK's exporters run on their own
//! threads and wait for the answer there, so no second HTTP stack and no
//! runtime of their own are built.

use std::time::Duration;

use async_trait::async_trait;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// The most of a collector's answer that is read (it is only looked at for
/// its status; an OTLP answer is a few bytes).
const MAX_ANSWER: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub(super) struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl Client {
    /// `None` outside a tokio runtime or when no client can be built.
    pub(super) fn new(timeout: Duration) -> Option<Client> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let http = crate::provider::tls::client_builder()
            .timeout(timeout)
            .build()
            .ok()?;
        Some(Client { http, runtime })
    }
}

#[async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let (parts, body) = request.into_parts();
        let sent = self.runtime.spawn(async move {
            let mut answer = http
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let mut response = Response::builder().status(answer.status());
            if let Some(headers) = response.headers_mut() {
                *headers = answer.headers().clone();
            }
            let mut read = Vec::new();
            while let Some(chunk) = answer.chunk().await? {
                let room = MAX_ANSWER.saturating_sub(read.len());
                read.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if read.len() >= MAX_ANSWER {
                    break;
                }
            }
            Ok::<_, HttpError>(response.body(Bytes::from(read))?)
        });
        sent.await?
    }
}
