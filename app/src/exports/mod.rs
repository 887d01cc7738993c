//! The Exports page: saved presets with a one-click export, a form that builds an export (with a
//! preview of what it would take), and past exports with live progress and file downloads.
//!
//! - `api`: the server functions (namespace `exports/`, engineers and admins).
//! - `form`: the form's fields and their conversion to and from an `ExportSpec`.
//! - `presets`, `builder`, `history`: the page's three sections; `page` puts them together.

pub mod api;
mod builder;
mod confirm;
pub mod form;
pub(crate) mod history;
mod page;
mod presets;

pub use page::ExportsPage;
