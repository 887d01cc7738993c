//! Where exports land, and how they land atomically.
//!
//! Files are first written to a staging folder. A folder destination stages beside the final
//! folder (`.export-<id>.partial`, same filesystem) and commits with one rename; an S3 destination
//! stages locally, then uploads the data files and the manifest last, deleting what it uploaded
//! if anything fails. A failed or cancelled export leaves nothing in the destination.

use crate::{Error, Result};
use domain::export::Destination;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, WriteMultipart};
use std::path::{Component, Path, PathBuf};
use tokio::io::AsyncReadExt;

/// Where exports may be written and how S3 is reached.
#[derive(Clone, Debug)]
pub struct Storage {
    /// Folders exports may be written under (DS_EXPORT_ROOTS); tokenizer folders are read from
    /// under them too.
    pub roots: Vec<PathBuf>,
    /// Local staging for S3 uploads.
    pub staging: PathBuf,
    pub s3: S3Options,
}

/// How to reach an S3-compatible service. `from_env` reads the usual AWS variables.
#[derive(Clone, Debug, Default)]
pub struct S3Options {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub allow_http: bool,
}

impl S3Options {
    /// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`), `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            endpoint: var("AWS_ENDPOINT_URL").or_else(|| var("AWS_ENDPOINT")),
            region: var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            allow_http: var("AWS_ALLOW_HTTP").is_some_and(|v| v == "true" || v == "1"),
        }
    }

    pub fn store(&self, bucket: &str) -> Result<AmazonS3> {
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(self.region.clone().unwrap_or_else(|| "us-east-1".into()))
            .with_allow_http(self.allow_http);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint).with_virtual_hosted_style_request(false);
        }
        if let (Some(key), Some(secret)) = (&self.access_key_id, &self.secret_access_key) {
            builder = builder.with_access_key_id(key).with_secret_access_key(secret);
        }
        builder.build().map_err(|e| Error::invalid(format!("the S3 destination cannot be used: {e}")))
    }
}

impl Storage {
    pub fn new(roots: Vec<PathBuf>, s3: S3Options) -> Self {
        Self { roots, staging: std::env::temp_dir().join("draft-studio-exports"), s3 }
    }

    /// Resolves a user-given folder under a storage root, refusing `..`, and anything whose
    /// real path (symlinks followed) leaves the roots. Creates the folder when `create`.
    pub fn resolve(&self, given: &str, create: bool) -> Result<PathBuf> {
        let given = given.trim();
        let path = Path::new(given);
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(Error::invalid(format!("{given}: paths with \"..\" are refused")));
        }
        let Some(first) = self.roots.first() else {
            return Err(Error::invalid("no storage root is configured (DS_EXPORT_ROOTS)"));
        };
        let candidate = if path.is_absolute() { path.to_path_buf() } else { first.join(path) };
        let root = self.roots.iter().find(|root| candidate.starts_with(root)).ok_or_else(|| {
            Error::invalid(format!("{given} is outside the storage roots: {}", self.roots_list()))
        })?;
        if create {
            std::fs::create_dir_all(root).map_err(|e| {
                Error::invalid(format!("the storage root {} cannot be created: {e}", root.display()))
            })?;
        }
        let real_root = root.canonicalize().map_err(|e| {
            Error::invalid(format!("the storage root {} cannot be opened: {e}", root.display()))
        })?;
        let escapes = || Error::invalid(format!("{given} leads outside the storage roots through a link"));
        // Check the deepest part that exists before creating anything, so a link out of the
        // roots is refused before a folder is made at its far end.
        let mut existing = candidate.as_path();
        while !existing.exists() {
            existing = existing.parent().unwrap_or(root);
        }
        let real_existing =
            existing.canonicalize().map_err(|e| Error::invalid(format!("{given} cannot be opened: {e}")))?;
        if !real_existing.starts_with(&real_root) {
            return Err(escapes());
        }
        if create {
            std::fs::create_dir_all(&candidate)
                .map_err(|e| Error::invalid(format!("{given} cannot be created: {e}")))?;
        }
        let real =
            candidate.canonicalize().map_err(|e| Error::invalid(format!("{given} cannot be opened: {e}")))?;
        if !real.starts_with(&real_root) {
            return Err(escapes());
        }
        Ok(real)
    }

    fn roots_list(&self) -> String {
        self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    }

    /// The staging folder for an export (created empty) and where it will be committed.
    pub fn prepare(&self, destination: &Destination, export_id: i64) -> Result<Target> {
        let name = folder_name(export_id);
        match destination {
            Destination::Directory { path } => {
                let parent = self.resolve(path, true)?;
                let final_dir = parent.join(&name);
                if final_dir.exists() {
                    return Err(Error::conflict(format!("{} already exists", final_dir.display())));
                }
                let staging = parent.join(format!(".{name}.partial"));
                fresh_dir(&staging)?;
                Ok(Target::Directory { staging, final_dir })
            }
            Destination::S3 { bucket, prefix } => {
                let store = self.s3.store(bucket)?;
                let key_prefix = key_prefix(prefix, &name)?;
                let staging = self.staging.join(format!("{name}.partial"));
                fresh_dir(&staging)?;
                Ok(Target::S3 { staging, store, bucket: bucket.clone(), key_prefix })
            }
        }
    }
}

impl Storage {
    /// Removes what an export that never finished may have left behind — its staging folder
    /// beside a folder destination (or on this host for S3), and objects it had uploaded under
    /// its S3 key — so that nothing partial stays in the destination.
    pub async fn remove_leftovers(&self, destination: &Destination, export_id: i64) -> Result<()> {
        let name = folder_name(export_id);
        match destination {
            Destination::Directory { path } => {
                // A destination that cannot be resolved any more holds nothing of this export.
                let Ok(parent) = self.resolve(path, false) else { return Ok(()) };
                remove_dir(&parent.join(format!(".{name}.partial"))).await
            }
            Destination::S3 { bucket, prefix } => {
                remove_dir(&self.staging.join(format!("{name}.partial"))).await?;
                let store = self.s3.store(bucket)?;
                let key = ObjectPath::from(format!("{}/", key_prefix(prefix, &name)?));
                let keys: Vec<ObjectPath> = store
                    .list(Some(&key))
                    .map_ok(|meta| meta.location)
                    .try_collect()
                    .await
                    .map_err(|e| Error::invalid(format!("listing s3://{bucket}/{key} failed: {e}")))?;
                for key in keys {
                    store
                        .delete(&key)
                        .await
                        .map_err(|e| Error::invalid(format!("deleting s3://{bucket}/{key} failed: {e}")))?;
                }
                Ok(())
            }
        }
    }
}

async fn remove_dir(path: &Path) -> Result<()> {
    match tokio::fs::remove_dir_all(path).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Internal(anyhow::anyhow!(
            "removing the unfinished export's staging folder {}: {e}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// The key under which an S3 export lands: `<prefix>/export-<id>`.
fn key_prefix(prefix: &str, name: &str) -> Result<String> {
    let prefix = prefix.trim().trim_matches('/');
    if prefix.split('/').any(|part| part == "..") {
        return Err(Error::invalid(format!("{prefix}: prefixes with \"..\" are refused")));
    }
    Ok(if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") })
}

pub fn folder_name(export_id: i64) -> String {
    format!("export-{export_id}")
}

fn fresh_dir(path: &Path) -> Result<()> {
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| Error::Internal(e.into()))?;
    }
    std::fs::create_dir_all(path).map_err(|e| Error::Internal(e.into()))
}

/// An export being written.
pub enum Target {
    Directory { staging: PathBuf, final_dir: PathBuf },
    S3 { staging: PathBuf, store: AmazonS3, bucket: String, key_prefix: String },
}

impl Target {
    pub fn staging(&self) -> &Path {
        match self {
            Target::Directory { staging, .. } | Target::S3 { staging, .. } => staging,
        }
    }

    /// Makes the staged `files` (data files first, manifest last) visible at the destination
    /// and returns where they are.
    pub async fn commit(self, files: &[String]) -> Result<String> {
        match self {
            Target::Directory { staging, final_dir } => {
                tokio::fs::rename(&staging, &final_dir).await.map_err(|e| {
                    Error::Internal(anyhow::anyhow!("committing {}: {e}", final_dir.display()))
                })?;
                Ok(final_dir.display().to_string())
            }
            Target::S3 { staging, store, bucket, key_prefix } => {
                let mut uploaded = Vec::new();
                let mut result = Ok(());
                for name in files {
                    let key = ObjectPath::from(format!("{key_prefix}/{name}"));
                    uploaded.push(key.clone());
                    if let Err(e) = upload(&store, &staging.join(name), &key).await {
                        result = Err(e);
                        break;
                    }
                }
                let _ = tokio::fs::remove_dir_all(&staging).await;
                match result {
                    Ok(()) => Ok(format!("s3://{bucket}/{key_prefix}")),
                    Err(e) => {
                        for key in uploaded {
                            let _ = store.delete(&key).await;
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    /// Removes everything staged (a failed or cancelled export).
    pub async fn discard(self) {
        let staging = self.staging().to_path_buf();
        if let Err(e) = tokio::fs::remove_dir_all(&staging).await {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %staging.display(), error = %e, "could not remove an export's staging folder");
            }
        }
    }
}

/// Streams a file to the store in parts, so memory stays bounded whatever its size.
async fn upload(store: &AmazonS3, file: &Path, key: &ObjectPath) -> Result<()> {
    let s3_error = |e: object_store::Error| Error::invalid(format!("uploading {key} failed: {e}"));
    let mut source = tokio::fs::File::open(file).await.map_err(|e| Error::Internal(e.into()))?;
    let upload = store.put_multipart(key).await.map_err(s3_error)?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, 8 << 20);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = source.read(&mut buf).await.map_err(|e| Error::Internal(e.into()))?;
        if n == 0 {
            break;
        }
        writer.wait_for_capacity(4).await.map_err(s3_error)?;
        writer.write(&buf[..n]);
    }
    writer.finish().await.map_err(s3_error)?;
    Ok(())
}
