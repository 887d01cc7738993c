//! Hugging Face hub datasets, fetched as the hub's Parquet conversion of one config and split:
//! `GET {endpoint}/api/datasets/{repo}/parquet/{config}/{split}` lists the files, each is
//! streamed to `<files_dir>/hub/...` within the upload limit.

use super::DatasetSettings;
use crate::{Error, Result};
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use tokio::io::AsyncWriteExt;

pub struct HubClient {
    http: reqwest::Client,
    endpoint: url::Url,
    token: Option<String>,
    dir: PathBuf,
    limit: u64,
}

impl HubClient {
    pub fn new(http: reqwest::Client, settings: &DatasetSettings, token: Option<String>) -> Self {
        HubClient {
            http,
            endpoint: settings.hub_endpoint.clone(),
            token: token.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()),
            dir: settings.files_dir.join("hub"),
            limit: settings.upload_limit,
        }
    }

    fn get(&self, url: &str) -> reqwest::RequestBuilder {
        let request = self.http.get(url);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// The Parquet file URLs of `repo`'s `config`/`split`.
    pub async fn parquet_urls(&self, repo: &str, config: &str, split: &str) -> Result<Vec<String>> {
        check_name("repository", repo, true)?;
        check_name("config", config, false)?;
        check_name("split", split, false)?;
        let base = self.endpoint.as_str().trim_end_matches('/');
        let url = format!("{base}/api/datasets/{repo}/parquet/{config}/{split}");
        let response = self.get(&url).send().await.map_err(|e| {
            Error::invalid(format!("cannot reach the hub at {base} (DS_HF_ENDPOINT): {}", root_cause(&e)))
        })?;
        let status = response.status();
        match status.as_u16() {
            200 => {}
            401 | 403 => {
                return Err(Error::invalid(format!(
                    "the hub refused access to `{repo}` ({status}); it may be gated or private: give an access token that may read it"
                )))
            }
            404 => {
                return Err(Error::invalid(format!(
                    "the hub has no dataset `{repo}` with config `{config}` and split `{split}`; check the names on the dataset's page"
                )))
            }
            _ => return Err(Error::invalid(format!("the hub answered {status} when listing `{repo}`; try again later"))),
        }
        let urls: Vec<String> = response
            .json()
            .await
            .map_err(|e| Error::invalid(format!("the hub's file list for `{repo}` is not readable: {e}")))?;
        if urls.is_empty() {
            return Err(Error::invalid(format!("the hub lists no files for `{repo}` {config}/{split}")));
        }
        Ok(urls)
    }

    /// The commit of `repo`'s Parquet conversion branch (`refs/convert/parquet`), recorded as the
    /// revision the rows were read at. `None` when the hub does not say (a mirror without the
    /// revision API, say): the import goes on, and the manifest then names no revision.
    pub async fn parquet_revision(&self, repo: &str) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Revision {
            sha: String,
        }
        let base = self.endpoint.as_str().trim_end_matches('/');
        let url = format!("{base}/api/datasets/{repo}/revision/refs%2Fconvert%2Fparquet");
        let response = self.get(&url).send().await.and_then(|r| r.error_for_status());
        match response {
            Ok(r) => match r.json::<Revision>().await {
                Ok(revision) if !revision.sha.trim().is_empty() => Some(revision.sha),
                _ => None,
            },
            Err(e) => {
                tracing::info!(repo, error = %root_cause(&e), "the hub gave no revision for the parquet conversion");
                None
            }
        }
    }

    /// Downloads the files (or only the first), reusing complete earlier downloads.
    pub async fn download(
        &self,
        repo: &str,
        config: &str,
        split: &str,
        first_only: bool,
    ) -> Result<Vec<PathBuf>> {
        let urls = self.parquet_urls(repo, config, split).await?;
        let key = hex::encode(&Sha256::digest(format!("{repo}\n{config}\n{split}").as_bytes())[..12]);
        let dir = self.dir.join(key);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| Error::Internal(e.into()))?;
        let mut files = Vec::new();
        let mut total = 0u64;
        for (i, url) in urls.iter().enumerate().take(if first_only { 1 } else { urls.len() }) {
            let path = dir.join(format!("{i:05}.parquet"));
            if let Ok(meta) = tokio::fs::metadata(&path).await {
                total += meta.len();
                files.push(path);
                continue;
            }
            total += self.download_one(url, &path, total).await?;
            files.push(path);
        }
        Ok(files)
    }

    async fn download_one(&self, url: &str, path: &PathBuf, so_far: u64) -> Result<u64> {
        let response = self
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| Error::invalid(format!("downloading {url} failed: {}", root_cause(&e))))?;
        let partial = path.with_extension("part");
        let mut file = tokio::fs::File::create(&partial).await.map_err(|e| Error::Internal(e.into()))?;
        let mut stream = response.bytes_stream();
        let mut bytes = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| Error::invalid(format!("downloading {url} failed: {}", root_cause(&e))))?;
            bytes += chunk.len() as u64;
            if so_far + bytes > self.limit {
                drop(file);
                let _ = tokio::fs::remove_file(&partial).await;
                return Err(Error::invalid(format!(
                    "the dataset is larger than the download limit of {} (DS_UPLOAD_LIMIT)",
                    domain::units::bytes(self.limit)
                )));
            }
            file.write_all(&chunk).await.map_err(|e| Error::Internal(e.into()))?;
        }
        file.flush().await.map_err(|e| Error::Internal(e.into()))?;
        // Renamed only once complete, so a cut download is never taken for a finished one.
        tokio::fs::rename(&partial, path).await.map_err(|e| Error::Internal(e.into()))?;
        Ok(bytes)
    }
}

fn check_name(what: &str, value: &str, owner_slash: bool) -> Result<()> {
    let ok_chars = value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    let slashes = value.matches('/').count();
    let ok = !value.is_empty()
        && ok_chars
        && !value.contains("..")
        && (if owner_slash {
            slashes <= 1 && !value.starts_with('/') && !value.ends_with('/')
        } else {
            slashes == 0
        });
    if ok {
        Ok(())
    } else if owner_slash {
        Err(Error::invalid(format!("`{value}` is not a hub dataset name; write it as owner/name")))
    } else {
        Err(Error::invalid(format!("`{value}` is not a valid {what} name")))
    }
}

fn root_cause(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}
