//! HTTPS on a listener (`[server.tls]`, `[server.admin_tls]`) with rustls:
//! the PEM certificate chain and key, HTTP/2 and HTTP/1.1 offered by ALPN,
//! and, with `client_ca`, mutual TLS (a client without a certificate issued
//! by that CA fails the handshake).
//!
//! Certificates rotate without a restart and without dropping a connection:
//! on SIGHUP, and when one of the files changes on disk, the files are read
//! again into a new rustls configuration that the next handshake uses;
//! connections already open keep theirs. Files that do not load (a
//! half-written renewal, a key that does not match) leave the configuration
//! in force and are logged at ERROR: never a listener without TLS.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::config::TlsConfig;

/// How often the files are checked for changes.
const POLL: Duration = Duration::from_secs(1);

/// Why a listener's TLS files do not make a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate {}: {reason}", path.display())]
    Certificate { path: PathBuf, reason: String },
    #[error("private key {}: {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    #[error("client CA {}: {reason}", path.display())]
    ClientCa { path: PathBuf, reason: String },
    #[error("certificate {} and key {}: {reason}", cert.display(), key.display())]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

impl TlsError {
    /// The file at fault (the certificate, for a key that does not match it).
    pub fn path(&self) -> &Path {
        match self {
            TlsError::Certificate { path, .. }
            | TlsError::Key { path, .. }
            | TlsError::ClientCa { path, .. } => path,
            TlsError::Mismatch { cert, .. } => cert,
        }
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM `CERTIFICATE` block".into());
    }
    Ok(certs)
}

/// Reads the files into a rustls server configuration.
pub fn server_config(files: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = certificates(&files.cert).map_err(|reason| TlsError::Certificate {
        path: files.cert.clone(),
        reason,
    })?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        reason: format!("{e} (PKCS#8, PKCS#1 or SEC1 PEM expected)"),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mismatch = |reason: String| TlsError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        reason,
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| mismatch(e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let bad_ca = |reason: String| TlsError::ClientCa {
                path: ca.clone(),
                reason,
            };
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(ca).map_err(bad_ca)? {
                roots.add(cert).map_err(|e| bad_ca(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad_ca(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    // rustls checks here that the key belongs to the leaf certificate.
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| mismatch(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

type Stamp = Option<(SystemTime, u64)>;

fn stamps(files: &TlsConfig) -> Vec<Stamp> {
    files
        .files()
        .into_iter()
        .map(|f| {
            let meta = std::fs::metadata(f).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// One listener's TLS: the configuration in force, and its files.
pub struct Tls {
    /// `client` or `admin`, for logs.
    pub listener: &'static str,
    files: TlsConfig,
    current: RwLock<Arc<ServerConfig>>,
    seen: Mutex<Vec<Stamp>>,
}

impl Tls {
    /// Loads the files (paths already resolved); an error refuses to start.
    pub fn load(listener: &'static str, files: TlsConfig) -> Result<Arc<Tls>, TlsError> {
        let seen = stamps(&files);
        let config = server_config(&files)?;
        Ok(Arc::new(Tls {
            listener,
            files,
            current: RwLock::new(config),
            seen: Mutex::new(seen),
        }))
    }

    /// What the next handshake uses.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }

    /// Reads the files again; on error the configuration in force stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let seen = stamps(&self.files);
        let config = server_config(&self.files);
        // Remembered either way: a broken file is reported once, not every poll.
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = seen;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = config?;
        Ok(())
    }

    /// The principal the client certificate of `conn` names, when
    /// `client_principal` is set. A verified certificate that names nobody
    /// (no CN) is logged: its requests authenticate as if it had none.
    pub fn client_principal(
        &self,
        conn: &rustls::ServerConnection,
    ) -> Option<super::client_cert::CertPrincipal> {
        let from = self.files.client_principal?;
        let leaf = conn.peer_certificates()?.first()?;
        match super::client_cert::principal(leaf, from) {
            Ok(p) => Some(super::client_cert::CertPrincipal(Arc::new(p))),
            Err(e) => {
                tracing::warn!(listener = self.listener, error = %e, "the client certificate names no principal");
                None
            }
        }
    }

    fn changed(&self) -> bool {
        stamps(&self.files) != *self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reload_logged(&self, trigger: &str) {
        match self.reload() {
            Ok(()) => tracing::info!(
                listener = self.listener,
                cert = %self.files.cert.display(),
                trigger,
                "TLS certificate reloaded"
            ),
            Err(e) => tracing::error!(
                listener = self.listener,
                trigger,
                error = %e,
                "TLS reload failed; the certificate in force stays"
            ),
        }
    }
}

/// Reloads every listener's TLS on SIGHUP and when its files change, until
/// `stop` turns true.
pub fn watch(listeners: Vec<Arc<Tls>>, mut stop: tokio::sync::watch::Receiver<bool>) {
    if listeners.is_empty() {
        return;
    }
    let mut hup = crate::signal::Hangup::register();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = hup.recv() => {
                    for tls in &listeners {
                        tls.reload_logged("SIGHUP");
                    }
                }
                _ = tick.tick() => {
                    for tls in listeners.iter().filter(|t| t.changed()) {
                        tls.reload_logged("file changed");
                    }
                }
                _ = stop.changed() => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, signing_key.serialize_pem()).unwrap();
        (c, k)
    }

    fn files(cert: &Path, key: &Path, client_ca: Option<&Path>) -> TlsConfig {
        TlsConfig {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: client_ca.map(Path::to_path_buf),
            client_principal: None,
        }
    }

    fn in_force(tls: &Tls) -> Arc<ServerConfig> {
        tls.current.read().unwrap().clone()
    }

    #[test]
    fn a_reload_that_fails_keeps_the_configuration_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = issue(dir.path(), "a");
        let tls = Tls::load("client", files(&cert, &key, None)).unwrap();
        let before = in_force(&tls);
        assert_eq!(
            before.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
        assert!(tls.changed());
        let err = tls.reload().unwrap_err();
        assert!(matches!(err, TlsError::Certificate { .. }), "{err}");
        assert!(
            Arc::ptr_eq(&before, &in_force(&tls)),
            "the old configuration stays"
        );
        // Reported once: the broken file is not "changed" again until it changes.
        assert!(!tls.changed());
        let (_, _) = issue(dir.path(), "a");
        assert!(tls.changed());
        tls.reload().unwrap();
        assert!(!Arc::ptr_eq(&before, &in_force(&tls)));
    }

    #[test]
    fn each_bad_file_gets_its_own_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = issue(dir.path(), "a");
        let (_, other_key) = issue(dir.path(), "b");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let cases = [
            (files(&cert, &other_key, None), "and key"),
            (files(&empty, &key, None), "no PEM `CERTIFICATE` block"),
            (files(&cert, &empty, None), "private key"),
            (files(&cert, &key, Some(&empty)), "client CA"),
        ];
        for (f, want) in cases {
            let err = server_config(&f).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
        let with_ca = server_config(&files(&cert, &key, Some(&cert)));
        assert!(with_ca.is_ok(), "a certificate is a CA file");
    }
}
