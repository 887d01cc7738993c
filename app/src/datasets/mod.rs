//! The Datasets section: the list, the new-dataset form (path, upload, hub) with a preview and
//! an overridable mapping, and the dataset page with live import progress and a row browser.

pub mod api;
mod charts;
pub mod detail;
pub mod list;
pub mod new;
mod upload;
