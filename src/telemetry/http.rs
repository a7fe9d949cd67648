//! The HTTP client the OTLP exporters send with: cadre's own reqwest
//! client (rustls with ring, the platform's trust store or the collector's
//! own authority, a client certificate when one is named), its requests
//! sent from the exports' tasks on the process's tokio runtime: no second
//! HTTP stack and no runtime or thread of telemetry's own.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use async_trait::async_trait;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

use super::switches::TlsFiles;

/// The most of a collector's answer that is read (it is only looked at for
/// its status; an OTLP answer is a few bytes).
const MAX_ANSWER: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub(super) struct Client {
    http: reqwest::Client,
}

impl Client {
    /// What is wrong with the TLS files, in words.
    pub(super) fn new(timeout: Duration, tls: &TlsFiles) -> Result<Client, String> {
        let mut config = super::tls::config(tls)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(config)
            .timeout(timeout)
            // `localhost` is the loopback: no resolver thread for it.
            .resolve_to_addrs("localhost", &LOOPBACK)
            .build()
            .map_err(|e| format!("the HTTP client: {e}"))?;
        Ok(Client { http })
    }
}

/// `localhost`'s addresses, as a collector on this machine listens.
const LOOPBACK: [SocketAddr; 2] = [
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
    SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0),
];

/// A TCP connection to `host:port`, `localhost` without a lookup; no
/// Nagle delay (an export is one request and its answer).
#[cfg_attr(not(feature = "otlp-grpc"), allow(dead_code))]
pub(super) async fn tcp(host: &str, port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let stream = if host.eq_ignore_ascii_case("localhost") {
        let addrs = LOOPBACK.map(|a| SocketAddr::new(a.ip(), port));
        tokio::net::TcpStream::connect(&addrs[..]).await?
    } else {
        tokio::net::TcpStream::connect((host, port)).await?
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

#[async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        // Exports run as tasks on the process's runtime (telemetry's pump),
        // so the request is sent right here, with no task of its own.
        let (parts, body) = request.into_parts();
        let mut answer = self
            .http
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
        Ok(response.body(Bytes::from(read))?)
    }
}
