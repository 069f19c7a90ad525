//! `[server.tls]` and `[server.admin_tls]`: the PEM files a listener serves
//! HTTPS with, and the optional CA that makes it require client certificates.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Certificate chain, PEM, leaf first (relative to the config file).
    pub cert: PathBuf,
    /// Private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates, PEM: when set, every client must present a
    /// certificate issued by one of them (mutual TLS).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: a request without `Authorization` is the principal
    /// its client certificate names (`[server.tls]` only).
    #[serde(default)]
    pub client_principal: Option<ClientPrincipal>,
}

/// Which part of a client certificate's subject names the principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientPrincipal {
    /// The subject's common name (`CN`).
    CommonName,
    /// The whole subject distinguished name (`CN=alice,OU=payments,O=Acme`).
    Subject,
}

impl TlsConfig {
    /// The same files, relative paths resolved against `base_dir`.
    pub fn resolved(&self, base_dir: &Path) -> TlsConfig {
        TlsConfig {
            cert: base_dir.join(&self.cert),
            key: base_dir.join(&self.key),
            client_ca: self.client_ca.as_ref().map(|ca| base_dir.join(ca)),
            client_principal: self.client_principal,
        }
    }

    /// Files that cannot be read, each with why (their contents are checked
    /// when the listener is built).
    pub fn unreadable(&self, base_dir: &Path) -> Vec<String> {
        let resolved = self.resolved(base_dir);
        resolved
            .files()
            .into_iter()
            .filter_map(|f| {
                std::fs::File::open(f)
                    .err()
                    .map(|e| format!("TLS file {}: {e}", f.display()))
            })
            .collect()
    }

    /// Every file, for change detection.
    pub fn files(&self) -> Vec<&Path> {
        let mut out = vec![self.cert.as_path(), self.key.as_path()];
        out.extend(self.client_ca.as_deref());
        out
    }
}
