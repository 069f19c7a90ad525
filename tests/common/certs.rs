//! Certificates made by the tests (rcgen): a CA, server certificates for
//! `localhost` and 127.0.0.1, client certificates, and HTTPS clients that
//! trust only that CA.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A test CA.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Issued {
    pub cert: String,
    pub key: String,
    pub der: Vec<u8>,
}

impl Issued {
    /// Writes `NAME.crt` and `NAME.key` into `dir` (each by a rename, as a
    /// certificate manager would) and returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        for (path, text) in [(&key, &self.key), (&cert, &self.cert)] {
            let aside = path.with_extension("new");
            std::fs::write(&aside, text).expect("write PEM");
            std::fs::rename(&aside, path).expect("rename PEM");
        }
        (cert, key)
    }

    /// A reqwest identity (certificate and key in one PEM buffer).
    pub fn identity(&self) -> reqwest::Identity {
        reqwest::Identity::from_pem(format!("{}{}", self.cert, self.key).as_bytes())
            .expect("identity PEM")
    }
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn issue(&self, names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose) -> Issued {
        self.issue_in(names, cn, &[], usage)
    }

    fn issue_in(
        &self,
        names: Vec<String>,
        cn: &str,
        units: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Issued {
        let mut params = CertificateParams::new(names).expect("names");
        params.distinguished_name.push(DnType::CommonName, cn);
        for unit in units {
            params
                .distinguished_name
                .push(DnType::OrganizationalUnitName, *unit);
        }
        params.use_authority_key_identifier_extension = true;
        params.key_usages.push(KeyUsagePurpose::DigitalSignature);
        params.extended_key_usages.push(usage);
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self, cn: &str) -> Issued {
        self.issue(
            vec!["localhost".into(), "127.0.0.1".into()],
            cn,
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate whose subject CN is `cn`.
    pub fn client(&self, cn: &str) -> Issued {
        self.issue(Vec::new(), cn, ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A client certificate whose subject is `CN=cn` with an `OU` per unit.
    pub fn client_in(&self, cn: &str, units: &[&str]) -> Issued {
        self.issue_in(Vec::new(), cn, units, ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// An HTTPS client that trusts only this CA (and reports the peer's certificate).
    pub fn https_client(&self, identity: Option<&Issued>) -> reqwest::Client {
        let mut b = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.pem.as_bytes()).expect("CA PEM")])
            .tls_info(true);
        if let Some(id) = identity {
            b = b.identity(id.identity());
        }
        b.build().expect("https client")
    }
}
