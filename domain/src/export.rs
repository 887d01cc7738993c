//! Exports: which samples go into a training set, in what shape, and where it is written.

use crate::acceptance::Pooled;
use crate::generation::SampleState;
use crate::review::FlagReason;
use crate::review::{ReviewState, TokenRange};
use crate::sample_query::{AcceptanceRange, SampleQuery};
use crate::trainer::Trainer;
use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;

/// Which review states are exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewFilter {
    /// Only samples a reviewer approved.
    ApprovedOnly,
    /// Everything except samples a reviewer rejected (unreviewed ones included).
    NotRejected,
    /// Review state is ignored.
    All,
    /// Everything a reviewer neither rejected nor flagged (unreviewed ones included): where a
    /// new export starts.
    NotRejectedOrFlagged,
}

impl ReviewFilter {
    pub const ALL: [ReviewFilter; 4] = [
        ReviewFilter::NotRejectedOrFlagged,
        ReviewFilter::ApprovedOnly,
        ReviewFilter::NotRejected,
        ReviewFilter::All,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReviewFilter::ApprovedOnly => "approved_only",
            ReviewFilter::NotRejected => "not_rejected",
            ReviewFilter::All => "all",
            ReviewFilter::NotRejectedOrFlagged => "not_rejected_or_flagged",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// What the export form says.
    pub fn describe(self) -> &'static str {
        match self {
            ReviewFilter::NotRejectedOrFlagged => {
                "not rejected or flagged by a reviewer (unreviewed included)"
            }
            ReviewFilter::ApprovedOnly => "approved only",
            ReviewFilter::NotRejected => "not rejected (flagged and unreviewed included)",
            ReviewFilter::All => "every review state (rejected included)",
        }
    }

    /// Whether samples a reviewer rejected are left out.
    pub fn drops_rejected(self) -> bool {
        self != ReviewFilter::All
    }

    /// Whether samples a reviewer flagged are left out.
    pub fn drops_flagged(self) -> bool {
        matches!(self, ReviewFilter::ApprovedOnly | ReviewFilter::NotRejectedOrFlagged)
    }

    /// Whether samples nobody reviewed are left out.
    pub fn drops_unreviewed(self) -> bool {
        self == ReviewFilter::ApprovedOnly
    }

    /// The review states it keeps; empty (every state) for `All`.
    pub fn states(self) -> Vec<ReviewState> {
        if self == ReviewFilter::All {
            return Vec::new();
        }
        ReviewState::ALL
            .into_iter()
            .filter(|s| match s {
                ReviewState::Rejected => !self.drops_rejected(),
                ReviewState::Flagged => !self.drops_flagged(),
                ReviewState::Unreviewed => !self.drops_unreviewed(),
                ReviewState::Approved => true,
            })
            .collect()
    }
}

/// The flags the engine sets on a result that is not fit to train on (a cut or empty answer,
/// a repetition loop, leftover think markers): left out of a new export unless asked for.
pub const PROBLEM_FLAGS: [&str; 5] =
    ["truncated", "empty_answer", "reasoning_only", "repetition", "think_markers"];

/// An export's data file: which split a sample went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "export_split", rename_all = "snake_case"))]
pub enum ExportSplit {
    Train,
    Validation,
}

impl ExportSplit {
    pub fn as_str(self) -> &'static str {
        match self {
            ExportSplit::Train => "train",
            ExportSplit::Validation => "validation",
        }
    }
}

/// The thinking / non-thinking mix of the exported set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ThinkingMix {
    /// Keep every selected sample whatever its mode.
    Any,
    /// Only samples generated with thinking on.
    ThinkingOnly,
    /// Only samples generated with thinking off.
    NonThinkingOnly,
    /// Thin out the larger group (chosen by the seed) so that `thinking_share` of the samples
    /// whose mode is known think. Samples sent without a mode (server default) are all kept.
    Ratio { thinking_share: f64 },
}

/// Whether samples with the same exported conversation are written once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Duplicates {
    /// The first sample (lowest id) of each distinct conversation is kept.
    Remove,
    Keep,
}

/// Which samples an export takes. Fields added after the first release have defaults that keep
/// a stored spec meaning what it meant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportSelection {
    pub run_ids: Vec<i64>,
    /// Outcomes to take; by default only `ok`.
    #[serde(default = "default_outcomes")]
    pub outcomes: Vec<SampleState>,
    pub review: ReviewFilter,
    /// Samples carrying any of these flags (set by a reviewer or by the engine) are left out.
    #[serde(default)]
    pub excluded_flags: Vec<String>,
    /// Dataset row categories to take; empty takes every category.
    #[serde(default)]
    pub categories: Vec<String>,
    /// Bounds on completion tokens (inclusive).
    #[serde(default)]
    pub min_completion_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    /// Bounds on the draft's acceptance length (a sample without a figure is outside any).
    #[serde(default)]
    pub acceptance: AcceptanceRange,
    /// Keep, in each category, only this share (0–1] of its samples with the lowest acceptance
    /// length: where the draft does worst. Samples without a figure are left out.
    #[serde(default)]
    pub weakest: Option<f64>,
    #[serde(default = "default_duplicates")]
    pub duplicates: Duplicates,
    #[serde(default = "default_thinking_mix")]
    pub thinking: ThinkingMix,
    /// Seeds the thinking mix and the train/validation split: the same seed picks the same rows.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_outcomes() -> Vec<SampleState> {
    vec![SampleState::Ok]
}

fn default_duplicates() -> Duplicates {
    Duplicates::Remove
}

fn default_thinking_mix() -> ThinkingMix {
    ThinkingMix::Any
}

fn default_seed() -> u64 {
    42
}

impl ExportSelection {
    /// The candidates: finished samples with a conversation of the chosen runs, outcomes,
    /// categories and completion range, before the review filter and the excluded flags.
    pub fn candidates(&self) -> SampleQuery {
        let tokens = |v: Option<u32>| v.map(|v| v.min(i32::MAX as u32) as i32);
        SampleQuery {
            runs: self.run_ids.clone(),
            states: self.outcomes.clone(),
            with_conversation: true,
            categories: self.categories.iter().cloned().map(Some).collect(),
            completion_tokens: TokenRange {
                min: tokens(self.min_completion_tokens),
                max: tokens(self.max_completion_tokens),
            },
            acceptance: self.acceptance,
            ..SampleQuery::default()
        }
    }

    /// The samples the filters keep: the candidates in the review states the filter keeps and
    /// without any excluded flag. Duplicates, the thinking mix and the split are the export's
    /// own, decided after.
    pub fn query(&self) -> SampleQuery {
        SampleQuery {
            review: self.review.states(),
            flags_none: self.excluded_flags.clone(),
            ..self.candidates()
        }
    }

    /// The selection in words, as the loop's lineage names the export a draft was trained on:
    /// "run 3 · ok · not rejected or flagged · weakest 30% per category".
    pub fn in_words(&self) -> String {
        let mut parts = vec![match self.run_ids.as_slice() {
            [one] => format!("run {one}"),
            many => format!("runs {}", many.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")),
        }];
        parts.push(self.outcomes.iter().map(|o| o.as_str()).collect::<Vec<_>>().join("+"));
        parts.push(self.review.describe().split(" (").next().unwrap_or_default().to_string());
        if !self.categories.is_empty() {
            parts.push(format!("categories {}", self.categories.join(", ")));
        }
        match (self.min_completion_tokens, self.max_completion_tokens) {
            (None, None) => {}
            (Some(min), None) => parts.push(format!("completion ≥ {min} tokens")),
            (None, Some(max)) => parts.push(format!("completion ≤ {max} tokens")),
            (Some(min), Some(max)) => parts.push(format!("completion {min}–{max} tokens")),
        }
        match (self.acceptance.min, self.acceptance.max) {
            (None, None) => {}
            (Some(min), None) => parts.push(format!("acceptance ≥ {min}")),
            (None, Some(max)) => parts.push(format!("acceptance ≤ {max}")),
            (Some(min), Some(max)) => parts.push(format!("acceptance {min}–{max}")),
        }
        if let Some(share) = self.weakest {
            parts.push(format!("weakest {}% per category", (share * 100.0).round()));
        }
        match self.thinking {
            ThinkingMix::Any => {}
            ThinkingMix::ThinkingOnly => parts.push("thinking only".into()),
            ThinkingMix::NonThinkingOnly => parts.push("not thinking only".into()),
            ThinkingMix::Ratio { thinking_share } => {
                parts.push(format!("{}% thinking", (thinking_share * 100.0).round()))
            }
        }
        if self.duplicates == Duplicates::Keep {
            parts.push("duplicates kept".into());
        }
        parts.join(" · ")
    }

    /// Where a new export or preset starts: finished `ok` samples no reviewer rejected or
    /// flagged, without the engine's problem flags, duplicates removed.
    pub fn for_runs(run_ids: Vec<i64>) -> Self {
        Self {
            run_ids,
            outcomes: default_outcomes(),
            review: ReviewFilter::NotRejectedOrFlagged,
            excluded_flags: PROBLEM_FLAGS.iter().map(|f| f.to_string()).collect(),
            categories: Vec::new(),
            min_completion_tokens: None,
            max_completion_tokens: None,
            acceptance: AcceptanceRange::default(),
            weakest: None,
            duplicates: default_duplicates(),
            thinking: default_thinking_mix(),
            seed: default_seed(),
        }
    }

    /// The same selection, approved samples only.
    pub fn approved_only(self) -> Self {
        Self { review: ReviewFilter::ApprovedOnly, ..self }
    }
}

/// The shape of each exported row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// SpecForge: `{"id", "conversations": [{"role", "content", "reasoning_content"?}]}`.
    Conversations,
    /// OpenAI: `{"id", "messages": [{"role", "content", "reasoning_content"?}]}`.
    Messages,
    /// Pre-tokenized: `{"id", "input_ids", "loss_mask"}` with the target's tokenizer and template.
    Tokenized,
}

/// The file format of the data files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileFormat {
    Jsonl,
    Parquet,
}

impl FileFormat {
    pub fn extension(self) -> &'static str {
        match self {
            FileFormat::Jsonl => "jsonl",
            FileFormat::Parquet => "parquet",
        }
    }
}

/// Where an assistant turn's reasoning goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningStyle {
    /// A `reasoning_content` field on the assistant turn (SpecForge `--reasoning save`).
    Field,
    /// Inline at the start of the content: `<think>…</think>\n\n` then the answer.
    InlineThink,
    /// Dropped: only the visible answer is exported.
    Omit,
}

/// What happens to a tokenized row longer than the maximum length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlong {
    Truncate,
    Drop,
}

/// Where a tokenized row's ids come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's own ids when every selected sample has them, else re-tokenized.
    #[default]
    Auto,
    /// The ids the server reported (vLLM `return_token_ids`): exactly what the target model saw
    /// and wrote. An export whose selection holds a sample without them is refused.
    Captured,
    /// Rendered again with the chat template and encoded with the tokenizer.
    Retokenize,
}

/// How a conversation with several assistant turns becomes tokenized rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnRows {
    /// One row per conversation. From captured ids: its last request and answer, with every
    /// earlier answer the history repeats token for token supervised too; re-tokenized: the
    /// whole conversation, every assistant turn the template renders as it was written supervised.
    #[default]
    PerConversation,
    /// One row per assistant turn, `<id>_turn<k>`: from captured ids, each request and its
    /// answer; re-tokenized, the conversation up to that turn with only that turn supervised (as
    /// speculators writes rows).
    PerTurn,
}

/// How a row from captured ids ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// At the end-of-turn token the server stopped on (`<|im_end|>`): exactly what the model wrote.
    #[default]
    AsSampled,
    /// Followed by what the chat template writes after that token (Qwen's `\n`), supervised: the
    /// row SpecForge and speculators build from the same conversation. Needs the tokenizer folder.
    AsRendered,
}

/// The target model's tokenizer, for the tokenized layout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tokenization {
    /// A server folder (under a storage root) holding `tokenizer.json` and
    /// `tokenizer_config.json` (or `chat_template.jinja`). Needed only to re-tokenize: rows from
    /// captured ids use none.
    pub tokenizer_dir: String,
    pub max_length: u32,
    pub overlong: Overlong,
    #[serde(default)]
    pub source: TokenSource,
    #[serde(default)]
    pub turn_rows: TurnRows,
    /// How rows from captured ids end (re-tokenized rows always end as the template renders).
    #[serde(default)]
    pub turn_end: TurnEnd,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportFormat {
    /// The trainer the export is made for, whose loader decides the layout, the file format and
    /// how `tools` are written (`crate::trainer`); none leaves them to the fields below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer: Option<Trainer>,
    pub layout: Layout,
    #[serde(default = "default_file")]
    pub file: FileFormat,
    #[serde(default = "default_reasoning")]
    pub reasoning: ReasoningStyle,
    /// Required for the tokenized layout.
    #[serde(default)]
    pub tokenization: Option<Tokenization>,
    /// Share of rows (0 to 0.5) written to the validation file, chosen by the selection's seed.
    #[serde(default)]
    pub validation_share: f64,
}

fn default_file() -> FileFormat {
    FileFormat::Jsonl
}

fn default_reasoning() -> ReasoningStyle {
    ReasoningStyle::Field
}

/// Conversations as JSONL, reasoning in its own field, no validation split: what SpecForge and
/// most EAGLE-3 trainers read, and where the export form starts.
impl Default for ExportFormat {
    fn default() -> Self {
        Self {
            trainer: None,
            layout: Layout::Conversations,
            file: FileFormat::Jsonl,
            reasoning: ReasoningStyle::Field,
            tokenization: None,
            validation_share: 0.0,
        }
    }
}

/// Where the export is written. The export lands in a folder `export-<id>` inside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Destination {
    /// A folder under one of the configured storage roots (absolute, or relative to the first).
    Directory { path: String },
    /// An S3-compatible bucket and key prefix.
    S3 { bucket: String, prefix: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportSpec {
    pub selection: ExportSelection,
    pub format: ExportFormat,
    pub destination: Destination,
}

impl crate::stored::Stored for ExportSpec {
    const WHAT: &'static str = "export settings";
    /// 1: the first release (no `version`); 2: the `not_rejected_or_flagged` review filter.
    const VERSION: u32 = 2;
}

impl ExportSpec {
    /// One line saying what it exports and where, for tables.
    pub fn describe(&self) -> String {
        let s = &self.selection;
        let runs = match s.run_ids.as_slice() {
            [one] => format!("run {one}"),
            many => format!("{} runs", many.len()),
        };
        let outcomes = s.outcomes.iter().map(|o| o.as_str()).collect::<Vec<_>>().join("+");
        let layout = match (self.format.trainer, self.format.layout) {
            (Some(t), _) => t.label(),
            (None, Layout::Conversations) => "conversations",
            (None, Layout::Messages) => "messages",
            (None, Layout::Tokenized) => "tokenized",
        };
        let place = match &self.destination {
            Destination::Directory { path } => format!("→ {path}"),
            Destination::S3 { bucket, prefix } => format!("→ s3://{bucket}/{prefix}"),
        };
        format!(
            "{runs} · {outcomes} · review: {} · {layout} {} {place}",
            s.review.as_str().replace('_', " "),
            self.format.file.extension()
        )
    }

    /// Every problem that can be seen without the database, each phrased as what to change.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let s = &self.selection;
        if s.run_ids.is_empty() {
            problems.push("choose at least one run to export".to_string());
        }
        if s.outcomes.is_empty() {
            problems.push("choose at least one outcome to export".to_string());
        }
        if let Some(bad) = s.outcomes.iter().find(|o| !o.is_terminal()) {
            problems.push(format!("{bad} samples are not finished and cannot be exported"));
        }
        if let (Some(min), Some(max)) = (s.min_completion_tokens, s.max_completion_tokens) {
            if min > max {
                problems.push(format!("the token range is empty: min {min} is above max {max}"));
            }
        }
        if let Some(problem) = s.candidates().problems() {
            problems.push(problem);
        }
        if let Some(share) = s.weakest {
            if !(share > 0.0 && share <= 1.0) {
                problems.push(format!("the weakest share must be above 0 and at most 1, not {share}"));
            }
        }
        if let ThinkingMix::Ratio { thinking_share } = s.thinking {
            if !(0.0..=1.0).contains(&thinking_share) {
                problems.push(format!("the thinking share must be between 0 and 1, not {thinking_share}"));
            }
        }
        let f = &self.format;
        if let Some(trainer) = f.trainer {
            problems.extend(trainer.problems(f));
        }
        if !(0.0..=0.5).contains(&f.validation_share) {
            problems
                .push(format!("the validation share must be between 0 and 0.5, not {}", f.validation_share));
        }
        match (&f.layout, &f.tokenization) {
            (Layout::Tokenized, None) => {
                problems.push("the tokenized layout needs the target model's tokenizer folder".to_string())
            }
            (Layout::Tokenized, Some(t)) => {
                if t.tokenizer_dir.trim().is_empty() && t.source == TokenSource::Retokenize {
                    problems.push(
                        "give the folder holding tokenizer.json and tokenizer_config.json to re-tokenize"
                            .into(),
                    );
                } else if t.tokenizer_dir.trim().is_empty() && t.turn_end == TurnEnd::AsRendered {
                    problems.push(
                        "give the tokenizer folder: ending rows as the template renders a turn reads the \
                         template from it"
                            .into(),
                    );
                }
                if t.max_length < 16 {
                    problems
                        .push(format!("the maximum length must be at least 16 tokens, not {}", t.max_length));
                }
            }
            _ => {}
        }
        match &self.destination {
            Destination::Directory { path } if path.trim().is_empty() => {
                problems.push("give the folder to export into".to_string())
            }
            Destination::S3 { bucket, .. } if bucket.trim().is_empty() => {
                problems.push("give the bucket to export into".to_string())
            }
            _ => {}
        }
        problems
    }
}

/// Where an export job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "export_status", rename_all = "snake_case"))]
pub enum ExportStatus {
    /// Waiting for a process (the web server or a `draft-studio worker`) to claim it.
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl ExportStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExportStatus::Queued => "queued",
            ExportStatus::Running => "running",
            ExportStatus::Completed => "completed",
            ExportStatus::Failed => "failed",
            ExportStatus::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ExportStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One past export as the page lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportItem {
    pub id: i64,
    pub preset_name: Option<String>,
    /// What was exported and where, in one line.
    pub summary: String,
    pub status: ExportStatus,
    pub created_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub rows_total: Option<i64>,
    pub rows_done: i64,
    pub location: Option<String>,
    /// Written to an S3 bucket (no download through the app).
    pub to_s3: bool,
    pub bytes: Option<i64>,
    /// From the manifest, once completed.
    pub counts: Option<ExportCounts>,
    pub files: Vec<ExportFile>,
    pub error: Option<String>,
    /// The drafts trained on it, with their evaluations (the loop's lineage).
    #[serde(default)]
    pub trained: Vec<crate::lineage::TrainedDraft>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportCounts {
    pub written: u64,
    pub train: u64,
    pub validation: u64,
    pub duplicates_removed: u64,
    pub dropped: u64,
    pub truncated: u64,
    pub completion_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportFile {
    pub name: String,
    pub rows: Option<u64>,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PresetItem {
    pub id: i64,
    pub name: String,
    pub spec: ExportSpec,
    pub updated_at: OffsetDateTime,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOption {
    pub id: i64,
    pub name: String,
    pub ok_samples: i64,
}

/// What the export form offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportChoices {
    pub runs: Vec<RunOption>,
    pub flags: Vec<FlagReason>,
    /// Folders exports may be written under (DS_EXPORT_ROOTS); relative folders go under the first.
    pub roots: Vec<String>,
}

/// What a selection would export, shown before exporting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExportPreview {
    /// Samples matching the filters.
    pub matched: u64,
    /// Samples of the chosen runs, outcomes, categories and token range that the review and
    /// flag filters left out, each counted once under the first that applies: rejected by a
    /// reviewer, flagged (by a reviewer, or carrying an excluded flag), unreviewed (approved
    /// only). `matched` plus these three is every candidate.
    #[serde(default)]
    pub rejected_removed: u64,
    #[serde(default)]
    pub flagged_removed: u64,
    #[serde(default)]
    pub unreviewed_removed: u64,
    pub duplicates_removed: u64,
    /// Samples left out by the weakest-share cut (stronger ones, and those without a figure).
    #[serde(default)]
    pub acceptance_removed: u64,
    /// Samples left out to reach the thinking mix.
    pub mix_removed: u64,
    /// Samples that will be exported (before any tokenized-length drop).
    pub selected: u64,
    pub train: u64,
    pub validation: u64,
    pub thinking: u64,
    pub non_thinking: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reasoning_tokens: u64,
    /// Selected samples per outcome, e.g. `[("ok", 120)]`, sorted by name.
    pub by_outcome: Vec<(String, u64)>,
    /// Selected samples per review state, sorted by name.
    pub by_review_state: Vec<(String, u64)>,
    /// The draft's acceptance on the selected samples that have a figure, pooled, and per
    /// category (sorted by name).
    #[serde(default)]
    pub acceptance: Option<Pooled>,
    #[serde(default)]
    pub acceptance_by_category: Vec<(String, Pooled)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ExportSpec {
        ExportSpec {
            selection: ExportSelection::for_runs(vec![1]),
            format: ExportFormat::default(),
            destination: Destination::Directory { path: "sets".into() },
        }
    }

    #[test]
    fn a_selection_reads_as_words() {
        let plain = ExportSelection::for_runs(vec![3]);
        assert_eq!(plain.in_words(), "run 3 · ok · not rejected or flagged by a reviewer");
        let curated = ExportSelection {
            categories: vec!["math".into(), "code".into()],
            weakest: Some(0.3),
            max_completion_tokens: Some(2000),
            thinking: ThinkingMix::ThinkingOnly,
            ..ExportSelection::for_runs(vec![3, 4])
        };
        assert_eq!(
            curated.in_words(),
            "runs 3, 4 · ok · not rejected or flagged by a reviewer · categories math, code · \
             completion ≤ 2000 tokens · weakest 30% per category · thinking only"
        );
    }

    #[test]
    fn a_plain_spec_has_no_problems() {
        assert!(spec().problems().is_empty());
    }

    #[test]
    fn problems_say_what_to_change() {
        let mut s = spec();
        s.selection.run_ids.clear();
        s.selection.outcomes = vec![SampleState::Pending];
        s.format.layout = Layout::Tokenized;
        s.format.validation_share = 0.9;
        let problems = s.problems().join("; ");
        assert!(problems.contains("at least one run"), "{problems}");
        assert!(problems.contains("pending samples are not finished"), "{problems}");
        assert!(problems.contains("tokenizer folder"), "{problems}");
        assert!(problems.contains("validation share"), "{problems}");
    }
}
