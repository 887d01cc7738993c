//! The loop's lineage: each revision of a draft, the export it was trained on, and how it
//! accepted on the same held-out prompts, with each revision's change from the one before.
//!
//! ```text
//!   export #12 (random 200) ──trained──▶ draft@v1 ──evaluated──▶ run #31: 1.76 [1.70, 1.82]
//!   export #15 (weighted)   ──trained──▶ draft@v2 ──evaluated──▶ run #34: 2.12, +0.36 [0.30, 0.42]
//! ```
//!
//! A revision is registered once, with the export it was trained on (none for a starting draft
//! or one trained elsewhere); the engine keeps it in `draft_revisions`, and every evaluation run
//! names a registered revision.

use crate::acceptance::{DraftRef, PairedFigure, Pooled};
use serde::{Deserialize, Serialize};

/// A registered draft revision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DraftRevision {
    pub draft: DraftRef,
    pub trained_on: Option<TrainedOn>,
    pub created_at: time::OffsetDateTime,
}

/// The export a revision was trained on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainedOn {
    pub export_id: i64,
    /// Its selection in words (`ExportSelection::in_words`).
    pub selection: String,
    /// The training rows it wrote, once completed.
    pub train_rows: Option<u64>,
}

/// A revision to register: `NAME` or `NAME@REVISION`, and the export it was trained on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewDraftRevision {
    pub name: String,
    #[serde(default)]
    pub revision: String,
    #[serde(default)]
    pub trained_on: Option<i64>,
}

impl NewDraftRevision {
    pub fn draft(&self) -> DraftRef {
        DraftRef { name: self.name.trim().to_string(), revision: self.revision.trim().to_string() }
    }

    /// What to fix before it can be registered.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.name.trim().is_empty() {
            problems.push("name the draft".to_string());
        }
        if self.name.contains('@') {
            problems.push("a draft's name cannot hold `@`: it separates the name from the revision".into());
        }
        problems
    }
}

/// `NAME` or `NAME@REVISION`, as the CLI and the API take a draft.
pub fn parse_draft(text: &str) -> Option<DraftRef> {
    let (name, revision) = text.trim().split_once('@').unwrap_or((text.trim(), ""));
    (!name.trim().is_empty())
        .then(|| DraftRef { name: name.trim().to_string(), revision: revision.trim().to_string() })
}

/// One evaluation of a revision, as an export's page lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvaluationFigure {
    pub run_id: i64,
    pub name: String,
    pub dataset: String,
    pub overall: Option<Pooled>,
}

/// A draft trained on an export, with its evaluations (newest first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainedDraft {
    pub draft: DraftRef,
    pub evaluations: Vec<EvaluationFigure>,
}

/// The loop of one draft on one held-out dataset: its revisions in the order they were
/// registered, each with its newest completed evaluation on that dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopTable {
    pub draft: String,
    pub dataset_id: i64,
    pub dataset: String,
    /// The categories the evaluations cover, in column order.
    pub categories: Vec<String>,
    pub steps: Vec<LoopStep>,
}

/// One revision in the chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopStep {
    pub revision: String,
    pub trained_on: Option<TrainedOn>,
    /// Its newest completed evaluation on the dataset; none yet: the rest is empty.
    pub evaluation: Option<LoopEvaluation>,
    /// Against the previous step with an evaluation, on the prompts both sent.
    pub change: Option<StepChange>,
}

/// What an evaluation measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopEvaluation {
    pub run_id: i64,
    pub name: String,
    pub overall: Option<Pooled>,
    /// Aligned with `LoopTable::categories`.
    pub by_category: Vec<Option<Pooled>>,
}

/// A revision's change from the one before it, paired prompt by prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepChange {
    /// The revision it is compared with.
    pub from_revision: String,
    pub shared_prompts: u64,
    pub overall: Option<PairedFigure>,
    /// Aligned with `LoopTable::categories`.
    pub by_category: Vec<Option<PairedFigure>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_is_a_name_and_an_optional_revision() {
        assert_eq!(parse_draft(" tiny@v2 "), Some(DraftRef { name: "tiny".into(), revision: "v2".into() }));
        assert_eq!(parse_draft("tiny"), Some(DraftRef { name: "tiny".into(), revision: String::new() }));
        assert_eq!(parse_draft("@v2"), None);
        assert_eq!(parse_draft(""), None);
    }

    #[test]
    fn a_revision_needs_a_name_without_the_separator() {
        let new =
            |name: &str| NewDraftRevision { name: name.into(), revision: "v1".into(), trained_on: Some(3) };
        assert!(new("tiny").problems().is_empty());
        assert_eq!(new(" ").problems(), vec!["name the draft".to_string()]);
        assert!(new("a@b").problems()[0].contains('@'));
    }
}
