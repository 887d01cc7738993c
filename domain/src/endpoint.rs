use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A model a vLLM server offers, with its context length when the server reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedModel {
    pub id: String,
    pub max_model_len: Option<u32>,
}

/// A registered vLLM server as the UI sees it (the API key itself never leaves the server).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointSummary {
    pub id: i64,
    pub name: String,
    pub base_url: String,
    pub has_api_key: bool,
    pub models: Vec<ServedModel>,
    pub checked_at: Option<OffsetDateTime>,
    pub check_error: Option<String>,
    pub created_at: OffsetDateTime,
}
