use serde::Serialize;

/// The fields every chat response and chunk starts with; constant for a whole stream.
#[derive(Clone, Debug, Serialize)]
pub struct ResponseHeader {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
}

impl ResponseHeader {
    pub fn for_chunks(id: String, created: u64, model: String) -> Self {
        Self { id, object: "chat.completion.chunk", created, model }
    }

    pub fn for_completion(id: String, created: u64, model: String) -> Self {
        Self { id, object: "chat.completion", created, model }
    }
}
