//! The TLS of a connection to the collector, from the files the OTel
//! variables name (`…_CERTIFICATE`, `…_CLIENT_CERTIFICATE`,
//! `…_CLIENT_KEY`): cadre's own rustls set-up (ring, the platform's store)
//! with those authorities and that client certificate, for the HTTP
//! client and the gRPC channel alike.

use std::io::Read as _;
use std::path::Path;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::provider::tls::{Trust, client_config};

use super::switches::TlsFiles;

/// The most of a certificate or key file that is read: a PEM chain is a
/// few kilobytes.
const MAX_PEM: u64 = 1024 * 1024;

/// rustls' configuration for `files` (ALPN left to the caller); what is
/// wrong with a file, in words naming it.
pub(super) fn config(files: &TlsFiles) -> Result<rustls::ClientConfig, String> {
    let roots = match &files.ca {
        Some(path) => Some(certificates(path)?),
        None => None,
    };
    let client = match &files.client {
        Some((cert, key)) => Some((certificates(cert)?, private_key(key)?)),
        None => None,
    };
    let named = |e: rustls::Error| {
        let which = [
            files.ca.as_deref(),
            files.client.as_ref().map(|c| c.0.as_path()),
        ]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
        format!("the TLS certificates ({which}): {e}")
    };
    client_config(Trust { roots, client }).map_err(named)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PEM + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_PEM {
        return Err(format!(
            "{}: more than {} KiB, not a PEM certificate or key",
            path.display(),
            MAX_PEM / 1024
        ));
    }
    Ok(bytes)
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        ));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(&read(path)?).map_err(|e| {
        format!(
            "{}: no PEM private key in it (PKCS#8, PKCS#1 or SEC1): {e}",
            path.display()
        )
    })
}
