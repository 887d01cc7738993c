//! Which samples: the one query language of every place that picks samples. The review list,
//! its counts and bulk decisions, an export's selection, a retry pass and the API each say
//! what they want as a `SampleQuery`, and `engine::samples::query` turns it into SQL in one
//! place, so "the filtered set" means the same wherever it is counted or acted on.
//!
//! Every field narrows the set; an empty list or `None` leaves that dimension open. The review
//! list's filter (`review::SampleFilter`, one value per dimension, kept in the page URL) and an
//! export's selection (`export::ExportSelection`, stored with the export) are forms of it.

use crate::generation::SampleState;
use crate::review::{ReviewState, TokenRange};
use serde::{Deserialize, Serialize};

/// Bounds on a sample's acceptance length (tokens the target emitted per verify step of its
/// draft), inclusive; a sample without a figure is outside any bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceRange {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl AcceptanceRange {
    pub fn is_open(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleQuery {
    /// Samples of these runs.
    pub runs: Vec<i64>,
    /// In these states (queue states or outcomes).
    pub states: Vec<SampleState>,
    /// Only finished samples (in a terminal state): what a decision or an export can touch.
    pub finished: bool,
    /// Only samples whose last try left a conversation (an answer, truncated or not).
    pub with_conversation: bool,
    /// With these finish reasons; `None` stands for a sample without one.
    pub finish_reasons: Vec<Option<String>>,
    /// Carrying at least one of these flags, chosen by a reviewer or set by the engine.
    pub flags_any: Vec<String>,
    /// Carrying none of these flags, whoever set them.
    pub flags_none: Vec<String>,
    /// In these review states.
    pub review: Vec<ReviewState>,
    /// Decided by this user.
    pub reviewer: Option<i64>,
    /// Of dataset rows in these categories; `None` stands for a row without one.
    pub categories: Vec<Option<String>>,
    pub prompt_tokens: TokenRange,
    pub reasoning_tokens: TokenRange,
    pub completion_tokens: TokenRange,
    pub acceptance: AcceptanceRange,
    /// Full-text search over the conversation, the reasoning and the answer
    /// (`websearch_to_tsquery` syntax: words, "a phrase", -excluded, or).
    pub text: Option<String>,
    /// Whose last error contains this text (case-insensitive).
    pub error_contains: Option<String>,
}

impl SampleQuery {
    /// The samples of one run.
    pub fn run(run_id: i64) -> Self {
        Self { runs: vec![run_id], ..Self::default() }
    }

    /// Whether it reads the dataset row (its category).
    pub fn needs_rows(&self) -> bool {
        !self.categories.is_empty()
    }

    /// Says what to change when the query cannot be right (an empty range, text too long).
    pub fn problems(&self) -> Option<String> {
        for (name, range) in [
            ("prompt", self.prompt_tokens),
            ("reasoning", self.reasoning_tokens),
            ("completion", self.completion_tokens),
        ] {
            if let (Some(min), Some(max)) = (range.min, range.max) {
                if min > max {
                    return Some(format!(
                        "the {name} token range is empty: its minimum {min} is above its maximum {max}"
                    ));
                }
            }
            if range.min.is_some_and(|v| v < 0) || range.max.is_some_and(|v| v < 0) {
                return Some(format!("{name} token counts cannot be negative"));
            }
        }
        let AcceptanceRange { min, max } = self.acceptance;
        if let (Some(min), Some(max)) = (min, max) {
            if min > max {
                return Some(format!(
                    "the acceptance range is empty: its minimum {min} is above its maximum {max}"
                ));
            }
        }
        if [min, max].into_iter().flatten().any(|v| !(v.is_finite() && v >= 1.0)) {
            return Some("an acceptance length is at least 1 (the target's own token each step)".into());
        }
        if self.text.as_ref().is_some_and(|q| q.len() > 500) {
            return Some("the search text is too long: keep it under 500 characters".into());
        }
        if self.error_contains.as_ref().is_some_and(|q| q.len() > 500) {
            return Some("the error text is too long: keep it under 500 characters".into());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_say_what_to_change() {
        assert_eq!(SampleQuery::run(1).problems(), None);
        let empty = SampleQuery {
            completion_tokens: TokenRange { min: Some(9), max: Some(1) },
            ..Default::default()
        };
        assert!(empty.problems().unwrap().contains("completion token range is empty"));
        let below_one =
            SampleQuery { acceptance: AcceptanceRange { min: Some(0.5), max: None }, ..Default::default() };
        assert!(below_one.problems().unwrap().contains("at least 1"));
        let inverted = SampleQuery {
            acceptance: AcceptanceRange { min: Some(3.0), max: Some(2.0) },
            ..Default::default()
        };
        assert!(inverted.problems().unwrap().contains("acceptance range is empty"));
        let long = SampleQuery { text: Some("x".repeat(501)), ..Default::default() };
        assert!(long.problems().unwrap().contains("too long"));
    }
}
