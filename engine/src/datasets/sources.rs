//! Turning a source (server path, upload, hub dataset) into local files to read.

use super::{hub, uploads, DatasetSettings};
use crate::{Error, Result};
use domain::dataset::{Format, SourceSpec};
use std::path::{Component, Path, PathBuf};

/// Local files holding a dataset, all in one format.
#[derive(Clone, Debug)]
pub struct LocalFiles {
    pub files: Vec<PathBuf>,
    pub format: Format,
    pub bytes_total: u64,
}

/// Resolves a path source or an upload to its file and format. Hub sources are fetched by
/// [`fetch`], which downloads.
pub fn locate(settings: &DatasetSettings, source: &SourceSpec) -> Result<Option<LocalFiles>> {
    let (path, name) = match source {
        SourceSpec::Path { path } => {
            let resolved = resolve_path(settings, path)?;
            (resolved, path.clone())
        }
        SourceSpec::Upload { upload_id, .. } => uploads::resolve(settings, upload_id)?,
        SourceSpec::Hub { .. } => return Ok(None),
    };
    let format = super::format::detect(&path, &name)?;
    let bytes_total = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    Ok(Some(LocalFiles { files: vec![path], format, bytes_total }))
}

/// Any source's files, downloading a hub dataset first (`first_only` stops after one file, for
/// previews).
pub async fn fetch(
    settings: &DatasetSettings,
    http: &reqwest::Client,
    source: &SourceSpec,
    first_only: bool,
) -> Result<LocalFiles> {
    if let Some(files) = locate(settings, source)? {
        return Ok(files);
    }
    let SourceSpec::Hub { repo, config, split, token } = source else {
        unreachable!("only hub sources download")
    };
    let hub = hub::HubClient::new(http.clone(), settings, token.clone());
    let files = hub.download(repo, config, split, first_only).await?;
    let bytes_total = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    Ok(LocalFiles { files, format: Format::Parquet, bytes_total })
}

/// A server-side path, refused unless it resolves (links followed) inside a dataset root.
pub fn resolve_path(settings: &DatasetSettings, path: &str) -> Result<PathBuf> {
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid("give the path of a file on the server"));
    }
    let given = Path::new(trimmed);
    if given.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(Error::invalid(format!(
            "`{trimmed}` contains `..`; give a path inside the dataset folders ({})",
            roots_list(settings)
        )));
    }
    let candidates: Vec<PathBuf> = if given.is_absolute() {
        vec![given.to_path_buf()]
    } else {
        std::iter::once(given.to_path_buf()).chain(settings.roots.iter().map(|r| r.join(given))).collect()
    };
    let Some(found) = candidates.iter().find(|p| p.exists()) else {
        return Err(Error::invalid(format!(
            "no file at `{trimmed}` (looked in the working folder and in {})",
            roots_list(settings)
        )));
    };
    let canonical =
        found.canonicalize().map_err(|e| Error::invalid(format!("cannot resolve `{trimmed}`: {e}")))?;
    let inside = settings
        .roots
        .iter()
        .filter_map(|root| root.canonicalize().ok())
        .any(|root| canonical.starts_with(&root));
    if !inside {
        return Err(Error::invalid(format!(
            "`{trimmed}` is outside the dataset folders ({}); move the file into one, or add its folder to DS_DATASET_ROOTS",
            roots_list(settings)
        )));
    }
    if canonical.is_dir() {
        return Err(Error::invalid(format!("`{trimmed}` is a folder; name a file inside it")));
    }
    Ok(canonical)
}

fn roots_list(settings: &DatasetSettings) -> String {
    settings.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
}
