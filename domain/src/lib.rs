//! Types shared by the browser UI (`app`, compiled to wasm) and the server-side `engine`.
//!
//! Nothing here touches I/O. Enums that are stored in PostgreSQL derive `sqlx::Type` only under
//! the `sqlx` feature, which the engine enables and the wasm build never sees.

pub mod acceptance;
pub mod access;
pub mod conversation;
pub mod dashboard;
pub mod dataset;
pub mod endpoint;
pub mod error;
pub mod export;
pub mod generation;
pub mod lineage;
pub mod review;
pub mod role;
pub mod run_form;
pub mod sample_query;
pub mod stored;
pub mod token;
pub mod trainer;
pub mod units;
pub mod user;

pub use access::{api_access, page_access, PageAccess};
pub use endpoint::{EndpointCapacity, EndpointRun, EndpointSummary, ServedModel};
pub use role::Role;
pub use user::{UserSummary, Viewer};
