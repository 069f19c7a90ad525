//! The principal a client certificate names, with `[server.tls]
//! client_principal`: mutual TLS as a way to authenticate, beside API keys
//! and bearer tokens.
//!
//! rustls has already verified the chain against `client_ca` when this runs;
//! here the leaf is only read. The principal is (issuer, subject) like a
//! token's, so `CN=alice` of one CA is never `CN=alice` of another, nor an API
//! key's `alice`. Groups are the subject's `OU` values; CEL rules see the
//! certificate's subject, issuer, serial and SAN names in `principal.claims`.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::config::tls::ClientPrincipal;
use crate::protocol::Principal;

/// The principal of a connection's client certificate, put in every request's
/// extensions by the listener.
#[derive(Debug, Clone)]
pub struct CertPrincipal(pub Arc<Principal>);

/// Why a verified certificate names no principal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertPrincipalError {
    #[error("the client certificate does not parse as X.509: {0}")]
    Unparsable(String),
    #[error("the client certificate's subject has no common name (CN)")]
    NoCommonName,
}

/// The principal `der` (a verified leaf certificate) names.
pub fn principal(der: &[u8], from: ClientPrincipal) -> Result<Principal, CertPrincipalError> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|e| CertPrincipalError::Unparsable(e.to_string()))?;
    let subject_dn = cert.subject().to_string();
    let issuer_dn = cert.issuer().to_string();
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::trim)
        // An empty CN names nobody (it would be one principal for every such certificate).
        .filter(|cn| !cn.is_empty())
        .map(str::to_owned);
    let subject = match from {
        ClientPrincipal::CommonName => common_name
            .clone()
            .ok_or(CertPrincipalError::NoCommonName)?,
        ClientPrincipal::Subject => subject_dn.clone(),
    };
    let groups: Vec<String> = cert
        .subject()
        .iter_organizational_unit()
        .filter_map(|ou| ou.as_str().ok().map(str::to_owned))
        .collect();
    let (mut dns, mut emails) = (Vec::new(), Vec::new());
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(n) => dns.push(Value::from(*n)),
                GeneralName::RFC822Name(n) => emails.push(Value::from(*n)),
                _ => {}
            }
        }
    }
    let mut claims = Map::new();
    claims.insert("subject".into(), json!(subject_dn));
    claims.insert("issuer".into(), json!(issuer_dn));
    claims.insert("common_name".into(), json!(common_name));
    claims.insert("serial".into(), json!(cert.raw_serial_as_string()));
    claims.insert("dns_names".into(), Value::Array(dns));
    claims.insert("emails".into(), Value::Array(emails));
    Ok(Principal::from_token(
        &issuer_dn,
        &subject,
        groups,
        Vec::new(),
        claims,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cert(subject: &[(rcgen::DnType, &str)], san: &[&str]) -> Vec<u8> {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name = rcgen::DistinguishedName::new();
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Test CA");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = san.iter().map(|s| (*s).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in subject {
            params.distinguished_name.push(t.clone(), *v);
        }
        params.signed_by(&key, &issuer).unwrap().der().to_vec()
    }

    #[test]
    fn the_common_name_of_a_ca_names_the_principal_with_ou_groups() {
        let der = cert(
            &[
                (rcgen::DnType::CommonName, "alice"),
                (rcgen::DnType::OrganizationalUnitName, "payments"),
                (rcgen::DnType::OrganizationName, "Acme"),
            ],
            &["alice.acme.test"],
        );
        let p = principal(&der, ClientPrincipal::CommonName).unwrap();
        assert_eq!(&*p.name, "CN=Test CA#alice");
        assert_eq!(&*p.subject, "alice");
        assert_eq!(p.issuer.as_deref(), Some("CN=Test CA"));
        assert_eq!(&*p.groups, ["payments".to_owned()]);
        assert!(p.scopes.is_empty());
        assert_eq!(p.claims.0["dns_names"], json!(["alice.acme.test"]));
        assert_eq!(p.claims.0["common_name"], "alice");
        assert!(p.claims.0["subject"].as_str().unwrap().contains("O=Acme"));
    }

    #[test]
    fn the_whole_subject_can_name_the_principal() {
        let der = cert(
            &[
                (rcgen::DnType::CommonName, "svc"),
                (rcgen::DnType::OrganizationName, "Acme"),
            ],
            &[],
        );
        let p = principal(&der, ClientPrincipal::Subject).unwrap();
        assert!(p.subject.contains("CN=svc"), "{}", p.subject);
        assert!(p.subject.contains("O=Acme"), "{}", p.subject);
    }

    #[test]
    fn no_common_name_names_nobody_and_garbage_does_not_parse() {
        let der = cert(&[(rcgen::DnType::OrganizationName, "Acme")], &[]);
        assert_eq!(
            principal(&der, ClientPrincipal::CommonName),
            Err(CertPrincipalError::NoCommonName)
        );
        assert!(matches!(
            principal(b"not a certificate", ClientPrincipal::CommonName),
            Err(CertPrincipalError::Unparsable(_))
        ));
    }
}
