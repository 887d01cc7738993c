//! Start-up configuration, read from environment variables. Every variable has a documented
//! default; a malformed value stops start-up with a message naming the variable.

use std::{net::SocketAddr, path::PathBuf};

/// Every variable the server reads: name, default, meaning. The README's table lists the same
/// (a test keeps the two in step).
pub const VARIABLES: &[(&str, &str, &str)] = &[
    ("DS_BIND", "127.0.0.1:3000", "address and port the web server listens on"),
    (
        "DATABASE_URL",
        "postgres://postgres@127.0.0.1:5432/draft_studio",
        "PostgreSQL database (created if missing)",
    ),
    (
        "DS_DATA_DIR",
        ".data",
        "where the server keeps its own files (session key, uploads, default storage roots)",
    ),
    (
        "DS_DATASET_ROOTS",
        "$DS_DATA_DIR/datasets:demo",
        "colon-separated folders that server-side dataset paths must be inside",
    ),
    ("DS_EXPORT_ROOTS", "$DS_DATA_DIR/exports", "colon-separated folders that exports may be written under"),
    ("DS_UPLOAD_LIMIT", "10GiB", "largest accepted browser upload (bytes, or with KiB/MiB/GiB)"),
    (
        "DS_SESSION_SECRET",
        "generated into $DS_DATA_DIR/session.key",
        "at least 32 characters used to sign session cookies",
    ),
    ("DS_PUBLIC_URL", "unset", "the URL users open; when it is https, cookies are marked Secure"),
    ("DS_LOG_FORMAT", "plain", "log format: plain or json (filter with RUST_LOG)"),
    ("DS_WORKERS", "true", "whether `serve` also runs generation workers (false: web only)"),
    (
        "DS_WORKER_LEASE",
        "30",
        "seconds a sample stays leased to a worker that stops renewing it (then another worker takes it)",
    ),
    (
        "DS_ALERT_STALL",
        "300",
        "seconds a running run may finish no sample before the `no_progress` alert is raised",
    ),
    ("DS_HF_ENDPOINT", "https://huggingface.co", "Hugging Face hub endpoint for dataset downloads"),
    (
        "DS_SITE_ROOT",
        "target/site",
        "folder with the built browser assets (written by `cargo xtask build`; LEPTOS_SITE_ROOT also works)",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Plain,
    Json,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: SocketAddr,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub dataset_roots: Vec<PathBuf>,
    pub export_roots: Vec<PathBuf>,
    pub upload_limit: u64,
    pub session_secret: Option<String>,
    pub public_url: Option<url::Url>,
    pub log_format: LogFormat,
    pub run_workers: bool,
    pub worker_lease_secs: u64,
    pub alert_stall_secs: u64,
    pub hf_endpoint: url::Url,
    pub site_root: PathBuf,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{var}: expected {expected}, got `{got}`")]
pub struct ConfigError {
    pub var: &'static str,
    pub expected: &'static str,
    pub got: String,
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (the process environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let err = |var, expected, got: &str| ConfigError { var, expected, got: got.to_string() };

        let bind = match get("DS_BIND") {
            None => SocketAddr::from(([127, 0, 0, 1], 3000)),
            Some(v) => {
                v.parse().map_err(|_| err("DS_BIND", "an address and port like 127.0.0.1:3000", &v))?
            }
        };
        let database_url = get("DATABASE_URL")
            .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/draft_studio".to_string());
        if !(database_url.starts_with("postgres://") || database_url.starts_with("postgresql://")) {
            return Err(err("DATABASE_URL", "a postgres:// URL", &database_url));
        }
        let data_dir = PathBuf::from(get("DS_DATA_DIR").unwrap_or_else(|| ".data".into()));
        let dataset_roots = match get("DS_DATASET_ROOTS") {
            None => vec![data_dir.join("datasets"), PathBuf::from("demo")],
            Some(v) => {
                parse_roots(&v).ok_or_else(|| err("DS_DATASET_ROOTS", "colon-separated folder paths", &v))?
            }
        };
        let export_roots = match get("DS_EXPORT_ROOTS") {
            None => vec![data_dir.join("exports")],
            Some(v) => {
                parse_roots(&v).ok_or_else(|| err("DS_EXPORT_ROOTS", "colon-separated folder paths", &v))?
            }
        };
        let upload_limit = match get("DS_UPLOAD_LIMIT") {
            None => 10 << 30,
            Some(v) => parse_size(&v).ok_or_else(|| {
                err("DS_UPLOAD_LIMIT", "a size in bytes or with KiB/MiB/GiB, like 10GiB", &v)
            })?,
        };
        let session_secret = match get("DS_SESSION_SECRET") {
            Some(v) if v.len() < 32 => {
                return Err(err("DS_SESSION_SECRET", "at least 32 characters", "(too short)"))
            }
            other => other,
        };
        let public_url = match get("DS_PUBLIC_URL") {
            None => None,
            Some(v) => Some(
                url::Url::parse(&v)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
                    .ok_or_else(|| err("DS_PUBLIC_URL", "an http:// or https:// URL", &v))?,
            ),
        };
        let log_format = match get("DS_LOG_FORMAT").as_deref().map(str::to_ascii_lowercase) {
            None => LogFormat::Plain,
            Some(v) if v == "plain" => LogFormat::Plain,
            Some(v) if v == "json" => LogFormat::Json,
            Some(v) => return Err(err("DS_LOG_FORMAT", "plain or json", &v)),
        };
        let run_workers = match get("DS_WORKERS") {
            None => true,
            Some(v) => parse_bool(&v).ok_or_else(|| err("DS_WORKERS", "true or false", &v))?,
        };
        let worker_lease_secs = match get("DS_WORKER_LEASE") {
            None => 30,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| (1..=3600).contains(s))
                .ok_or_else(|| err("DS_WORKER_LEASE", "a number of seconds from 1 to 3600", &v))?,
        };
        let alert_stall_secs = match get("DS_ALERT_STALL") {
            None => 300,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| (10..=86_400).contains(s))
                .ok_or_else(|| err("DS_ALERT_STALL", "a number of seconds from 10 to 86400", &v))?,
        };
        let hf_raw = get("DS_HF_ENDPOINT").unwrap_or_else(|| "https://huggingface.co".into());
        let hf_endpoint = url::Url::parse(&hf_raw)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| err("DS_HF_ENDPOINT", "an http:// or https:// URL", &hf_raw))?;
        let site_root = PathBuf::from(
            get("DS_SITE_ROOT").or_else(|| get("LEPTOS_SITE_ROOT")).unwrap_or_else(|| "target/site".into()),
        );
        Ok(Config {
            bind,
            database_url,
            data_dir,
            dataset_roots,
            export_roots,
            upload_limit,
            session_secret,
            public_url,
            log_format,
            run_workers,
            worker_lease_secs,
            alert_stall_secs,
            hf_endpoint,
            site_root,
        })
    }

    /// Cookies get the Secure flag when users reach the app over https.
    pub fn alert_policy(&self) -> engine::dashboard::AlertPolicy {
        engine::dashboard::AlertPolicy {
            stall_after: std::time::Duration::from_secs(self.alert_stall_secs),
            ..Default::default()
        }
    }

    pub fn worker_options(&self) -> engine::generation::WorkerOptions {
        engine::generation::WorkerOptions {
            lease: std::time::Duration::from_secs(self.worker_lease_secs),
            ..Default::default()
        }
    }

    /// Where datasets may be read from and kept, for the engine.
    pub fn dataset_settings(&self) -> engine::datasets::DatasetSettings {
        engine::datasets::DatasetSettings {
            roots: self.dataset_roots.clone(),
            files_dir: self.data_dir.clone(),
            upload_limit: self.upload_limit,
            hub_endpoint: self.hf_endpoint.clone(),
            max_row_bytes: engine::datasets::DEFAULT_MAX_ROW_BYTES,
            jobs: Default::default(),
        }
    }

    pub fn secure_cookies(&self) -> bool {
        self.public_url.as_ref().is_some_and(|u| u.scheme() == "https")
    }

    /// The URL to print for people: the public one, else the bind address.
    pub fn display_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.to_string(),
            None => format!("http://{}", self.bind),
        }
    }
}

fn parse_roots(value: &str) -> Option<Vec<PathBuf>> {
    let roots: Vec<PathBuf> =
        value.split(':').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect();
    (!roots.is_empty()).then_some(roots)
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// "10GiB", "512 MiB", "2048" (bytes).
pub fn parse_size(value: &str) -> Option<u64> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    number.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_need_no_variables() {
        let c = config(&[]).unwrap();
        assert_eq!(c.bind.to_string(), "127.0.0.1:3000");
        assert_eq!(c.upload_limit, 10 << 30);
        assert_eq!(c.dataset_roots[0], PathBuf::from(".data/datasets"));
        assert!(c.run_workers);
        assert!(!c.secure_cookies());
    }

    #[test]
    fn malformed_values_name_the_variable_and_the_expectation() {
        let cases = [
            ("DS_BIND", "localhost", "DS_BIND: expected an address and port"),
            ("DATABASE_URL", "mysql://x", "DATABASE_URL: expected a postgres:// URL"),
            ("DS_UPLOAD_LIMIT", "ten", "DS_UPLOAD_LIMIT: expected a size"),
            ("DS_LOG_FORMAT", "xml", "DS_LOG_FORMAT: expected plain or json, got `xml`"),
            ("DS_WORKERS", "maybe", "DS_WORKERS: expected true or false"),
            ("DS_WORKER_LEASE", "0", "DS_WORKER_LEASE: expected a number of seconds from 1 to 3600"),
            ("DS_ALERT_STALL", "5", "DS_ALERT_STALL: expected a number of seconds from 10 to 86400"),
            ("DS_SESSION_SECRET", "short", "DS_SESSION_SECRET: expected at least 32 characters"),
            ("DS_PUBLIC_URL", "ftp://x", "DS_PUBLIC_URL: expected an http:// or https:// URL"),
        ];
        for (var, value, message) in cases {
            let e = config(&[(var, value)]).unwrap_err().to_string();
            assert!(e.starts_with(message), "{var}={value}: {e}");
        }
    }

    #[test]
    fn sizes_and_https_are_understood() {
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("2048"), Some(2048));
        assert_eq!(parse_size("1 GiB"), Some(1 << 30));
        let c =
            config(&[("DS_PUBLIC_URL", "https://studio.example"), ("DS_DATASET_ROOTS", "/a:/b")]).unwrap();
        assert!(c.secure_cookies());
        assert_eq!(c.dataset_roots, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
    }

    #[test]
    fn the_readme_documents_every_variable() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md at the workspace root");
        for (name, _, _) in VARIABLES {
            assert!(readme.contains(&format!("`{name}`")), "README does not document {name}");
        }
    }
}
