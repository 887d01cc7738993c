use serde::Serialize;

/// An error body in either of vLLM's shapes. `code` is the HTTP status as a number.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ErrorBody<'a> {
    /// vLLM ≥ 0.10.1: `{"error":{"message","type","param","code"}}`.
    Nested { error: ErrorDetail<'a> },
    /// vLLM < 0.10.1: `{"object":"error","message","type","param","code"}`.
    Flat {
        object: &'static str,
        #[serde(flatten)]
        detail: ErrorDetail<'a>,
    },
}

#[derive(Debug, Serialize)]
pub struct ErrorDetail<'a> {
    pub message: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub param: Option<&'a str>,
    pub code: u16,
}

impl<'a> ErrorBody<'a> {
    pub fn new(legacy: bool, message: &'a str, kind: &'a str, param: Option<&'a str>, code: u16) -> Self {
        let detail = ErrorDetail { message, kind, param, code };
        if legacy {
            Self::Flat { object: "error", detail }
        } else {
            Self::Nested { error: detail }
        }
    }
}

/// The payload of an error event inside an SSE stream. vLLM always wraps it in `error`; the
/// nested shape already is, the flat one gets wrapped.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum StreamError<'a> {
    AlreadyWrapped(&'a ErrorBody<'a>),
    Wrapped { error: &'a ErrorBody<'a> },
}

impl ErrorBody<'_> {
    pub fn in_stream(&self) -> StreamError<'_> {
        match self {
            Self::Nested { .. } => StreamError::AlreadyWrapped(self),
            Self::Flat { .. } => StreamError::Wrapped { error: self },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_shapes_and_their_stream_forms() {
        let nested = ErrorBody::new(false, "bad", "BadRequestError", Some("max_tokens"), 400);
        let expected = json!({"error": {"message": "bad", "type": "BadRequestError", "param": "max_tokens", "code": 400}});
        assert_eq!(serde_json::to_value(&nested).unwrap(), expected);
        assert_eq!(serde_json::to_value(nested.in_stream()).unwrap(), expected);

        let flat = ErrorBody::new(true, "bad", "BadRequestError", None, 400);
        let expected = json!({"object": "error", "message": "bad", "type": "BadRequestError", "param": null, "code": 400});
        assert_eq!(serde_json::to_value(&flat).unwrap(), expected);
        assert_eq!(serde_json::to_value(flat.in_stream()).unwrap(), json!({"error": expected}));
    }
}
