//! TLS on the PostgreSQL listener: a certificate and key from PEM files, or a self-signed pair made once and
//! kept (`sslmode=require` works with either; `verify-full` with a certificate the client trusts, such as the
//! self-signed one given to it as `sslrootcert`). rustls with ring, as everywhere in Cambium. The HTTP API's
//! optional TLS reads its PEM files through [`server_config`] too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls;
use pgwire::tokio::TlsAcceptor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// File name of the self-signed certificate inside its directory.
pub const SELF_SIGNED_CERT: &str = "server.crt";
/// File name of the self-signed certificate's key inside its directory.
pub const SELF_SIGNED_KEY: &str = "server.key";

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A PEM file holds no usable certificate or key.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// rustls refused the certificate and key.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// The self-signed certificate could not be made.
    #[error("making a self-signed certificate: {0}")]
    Generate(String),
}

/// The TLS side of the PostgreSQL listener: a certificate and its key, ready to accept.
#[derive(Clone)]
pub struct ServerTls(TlsAcceptor);

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

impl ServerTls {
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.0.clone()
    }
}

/// TLS serving the certificate chain in `cert_path` with the key in `key_path` (both PEM).
pub fn acceptor(cert_path: &Path, key_path: &Path) -> Result<ServerTls, TlsError> {
    let mut config = server_config(cert_path, key_path)?;
    // PostgreSQL 17's direct TLS negotiation asks for this protocol name.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(ServerTls(TlsAcceptor::from(Arc::new(config))))
}

/// A rustls server configuration (ring, safe default protocol versions, no client certificates, no ALPN)
/// serving the certificate chain in `cert_path` with the key in `key_path` (both PEM). Shared with the HTTP
/// API's optional TLS, so both listeners read certificates the same way.
pub fn server_config(cert_path: &Path, key_path: &Path) -> Result<rustls::ServerConfig, TlsError> {
    let pem_error = |path: &Path, message: String| TlsError::Pem {
        path: path.to_owned(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| pem_error(cert_path, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(cert_path, e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error(cert_path, "no certificate".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| pem_error(key_path, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?)
}

/// The self-signed certificate and key in `dir`, made (for `hostnames`) if they are not there yet: the key is
/// written mode 0600, each file temp-fsync-rename. Returns their paths.
pub fn ensure_self_signed(dir: &Path, hostnames: &[String]) -> Result<(PathBuf, PathBuf), TlsError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| TlsError::Io { path, source }
    };
    let (cert_path, key_path) = (dir.join(SELF_SIGNED_CERT), dir.join(SELF_SIGNED_KEY));
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    create_private_dir(dir).map_err(io(dir))?;
    let certified =
        rcgen::generate_simple_self_signed(hostnames.to_vec()).map_err(|e| TlsError::Generate(e.to_string()))?;
    write_durably(&key_path, certified.signing_key.serialize_pem().as_bytes(), 0o600).map_err(io(&key_path))?;
    write_durably(&cert_path, certified.cert.pem().as_bytes(), 0o644).map_err(io(&cert_path))?;
    Ok((cert_path, key_path))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to `path` with `mode`: temp file, fsync, rename, fsync of the directory.
fn write_durably(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let temp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_pair_is_made_once_and_serves() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let tls_dir = dir.path().join("tls");
        let (cert, key) = ensure_self_signed(&tls_dir, &["localhost".to_owned()])?;
        let first = std::fs::read(&cert)?;
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key)?.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&tls_dir)?.permissions().mode() & 0o777, 0o700);
        ensure_self_signed(&tls_dir, &["localhost".to_owned()])?;
        assert_eq!(std::fs::read(&cert)?, first, "kept, not made again");
        acceptor(&cert, &key)?;
        assert!(acceptor(&key, &cert).is_err(), "a key is not a certificate");
        Ok(())
    }
}
