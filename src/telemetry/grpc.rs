//! OTLP over gRPC: a tonic channel whose connections cadre makes itself —
//! TCP on the process's runtime, and for `https` rustls with cadre's own
//! set-up (ring, the platform's store or the collector's authority, a
//! client certificate) offering `h2` — so that tonic brings no TLS stack of
//! its own. The exporters' requests then run on that channel.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::transport::{Channel, Endpoint, Uri};

/// A connection the channel speaks HTTP/2 on: plain TCP or TLS over it.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

type Connection = TokioIo<Pin<Box<dyn Io>>>;

/// A channel to `endpoint` (`http://host:4317` or `https://…`); it
/// connects at the first export. Call inside the runtime.
pub(super) fn channel(
    endpoint: &str,
    timeout: Duration,
    tls: Option<rustls::ClientConfig>,
) -> Result<Channel, String> {
    let https = endpoint.starts_with("https://");
    let tls = match (https, tls) {
        (true, Some(mut config)) => {
            config.alpn_protocols = vec![b"h2".to_vec()];
            Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
        }
        (true, None) => return Err(format!("{endpoint}: no TLS configuration")),
        (false, _) => None,
    };
    let to = Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| format!("{endpoint}: not a gRPC endpoint: {e}"))?
        .timeout(timeout)
        .connect_timeout(timeout);
    let connect = tower::service_fn(move |uri: Uri| {
        let tls = tls.clone();
        async move { connect(&uri, tls).await }
    });
    Ok(to.connect_with_connector_lazy(connect))
}

async fn connect(
    uri: &Uri,
    tls: Option<tokio_rustls::TlsConnector>,
) -> std::io::Result<Connection> {
    let invalid = |what: &str| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{uri}: {what}"))
    };
    let host = uri
        .host()
        .ok_or_else(|| invalid("no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
    let tcp = super::http::tcp(&host, port).await?;
    let io: Pin<Box<dyn Io>> = match tls {
        Some(tls) => {
            let name = rustls::pki_types::ServerName::try_from(host)
                .map_err(|_| invalid("not a host name for TLS"))?;
            Box::pin(tls.connect(name, tcp).await?)
        }
        None => Box::pin(tcp),
    };
    Ok(TokioIo::new(io))
}

/// The OTLP headers as gRPC metadata (names in lower case); a name or
/// value HTTP cannot carry is left out, with a line in the log.
pub(super) fn metadata(
    headers: &std::collections::HashMap<String, String>,
) -> tonic::metadata::MetadataMap {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        match (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            (Ok(name), Ok(value)) => {
                map.insert(name, value);
            }
            _ => tracing::debug!("telemetry: the header {k} cannot be sent over gRPC"),
        }
    }
    tonic::metadata::MetadataMap::from_headers(map)
}
