//! Test certificate authorities and the certificates they issue (rcgen), as PEM files in
//! a directory kept for the life of the test process.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A directory of PEM files, kept (not removed) so that servers started from it outlive
/// the test that made it.
pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    /// A new, empty directory named `PREFIX…` under the temporary directory.
    pub fn new(prefix: &str) -> Pki {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .unwrap()
            .keep();
        Pki { dir }
    }

    /// The path of file `name` in the directory.
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// A self-signed certificate authority named `bertqa test CA NAME`.
pub fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("bertqa test CA {name}"));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// Writes `STEM.pem` and `STEM.key` into `dir`: a certificate for `names` (the first is
/// also its common name) with `usage`, issued by `issuer`.
pub fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    dir: &Path,
    stem: &str,
) {
    leaf_with(issuer, names, usage, dir, stem, |_| {});
}

/// [`leaf`], with `adjust` applied to the certificate's parameters before signing.
pub fn leaf_with(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    dir: &Path,
    stem: &str,
    adjust: impl FnOnce(&mut CertificateParams),
) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, names[0].to_string());
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    adjust(&mut params);
    let cert = params.signed_by(&key, issuer).unwrap();
    std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
}
