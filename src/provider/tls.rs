//! TLS for every HTTP client cadre builds (the model provider, WebFetch,
//! MCP over HTTP): rustls with ring, verified against the platform's trust
//! store through `rustls-platform-verifier` — the system roots, which a
//! corporate proxy's own certificate authority needs.
//!
//! Reading that store means opening every certificate file under the
//! system's trust folder (a few milliseconds, hundreds of files), so it is
//! done at the first TLS handshake, not when a client is built: a run
//! against a plain-HTTP loopback server, `render` and `--version` never
//! read it.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A client builder with cadre's TLS set up (see the module comment).
pub fn client_builder() -> reqwest::ClientBuilder {
    match client_config(Trust::default()) {
        Ok(mut config) => {
            // What reqwest offers itself when it builds the configuration.
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            reqwest::Client::builder().tls_backend_preconfigured(config)
        }
        // ring supports the default versions; should that ever fail,
        // reqwest's own setup (which reads the store at once) still works.
        Err(_) => reqwest::Client::builder(),
    }
}

/// What one kind of connection may change in cadre's TLS: the certificate
/// authorities its server's certificate is checked against, instead of
/// the platform's store, and a certificate (with its key) that cadre shows
/// the server when it asks for one.
#[derive(Default)]
pub struct Trust {
    pub roots: Option<Vec<CertificateDer<'static>>>,
    pub client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
}

/// rustls' client configuration with ring: the platform's store (read at
/// the first handshake) unless `trust` names its own authorities, and
/// `trust`'s client certificate. No ALPN: the caller sets what it speaks.
pub fn client_config(trust: Trust) -> Result<rustls::ClientConfig, rustls::Error> {
    super::install_tls_provider();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let builder = match trust.roots {
        Some(certs) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs {
                roots.add(c)?;
            }
            builder.with_root_certificates(roots)
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(LazyPlatformVerifier {
                provider,
                inner: OnceLock::new(),
            })),
    };
    match trust.client {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// The platform verifier, created (and the trust store read) on first use.
#[derive(Debug)]
struct LazyPlatformVerifier {
    provider: Arc<CryptoProvider>,
    inner: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyPlatformVerifier {
    fn get(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.inner
            .get_or_init(|| rustls_platform_verifier::Verifier::new(Arc::clone(&self.provider)))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyPlatformVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    /// Asked for while the ClientHello is written: the provider's schemes,
    /// which are what the platform verifier answers too, without loading it.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_store_is_not_read_until_a_certificate_is_checked() {
        assert!(client_builder().build().is_ok());
        let v = LazyPlatformVerifier {
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            inner: OnceLock::new(),
        };
        assert!(!v.supported_verify_schemes().is_empty());
        assert!(
            v.inner.get().is_none(),
            "read while writing the ClientHello"
        );
        // A certificate check creates the platform verifier (and reads the
        // store); garbage is refused, not accepted.
        let name = ServerName::try_from("example.com").unwrap();
        let bad = CertificateDer::from(vec![1, 2, 3]);
        assert!(
            v.verify_server_cert(&bad, &[], &name, &[], UnixTime::now())
                .is_err()
        );
        assert!(v.inner.get().is_some());
    }
}
