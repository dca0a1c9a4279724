//! TLS for the listener: rustls with the ring provider, TLS 1.2 and 1.3, ALPN `http/1.1`.
//! Certificates and key are read once at start-up from PEM files (`--tls-cert`, `--tls-key`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<futures_rustls::TlsAcceptor> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading the certificate chain {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing the certificate chain {}", cert.display()))?;
    if chain.is_empty() {
        bail!("no certificate in {}", cert.display());
    }
    let private_key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .context("the TLS certificate and key do not go together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(futures_rustls::TlsAcceptor::from(Arc::new(config)))
}
