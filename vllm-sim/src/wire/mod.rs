//! JSON shapes of the OpenAI-compatible API, as vLLM writes and reads them.

mod chunk;
mod completion;
mod error;
mod header;
mod request;
mod usage;

pub use chunk::{ChatChunk, ChunkChoice, Delta, FunctionDelta, ToolCallDelta};
pub use completion::{ChatCompletion, Choice, Message};
pub use error::ErrorBody;
pub use header::ResponseHeader;
pub use request::{ChatMessage, ChatRequest, StreamOptions, TokenizeRequest};
pub use usage::Usage;

use serde::{Serialize, Serializer};

/// Serialises as JSON `null`: for fields vLLM always sends but the simulator never fills.
#[derive(Clone, Copy, Debug)]
pub struct Null;

impl Serialize for Null {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}
