//! Review: decisions on samples, the filter of the sample list (which round-trips through a URL
//! query string), and what the list, the sample page and the queue show.

use crate::generation::SampleState;
use crate::sample_query::{AcceptanceRange, SampleQuery};
use serde::{Deserialize, Serialize};
use std::{collections::BTreeMap, fmt};
use time::OffsetDateTime;

/// A sample's review decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "review_state", rename_all = "snake_case"))]
pub enum ReviewState {
    Unreviewed,
    Approved,
    Rejected,
    Flagged,
}

impl ReviewState {
    pub const ALL: [ReviewState; 4] =
        [ReviewState::Unreviewed, ReviewState::Approved, ReviewState::Rejected, ReviewState::Flagged];

    pub fn as_str(self) -> &'static str {
        match self {
            ReviewState::Unreviewed => "unreviewed",
            ReviewState::Approved => "approved",
            ReviewState::Rejected => "rejected",
            ReviewState::Flagged => "flagged",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

impl fmt::Display for ReviewState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a reviewer decides about one sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
    /// Needs at least one reason.
    Flag,
}

impl Decision {
    pub fn state(self) -> ReviewState {
        match self {
            Decision::Approve => ReviewState::Approved,
            Decision::Reject => ReviewState::Rejected,
            Decision::Flag => ReviewState::Flagged,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::Flag => "flag",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Decision::Approve, Decision::Reject, Decision::Flag].into_iter().find(|d| d.as_str() == s)
    }
}

/// Kinds of audit-log entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "review_event_kind", rename_all = "snake_case"))]
pub enum ReviewEventKind {
    Decision,
    Bulk,
    Undo,
    /// A reviewer sent the sample back for generation; its decision was dropped.
    Regenerate,
    /// A retry pass re-queued the sample; its decision was dropped.
    Requeue,
}

impl ReviewEventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewEventKind::Decision => "decision",
            ReviewEventKind::Bulk => "bulk",
            ReviewEventKind::Undo => "undo",
            ReviewEventKind::Regenerate => "regenerate",
            ReviewEventKind::Requeue => "requeue",
        }
    }
}

/// A reason a sample can be flagged with (the list lives in the `flag_reasons` table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagReason {
    pub code: String,
    pub label: String,
    /// Offered to reviewers.
    pub selectable: bool,
    /// Set by the engine when a result arrives.
    pub automatic: bool,
}

/// How the sample list is ordered. Every order is paged by key (value, id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    #[default]
    Oldest,
    Newest,
    LongestCompletion,
    ShortestCompletion,
    /// Most reasoning tokens first (counted from the ids); samples without a count last.
    LongestReasoning,
    Slowest,
    /// Lowest acceptance length first (where the draft does worst); samples without a figure last.
    LowestAcceptance,
    /// Highest acceptance length first; samples without a figure last.
    HighestAcceptance,
}

impl SortKey {
    pub const ALL: [SortKey; 8] = [
        SortKey::Oldest,
        SortKey::Newest,
        SortKey::LongestCompletion,
        SortKey::ShortestCompletion,
        SortKey::LongestReasoning,
        SortKey::Slowest,
        SortKey::LowestAcceptance,
        SortKey::HighestAcceptance,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Oldest => "oldest",
            SortKey::Newest => "newest",
            SortKey::LongestCompletion => "longest",
            SortKey::ShortestCompletion => "shortest",
            SortKey::LongestReasoning => "longest_reasoning",
            SortKey::Slowest => "slowest",
            SortKey::LowestAcceptance => "lowest_acceptance",
            SortKey::HighestAcceptance => "highest_acceptance",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Oldest => "oldest first",
            SortKey::Newest => "newest first",
            SortKey::LongestCompletion => "longest completion",
            SortKey::ShortestCompletion => "shortest completion",
            SortKey::LongestReasoning => "longest reasoning",
            SortKey::Slowest => "slowest",
            SortKey::LowestAcceptance => "lowest acceptance",
            SortKey::HighestAcceptance => "highest acceptance",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// An inclusive token-count range; either end may be open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRange {
    pub min: Option<i32>,
    pub max: Option<i32>,
}

impl TokenRange {
    pub fn is_open(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }
}

/// The sample list's filter. It lives in the page URL (`to_query`/`from_query`), so a filtered
/// view can be shared as a link and the back button returns to the previous filter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleFilter {
    pub run: Option<i64>,
    pub outcome: Option<SampleState>,
    pub finish_reason: Option<String>,
    pub flag: Option<String>,
    pub review: Option<ReviewState>,
    pub reviewer: Option<i64>,
    pub category: Option<String>,
    pub prompt_tokens: TokenRange,
    pub reasoning_tokens: TokenRange,
    pub completion_tokens: TokenRange,
    /// Bounds on the draft's acceptance length.
    #[serde(default)]
    pub acceptance: AcceptanceRange,
    /// Full-text search over the conversation, the reasoning and the answer.
    pub q: Option<String>,
    pub sort: SortKey,
}

/// Stands for a NULL finish_reason or category in URLs and counts.
pub const NONE_VALUE: &str = "-";

/// The filter dimensions the list counts samples by, value by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FacetDim {
    Run,
    Outcome,
    FinishReason,
    Flag,
    Review,
    Reviewer,
    Category,
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value.trim().parse().map_err(|_| format!("{key} must be a whole number, not \"{value}\""))
}

impl SampleFilter {
    /// The samples the filter shows.
    pub fn query(&self) -> SampleQuery {
        self.query_without(None)
    }

    /// The same with one dimension left open: what the counts of that dimension's values are
    /// taken over, so a reviewer sees what choosing another value would give.
    pub fn query_without(&self, open: Option<FacetDim>) -> SampleQuery {
        let keep = |dim: FacetDim| open != Some(dim);
        // The list's "-" is the query's NULL.
        let nullable = |value: &Option<String>, dim: FacetDim| -> Vec<Option<String>> {
            match value {
                Some(v) if keep(dim) => vec![Some(v.clone()).filter(|v| v != NONE_VALUE)],
                _ => vec![],
            }
        };
        SampleQuery {
            runs: self.run.filter(|_| keep(FacetDim::Run)).into_iter().collect(),
            states: self.outcome.filter(|_| keep(FacetDim::Outcome)).into_iter().collect(),
            finish_reasons: nullable(&self.finish_reason, FacetDim::FinishReason),
            flags_any: self.flag.clone().filter(|_| keep(FacetDim::Flag)).into_iter().collect(),
            review: self.review.filter(|_| keep(FacetDim::Review)).into_iter().collect(),
            reviewer: self.reviewer.filter(|_| keep(FacetDim::Reviewer)),
            categories: nullable(&self.category, FacetDim::Category),
            prompt_tokens: self.prompt_tokens,
            reasoning_tokens: self.reasoning_tokens,
            completion_tokens: self.completion_tokens,
            acceptance: self.acceptance,
            text: self.q.clone(),
            ..SampleQuery::default()
        }
    }

    /// The filter as URL query pairs, leaving out what is unset.
    pub fn to_query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(v) = self.run {
            q.push(("run", v.to_string()));
        }
        if let Some(v) = self.outcome {
            q.push(("outcome", v.as_str().to_string()));
        }
        if let Some(v) = &self.finish_reason {
            q.push(("finish_reason", v.clone()));
        }
        if let Some(v) = &self.flag {
            q.push(("flag", v.clone()));
        }
        if let Some(v) = self.review {
            q.push(("review", v.as_str().to_string()));
        }
        if let Some(v) = self.reviewer {
            q.push(("reviewer", v.to_string()));
        }
        if let Some(v) = &self.category {
            q.push(("category", v.clone()));
        }
        for (prefix, range) in [
            ("prompt", &self.prompt_tokens),
            ("reasoning", &self.reasoning_tokens),
            ("completion", &self.completion_tokens),
        ] {
            if let Some(v) = range.min {
                q.push((range_key(prefix, "min"), v.to_string()));
            }
            if let Some(v) = range.max {
                q.push((range_key(prefix, "max"), v.to_string()));
            }
        }
        if let Some(v) = self.acceptance.min {
            q.push(("acceptance_min", v.to_string()));
        }
        if let Some(v) = self.acceptance.max {
            q.push(("acceptance_max", v.to_string()));
        }
        if let Some(v) = &self.q {
            q.push(("q", v.clone()));
        }
        if self.sort != SortKey::default() {
            q.push(("sort", self.sort.as_str().to_string()));
        }
        q
    }

    /// Reads a filter from URL query pairs. Empty values count as unset; anything else that
    /// cannot be read is an error naming the parameter.
    pub fn from_query(pairs: &BTreeMap<String, String>) -> Result<Self, String> {
        let get = |k: &str| pairs.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mut f = SampleFilter::default();
        if let Some(v) = get("run") {
            f.run = Some(parse_num("run", v)?);
        }
        if let Some(v) = get("outcome") {
            f.outcome = Some(SampleState::parse(v).ok_or_else(|| format!("unknown outcome \"{v}\""))?);
        }
        f.finish_reason = get("finish_reason").map(str::to_string);
        f.flag = get("flag").map(str::to_string);
        if let Some(v) = get("review") {
            f.review = Some(ReviewState::parse(v).ok_or_else(|| format!("unknown review state \"{v}\""))?);
        }
        if let Some(v) = get("reviewer") {
            f.reviewer = Some(parse_num("reviewer", v)?);
        }
        f.category = get("category").map(str::to_string);
        for (prefix, range) in [
            ("prompt", &mut f.prompt_tokens),
            ("reasoning", &mut f.reasoning_tokens),
            ("completion", &mut f.completion_tokens),
        ] {
            if let Some(v) = get(range_key(prefix, "min")) {
                range.min = Some(parse_num(range_key(prefix, "min"), v)?);
            }
            if let Some(v) = get(range_key(prefix, "max")) {
                range.max = Some(parse_num(range_key(prefix, "max"), v)?);
            }
        }
        for (key, end) in
            [("acceptance_min", &mut f.acceptance.min), ("acceptance_max", &mut f.acceptance.max)]
        {
            if let Some(v) = get(key) {
                *end =
                    Some(v.parse().map_err(|_| format!("{key} must be a number such as 2.5, not \"{v}\""))?);
            }
        }
        f.q = get("q").map(str::to_string);
        if let Some(v) = get("sort") {
            f.sort = SortKey::parse(v).ok_or_else(|| format!("unknown sort \"{v}\""))?;
        }
        Ok(f)
    }
}

fn range_key(prefix: &str, end: &str) -> &'static str {
    match (prefix, end) {
        ("prompt", "min") => "prompt_min",
        ("prompt", _) => "prompt_max",
        ("reasoning", "min") => "reasoning_min",
        ("reasoning", _) => "reasoning_max",
        ("completion", "min") => "completion_min",
        _ => "completion_max",
    }
}

/// One row of the sample list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub id: i64,
    pub run_id: i64,
    pub run_name: String,
    pub state: SampleState,
    pub finish_reason: Option<String>,
    pub review_state: ReviewState,
    pub flags: Vec<String>,
    pub auto_flags: Vec<String>,
    pub prompt_tokens: Option<i32>,
    pub reasoning_tokens: Option<i32>,
    pub completion_tokens: Option<i32>,
    pub duration_ms: Option<i32>,
    /// The draft's acceptance length on the sample, when its server reported one.
    #[serde(default)]
    pub acceptance: Option<f64>,
    pub reviewer: Option<String>,
    /// The start of the last user turn.
    pub preview: String,
    /// The sample was generated again after a reviewer's decision, which was dropped.
    #[serde(default)]
    pub regenerated_since_decision: bool,
}

/// One page of the list and the key to fetch the next one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplePage {
    pub rows: Vec<SampleRow>,
    /// Pass back as `after` for the next page; `None` on the last page.
    pub next: Option<String>,
}

/// How many samples of the filtered set have each value of one filter dimension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FacetValue {
    /// The value as it goes in the URL.
    pub value: String,
    pub label: String,
    pub count: i64,
}

/// Counts per filter value. Each dimension is counted with every other filter applied but
/// its own, so a reviewer sees what choosing another value would give.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facets {
    /// Whether every count is exact or scaled up from a sample of the samples.
    #[serde(default)]
    pub counted: Counted,
    pub total: i64,
    pub run: Vec<FacetValue>,
    pub outcome: Vec<FacetValue>,
    pub finish_reason: Vec<FacetValue>,
    pub flag: Vec<FacetValue>,
    pub review: Vec<FacetValue>,
    pub reviewer: Vec<FacetValue>,
    pub category: Vec<FacetValue>,
}

/// How the counts panel's numbers were made. A filter the stored tally answers (runs, outcomes,
/// flags, review states, reviewers, categories) is always counted exactly; one that needs a pass
/// over the samples (a text search, a length or acceptance range) is counted exactly when the
/// pass is quick, else estimated, as search engines do past a bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Counted {
    /// Every sample counted.
    #[default]
    Exact,
    /// Scaled up from the `sampled` samples on a random set of table pages, of `of` in all:
    /// each count is the sample's times `of / sampled`, rounded. A value the sample holds none
    /// of is missing.
    Estimated { sampled: i64, of: i64 },
}

impl Counted {
    pub fn is_estimate(self) -> bool {
        matches!(self, Counted::Estimated { .. })
    }
}

/// One turn of the conversation as sent (and regenerated).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: String,
    pub content: String,
    pub reasoning: Option<String>,
    /// The calls an assistant turn made.
    #[serde(default)]
    pub tool_calls: Vec<crate::conversation::ToolCall>,
    /// The call a `tool` turn answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// One try of a sample, as the sample page lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptView {
    pub result: String,
    pub counted: bool,
    pub endpoint: Option<String>,
    pub started_at: OffsetDateTime,
    pub finished_at: OffsetDateTime,
    pub http_status: Option<i32>,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub finish_reason: Option<String>,
    pub completion_tokens: Option<i32>,
    pub duration_ms: Option<i32>,
}

/// One audit-log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewEventView {
    pub id: i64,
    pub kind: ReviewEventKind,
    pub actor: Option<String>,
    pub at: OffsetDateTime,
    pub from_state: ReviewState,
    pub to_state: ReviewState,
    pub from_flags: Vec<String>,
    pub to_flags: Vec<String>,
    pub note: Option<String>,
    pub undone: bool,
}

/// The answer, rendered on the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RenderedText {
    /// Markdown rendered to HTML and sanitized.
    Html(String),
    /// Too long to render as markdown; shown as plain text.
    Plain(String),
}

/// Everything the sample page shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleDetail {
    pub id: i64,
    pub run_id: i64,
    pub run_name: String,
    pub run_settings: serde_json::Value,
    pub category: Option<String>,
    pub row_key: String,
    pub state: SampleState,
    pub thinking: Option<bool>,
    pub finish_reason: Option<String>,
    /// The conversation before the generated turn.
    pub turns: Vec<Turn>,
    pub reasoning: Option<String>,
    pub answer: Option<String>,
    pub answer_rendered: Option<RenderedText>,
    /// The calls the generated answer makes.
    #[serde(default)]
    pub answer_tool_calls: Vec<crate::conversation::ToolCall>,
    /// The functions the dataset row offers (`[{"type": "function", ...}]`).
    #[serde(default)]
    pub tools: Option<serde_json::Value>,
    pub prompt_tokens: Option<i32>,
    pub completion_tokens: Option<i32>,
    /// Counted from the token ids when the server gave them (else its own figure); none when
    /// the split is unknown. So are the answer's and the calls'.
    pub reasoning_tokens: Option<i32>,
    #[serde(default)]
    pub answer_tokens: Option<i32>,
    #[serde(default)]
    pub tool_call_tokens: Option<i32>,
    pub ttft_ms: Option<i32>,
    pub duration_ms: Option<i32>,
    /// How the server's draft did on the sample, when it runs one and reported it.
    #[serde(default)]
    pub spec_decode: Option<crate::acceptance::SpecDecode>,
    pub endpoint: Option<String>,
    pub error: Option<String>,
    pub attempts: Vec<AttemptView>,
    pub review_state: ReviewState,
    pub review_version: i32,
    pub flags: Vec<String>,
    pub auto_flags: Vec<String>,
    pub note: Option<String>,
    pub reviewer: Option<String>,
    pub reviewed_at: Option<OffsetDateTime>,
    /// Who holds the sample in queue mode, when it is not the viewer.
    pub leased_by_other: Option<String>,
    pub events: Vec<ReviewEventView>,
    /// Whether the last decision can be undone now.
    pub can_undo: bool,
    /// Set when the sample was generated again after a decision (the decision was dropped and
    /// it waits for a new one).
    #[serde(default)]
    pub regenerated_since: Option<RegeneratedSince>,
}

/// A decision dropped because its sample was sent back for generation after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegeneratedSince {
    /// What the reviewer had decided, who, and when.
    pub decision: ReviewState,
    pub reviewer: Option<String>,
    pub decided_at: Option<OffsetDateTime>,
    /// A regeneration or a retry pass, and when.
    pub kind: ReviewEventKind,
    pub at: OffsetDateTime,
    /// Whether the current text differs from the one decided on (false while the new result
    /// is still on its way, or when it came back identical).
    pub text_changed: bool,
}

impl RegeneratedSince {
    /// What the review pages say about it.
    pub fn describe(&self) -> String {
        let who = self.reviewer.as_deref().unwrap_or("a reviewer");
        let why = match self.kind {
            ReviewEventKind::Requeue => "a retry pass generated it again",
            _ => "it was sent back for generation",
        };
        let now = if self.text_changed {
            "the text is new: review it again"
        } else {
            "the new result has the same text, or has not arrived yet"
        };
        format!(
            "Regenerated since your decision: {who} had {} it, then {why}; {now}.",
            self.decision.as_str()
        )
    }
}

/// A reviewer's progress in queue mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueProgress {
    /// Decisions this reviewer made today (UTC).
    pub mine_today: i64,
    /// Samples whose current decision is this reviewer's.
    pub mine_total: i64,
    /// Finished samples nobody has decided yet.
    pub remaining: i64,
    /// Of those, held by other reviewers right now.
    pub held_by_others: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_round_trips_through_the_query_string() {
        let f = SampleFilter {
            run: Some(4),
            outcome: Some(SampleState::Truncated),
            finish_reason: Some("length".into()),
            flag: Some("repetition".into()),
            review: Some(ReviewState::Flagged),
            reviewer: Some(2),
            category: Some("math".into()),
            prompt_tokens: TokenRange { min: Some(10), max: None },
            reasoning_tokens: TokenRange { min: None, max: Some(4000) },
            completion_tokens: TokenRange { min: Some(1), max: Some(9) },
            acceptance: AcceptanceRange { min: Some(1.5), max: Some(2.25) },
            q: Some("prime numbers".into()),
            sort: SortKey::Slowest,
        };
        let pairs: BTreeMap<String, String> =
            f.to_query().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(SampleFilter::from_query(&pairs).unwrap(), f);
        assert!(SampleFilter::default().to_query().is_empty());
    }

    #[test]
    fn a_filter_is_a_query_and_a_facet_leaves_its_own_dimension_open() {
        let f = SampleFilter {
            run: Some(4),
            category: Some(NONE_VALUE.into()),
            finish_reason: Some("length".into()),
            flag: Some("repetition".into()),
            ..Default::default()
        };
        let q = f.query();
        assert_eq!(q.runs, [4]);
        assert_eq!(q.categories, [None], "\"-\" is a row without a category");
        assert_eq!(q.finish_reasons, [Some("length".to_string())]);
        assert_eq!(q.flags_any, ["repetition"]);
        let open = f.query_without(Some(FacetDim::Category));
        assert!(open.categories.is_empty());
        assert_eq!(open.runs, [4]);
        assert_eq!(SampleFilter::default().query(), SampleQuery::default());
    }

    #[test]
    fn bad_query_values_name_the_parameter() {
        let pairs: BTreeMap<String, String> = [("prompt_min".to_string(), "ten".to_string())].into();
        assert_eq!(
            SampleFilter::from_query(&pairs).unwrap_err(),
            "prompt_min must be a whole number, not \"ten\""
        );
        let pairs: BTreeMap<String, String> = [("outcome".to_string(), "great".to_string())].into();
        assert!(SampleFilter::from_query(&pairs).unwrap_err().contains("outcome"));
        let pairs: BTreeMap<String, String> = [("run".to_string(), " ".to_string())].into();
        assert_eq!(SampleFilter::from_query(&pairs).unwrap(), SampleFilter::default());
    }
}

/// Where a training view's ids came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainingSource {
    /// The ids the server reported: what the target model saw and wrote.
    Captured,
    /// The conversation rendered with the chat template and encoded again.
    Retokenized,
}

/// One token of a training row, decoded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainingToken {
    pub id: u32,
    /// The text this token adds (empty while it holds part of a character the next completes).
    pub text: String,
    /// Under the loss mask: the draft model learns to predict it.
    pub supervised: bool,
}

/// A sample as the pre-tokenized export writes it (one row per conversation, no length limit),
/// for the review page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingView {
    pub source: TrainingSource,
    /// The tokenizer folder that decoded (and, re-tokenized, encoded) the row.
    pub tokenizer_dir: String,
    pub tokens: Vec<TrainingToken>,
    pub supervised: u32,
    /// Earlier assistant turns the row leaves unsupervised (see docs/export.md).
    pub unsupervised_turns: u32,
}
