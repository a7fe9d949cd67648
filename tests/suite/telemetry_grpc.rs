//! OpenTelemetry export over gRPC and over TLS with client certificates,
//! through the binary, against a collector of the test's own that serves
//! the official gRPC services (built with the `otlp-grpc` feature only:
//! `cargo test --no-default-features` leaves this module out).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::harness::Project;
use super::telemetry::{
    Export, PROMPT, REVIEWER, Received, check_agent_tree, check_claude_code_signals, decode_export,
    model, session_id, telemetry_env,
};

/// A collector of its own for gRPC and TLS: OTLP over gRPC with the
/// official service definitions (`opentelemetry-proto`'s tonic services)
/// and OTLP/HTTP protobuf, on one port (hyper's server, HTTP/1.1 or
/// HTTP/2), over plain TCP or over TLS that requires a client certificate
/// signed by the test's authority.
struct Collector {
    url: String,
    exports: Arc<Mutex<Vec<(String, Export)>>>,
    /// Every request's `authorization` header (gRPC metadata alike).
    auth: Arc<Mutex<Vec<String>>>,
    /// TLS handshakes refused (no client certificate, or a stranger's).
    refused: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

/// The test's certificates, made with rcgen: an authority, the
/// collector's certificate for `localhost` signed by it, and a client's.
struct Pki {
    ca_pem: String,
    server: (Vec<u8>, Vec<u8>),
    client_pem: String,
    client_key_pem: String,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose,
        };
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "cadre telemetry test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(names).unwrap();
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &ca).unwrap();
            (cert, key)
        };
        let (server, server_key) = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client, client_key) = leaf(
            vec!["cadre-client".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        Pki {
            ca_pem: ca.pem(),
            server: (server.der().to_vec(), server_key.serialize_der()),
            client_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }

    fn ca_der(&self) -> Vec<u8> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        CertificateDer::from_pem_slice(self.ca_pem.as_bytes())
            .unwrap()
            .to_vec()
    }
}

#[derive(Clone)]
struct Sink {
    exports: Arc<Mutex<Vec<(String, Export)>>>,
}

impl Sink {
    fn keep(&self, how: &str, e: Export) {
        self.exports.lock().unwrap().push((how.to_string(), e));
    }
}

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::MetricsService
    for Sink
{
    async fn export(
        &self,
        r: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse,
        >,
        tonic::Status,
    > {
        self.keep("grpc", Export::Metrics(r.into_inner()));
        Ok(tonic::Response::new(Default::default()))
    }
}

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::LogsService for Sink {
    async fn export(
        &self,
        r: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<
        tonic::Response<opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse>,
        tonic::Status,
    > {
        self.keep("grpc", Export::Logs(r.into_inner()));
        Ok(tonic::Response::new(Default::default()))
    }
}

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService for Sink {
    async fn export(
        &self,
        r: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        self.keep("grpc", Export::Traces(r.into_inner()));
        Ok(tonic::Response::new(Default::default()))
    }
}

impl Collector {
    /// Plain TCP (`http://127.0.0.1:PORT`), or TLS with `pki`'s collector
    /// certificate, requiring a client certificate (`https://localhost:PORT`).
    fn start(pki: Option<&Pki>) -> Collector {
        use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::LogsServiceServer;
        use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::MetricsServiceServer;
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = pki.map(|pki| {
            use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from(pki.ca_der())).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::clone(&provider),
            )
            .build()
            .unwrap();
            let mut config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_client_cert_verifier(verifier)
                .with_single_cert(
                    vec![CertificateDer::from(pki.server.0.clone())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server.1.clone())),
                )
                .unwrap();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        let url = match acceptor {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let sink = Sink {
            exports: Arc::default(),
        };
        let (exports, auth, refused) = (
            Arc::clone(&sink.exports),
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicUsize::new(0)),
        );
        let (metrics, logs, traces) = (
            MetricsServiceServer::new(sink.clone()),
            LogsServiceServer::new(sink.clone()),
            TraceServiceServer::new(sink.clone()),
        );
        let (seen, refusals) = (Arc::clone(&auth), Arc::clone(&refused));
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, sink, seen, refusals) = (
                    acceptor.clone(),
                    sink.clone(),
                    Arc::clone(&seen),
                    Arc::clone(&refusals),
                );
                let (metrics, logs, traces) = (metrics.clone(), logs.clone(), traces.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (metrics, logs, traces, sink, seen) = (
                                metrics.clone(),
                                logs.clone(),
                                traces.clone(),
                                sink.clone(),
                                Arc::clone(&seen),
                            );
                            async move {
                                use tower::ServiceExt as _;
                                if let Some(a) = req.headers().get("authorization") {
                                    seen.lock()
                                        .unwrap()
                                        .push(a.to_str().unwrap_or_default().to_string());
                                }
                                let path = req.uri().path().to_string();
                                if path.starts_with("/opentelemetry.proto.collector.metrics.") {
                                    return metrics.oneshot(req).await;
                                }
                                if path.starts_with("/opentelemetry.proto.collector.logs.") {
                                    return logs.oneshot(req).await;
                                }
                                if path.starts_with("/opentelemetry.proto.collector.trace.") {
                                    return traces.oneshot(req).await;
                                }
                                use http_body_util::BodyExt as _;
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                sink.keep("http", decode_export(&path, &body));
                                Ok(hyper::Response::new(tonic::body::Body::empty()))
                            }
                        },
                    );
                    let builder = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    match acceptor {
                        Some(acceptor) => match acceptor.accept(tcp).await {
                            Ok(tls) => {
                                let _ = builder
                                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                                    .await;
                            }
                            // A refusal is the server's verdict on what the
                            // client presented; a connection the client
                            // drops before the handshake ends (a pooled one
                            // abandoned at exit) is not.
                            Err(e)
                                if !matches!(
                                    e.kind(),
                                    std::io::ErrorKind::UnexpectedEof
                                        | std::io::ErrorKind::ConnectionReset
                                        | std::io::ErrorKind::BrokenPipe
                                ) =>
                            {
                                refusals.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(_) => {}
                        },
                        None => {
                            let _ = builder
                                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                                .await;
                        }
                    }
                });
            }
        });
        Collector {
            url,
            exports,
            auth,
            refused,
            _runtime: runtime,
        }
    }

    /// What arrived, and how (`grpc` or `http`) each export came.
    fn received(&self) -> (Received, Vec<String>) {
        let mut got = Received::default();
        let mut how = Vec::new();
        for (h, e) in self.exports.lock().unwrap().iter() {
            how.push(h.clone());
            got.add(e.clone());
        }
        (got, how)
    }
}

/// `grpc` to a gRPC collector (the official service definitions): the
/// same metrics, events and agent tree as over HTTP, every export a gRPC
/// call with the headers as metadata.
#[test]
fn grpc_export_has_claude_codes_signals_and_the_agent_tree() {
    let collector = Collector::start(None);
    let server = model();
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    telemetry_env(&mut p, &collector.url, "grpc");
    let run = p.run(Some(&server), &["run", PROMPT]);
    run.ok();
    assert!(!run.stderr.contains("telemetry"), "{}", run.stderr);
    let (got, how) = collector.received();
    assert!(
        !how.is_empty() && how.iter().all(|h| h == "grpc"),
        "{how:?}"
    );
    let auth = collector.auth.lock().unwrap().clone();
    assert!(
        auth.len() == how.len() && auth.iter().all(|a| a == "Bearer otel-token"),
        "{auth:?}"
    );
    check_claude_code_signals(&got, &session_id(&p));
    check_agent_tree(&got);
}

/// A collector that asks for a client certificate, over TLS with its own
/// authority: with `…_CERTIFICATE` (the authority) and the client's
/// certificate and key, gRPC and HTTP exports arrive; per signal
/// variables win over the general ones; without the client certificate
/// the collector refuses the handshake and nothing arrives.
#[test]
fn a_collector_that_requires_a_client_certificate() {
    let pki = Pki::new();
    let server = model();
    let files = |p: &Project| {
        p.write("certs/ca.pem", &pki.ca_pem);
        p.write("certs/client.pem", &pki.client_pem);
        p.write("certs/client.key", &pki.client_key_pem);
        (
            p.path().join("certs/ca.pem"),
            p.path().join("certs/client.pem"),
            p.path().join("certs/client.key"),
        )
    };
    for protocol in ["grpc", "http/protobuf"] {
        let collector = Collector::start(Some(&pki));
        let mut p = Project::new();
        p.write(".claude/agents/reviewer.md", REVIEWER);
        let (ca, cert, key) = files(&p);
        telemetry_env(&mut p, &collector.url, protocol);
        p.env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.to_str().unwrap())
            .env(
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                cert.to_str().unwrap(),
            )
            // The logs' own key wins over a general one that is no key.
            .env("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/nonexistent/key.pem")
            .env(
                "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
                key.to_str().unwrap(),
            )
            .env("OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY", key.to_str().unwrap())
            .env(
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
                key.to_str().unwrap(),
            );
        let run = p.run(Some(&server), &["run", PROMPT]);
        run.ok();
        let (got, how) = collector.received();
        let wire = if protocol == "grpc" { "grpc" } else { "http" };
        assert!(
            !how.is_empty() && how.iter().all(|h| h == wire),
            "{protocol}: {how:?}\n{}",
            run.stderr
        );
        assert_eq!(collector.refused.load(Ordering::SeqCst), 0, "{protocol}");
        check_claude_code_signals(&got, &session_id(&p));
        check_agent_tree(&got);
    }

    // The authority but no client certificate: refused, nothing arrives.
    let collector = Collector::start(Some(&pki));
    let mut p = Project::new();
    let (ca, _, _) = files(&p);
    telemetry_env(&mut p, &collector.url, "grpc");
    p.env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.to_str().unwrap());
    p.run(Some(&server), &["run", PROMPT]).ok();
    assert!(collector.received().1.is_empty());
    assert!(collector.refused.load(Ordering::SeqCst) > 0);

    // A key file that is not one: said in words, naming the file.
    let collector = Collector::start(Some(&pki));
    let mut p = Project::new();
    let (ca, cert, _) = files(&p);
    telemetry_env(&mut p, &collector.url, "http/protobuf");
    p.env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.to_str().unwrap())
        .env(
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            cert.to_str().unwrap(),
        )
        .env("OTEL_EXPORTER_OTLP_CLIENT_KEY", ca.to_str().unwrap());
    let run = p.run(Some(&server), &["run", PROMPT]);
    run.ok();
    assert!(
        run.stderr.contains("ca.pem: no PEM private key"),
        "{}",
        run.stderr
    );
}
