//! The temporary storage the export test files write into: one export root and a staging
//! folder, removed when the `Env` is dropped.

use engine::export::{S3Options, Storage};
use std::path::PathBuf;

pub struct Env {
    _root: tempfile::TempDir,
    /// The canonical path of the temporary folder; exports land under `root/exports`.
    pub root: PathBuf,
    pub storage: Storage,
}

pub fn env() -> Env {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().canonicalize().unwrap();
    let mut storage = Storage::new(vec![path.join("exports")], S3Options::default());
    storage.staging = path.join("staging");
    std::fs::create_dir_all(path.join("exports")).unwrap();
    Env { _root: root, root: path, storage }
}
