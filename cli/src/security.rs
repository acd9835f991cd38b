//! TLS and credential flags (the CLI contract, README.md: `--ssl*`, `--header*`), flattened
//! into the server flags of every command that talks to Triton.
//!
//! Header values are parsed by clap into [`Secret`] with an infallible parser, so that
//! clap never echoes a malformed value in its error; they are checked afterwards by
//! [`security`], whose errors name the flag and the header, never the value.

use std::path::PathBuf;

use clap::Args;

use bertqa::backend::{Header, Secret, Security, TlsConfig};
use bertqa::Error;

/// TLS, mutual TLS, and metadata sent with every call.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = super::heading::SECURITY)]
pub struct SecurityArgs {
    /// Use TLS (implied by https:// and by every other --ssl-* flag)
    #[arg(long)]
    pub ssl: bool,
    /// CA certificates (PEM) to trust instead of the system's
    #[arg(long, value_name = "FILE")]
    pub ssl_root_cert: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS, with --ssl-client-key
    #[arg(long, value_name = "FILE", requires = "ssl_client_key")]
    pub ssl_client_cert: Option<PathBuf>,
    /// Private key (PEM) of --ssl-client-cert
    #[arg(long, value_name = "FILE", requires = "ssl_client_cert")]
    pub ssl_client_key: Option<PathBuf>,
    /// Name to expect in the server's certificate, not the URL's host
    #[arg(long, value_name = "NAME")]
    pub ssl_target_name: Option<String>,
    /// Header sent with every call; the value is never shown
    #[arg(long = "header", value_name = "KEY:VALUE", value_parser = secret_arg)]
    pub headers: Vec<Secret>,
    /// Like --header, the value from environment variable ENVVAR
    #[arg(long = "header-env", value_name = "KEY=ENVVAR")]
    pub header_env: Vec<String>,
    /// Like --header, the value from file PATH
    #[arg(long = "header-file", value_name = "KEY=PATH")]
    pub header_file: Vec<PathBuf>,
}

fn secret_arg(s: &str) -> Result<Secret, std::convert::Infallible> {
    Ok(Secret::new(s))
}

/// Resolves the flags into the library's [`Security`]: reads environment variables and
/// files, validates every header.
pub(crate) fn security(args: &SecurityArgs) -> bertqa::Result<Security> {
    let mut headers = Vec::new();
    for spec in &args.headers {
        let Some((name, value)) = spec.expose().split_once(':') else {
            return Err(Error::Config(
                "--header takes KEY:VALUE (no ':' found; the value is not shown)".into(),
            ));
        };
        headers.push(Header::new(name, &Secret::new(value.trim_start()))?);
    }
    for spec in &args.header_env {
        let Some((name, var)) = spec.split_once('=') else {
            return Err(Error::Config(format!(
                "--header-env {spec}: expected KEY=ENVVAR"
            )));
        };
        let value = match std::env::var(var) {
            Ok(v) => v,
            Err(std::env::VarError::NotPresent) => {
                return Err(Error::Config(format!(
                    "--header-env {spec}: environment variable {var} is not set"
                )))
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(Error::Config(format!(
                    "--header-env {spec}: environment variable {var} is not valid UTF-8"
                )))
            }
        };
        headers.push(Header::new(name, &Secret::new(value))?);
    }
    for spec in &args.header_file {
        let text = spec.to_string_lossy();
        let Some((name, path)) = text.split_once('=') else {
            return Err(Error::Config(format!(
                "--header-file {text}: expected KEY=PATH"
            )));
        };
        let contents = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let value = contents.trim_end_matches(['\n', '\r']);
        headers.push(Header::new(name, &Secret::new(value)).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("--header-file {path}: {m}")),
            e => e,
        })?);
    }
    let wants_tls = args.ssl
        || args.ssl_root_cert.is_some()
        || args.ssl_client_cert.is_some()
        || args.ssl_client_key.is_some()
        || args.ssl_target_name.is_some();
    let tls = wants_tls.then(|| TlsConfig {
        root_cert: args.ssl_root_cert.clone(),
        client_cert: args.ssl_client_cert.clone(),
        client_key: args.ssl_client_key.clone(),
        target_name: args.ssl_target_name.clone(),
    });
    Ok(Security { tls, headers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        s: SecurityArgs,
    }

    #[test]
    fn headers_from_flag_env_and_file_never_show_their_values() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "from-file-s3cret\n").unwrap();
        // A variable name no other test uses; set once, read here only.
        std::env::set_var("BERTQA_TEST_SECURITY_HEADER", "from-env-s3cret");
        let t = T::parse_from([
            "t".to_string(),
            "--header".into(),
            "a: from-flag-s3cret".into(),
            "--header-env".into(),
            "b=BERTQA_TEST_SECURITY_HEADER".into(),
            "--header-file".into(),
            format!("c={}", file.display()),
        ]);
        assert!(!format!("{t:?}").contains("s3cret"), "{t:?}");
        let s = security(&t.s).unwrap();
        assert!(s.tls.is_none());
        let names: Vec<&str> = s.headers.iter().map(|h| h.name()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(!format!("{s:?}").contains("s3cret"));
        let mut md = tonic::metadata::MetadataMap::new();
        bertqa::backend::security::apply(&s.headers, &mut md);
        assert_eq!(md.get("a").unwrap(), "from-flag-s3cret");
        assert_eq!(md.get("b").unwrap(), "from-env-s3cret");
        assert_eq!(md.get("c").unwrap(), "from-file-s3cret");
    }

    #[test]
    fn malformed_header_flags_are_named_not_echoed() {
        for args in [
            vec!["--header", "no-colon-s3cret"],
            vec!["--header", ":s3cret"],
            vec!["--header-env", "k=BERTQA_TEST_SURELY_UNSET_VAR"],
            vec!["--header-file", "k=/nonexistent/s3cret-dir/key"],
        ] {
            let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap();
            let e = security(&t.s).unwrap_err().to_string();
            let shown = e.replace("/nonexistent/s3cret-dir/key", "PATH");
            assert!(!shown.contains("s3cret"), "{args:?}: {e}");
        }
    }

    #[test]
    fn any_ssl_flag_turns_tls_on() {
        let t = T::parse_from(["t", "--ssl-target-name", "triton.local"]);
        let tls = security(&t.s).unwrap().tls.unwrap();
        assert_eq!(tls.target_name.as_deref(), Some("triton.local"));
        assert!(T::try_parse_from(["t", "--ssl-client-cert", "c.pem"]).is_err());
    }
}
