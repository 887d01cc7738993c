//! The export form as the page edits it (text fields and select values), and its conversion to
//! and from an `ExportSpec`. Converting checks everything that can be checked without the
//! server, so most mistakes are shown before anything is sent.

use domain::export::{
    Destination, Duplicates, ExportFormat, ExportSelection, ExportSpec, FileFormat, Layout, Overlong,
    ReasoningStyle, ReviewFilter, ThinkingMix, TokenSource, Tokenization, TurnEnd, TurnRows,
};
use domain::generation::SampleState;
use domain::sample_query::AcceptanceRange;
use domain::trainer::Trainer;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportForm {
    pub run_ids: Vec<i64>,
    /// `not_rejected_or_flagged`, `approved_only`, `not_rejected` or `all`.
    pub review: String,
    pub outcomes: Vec<SampleState>,
    /// Flag codes whose samples are left out.
    pub excluded_flags: Vec<String>,
    /// Comma-separated; empty takes every category.
    pub categories: String,
    pub min_tokens: String,
    pub max_tokens: String,
    /// Bounds on the draft's acceptance length (decimals).
    #[serde(default)]
    pub min_acceptance: String,
    #[serde(default)]
    pub max_acceptance: String,
    /// The share (`0.3` or `30%`) of each category's samples with the lowest acceptance; empty
    /// keeps every sample.
    #[serde(default)]
    pub weakest: String,
    /// `remove` or `keep`.
    pub duplicates: String,
    /// `any`, `thinking_only`, `non_thinking_only` or `ratio`.
    pub thinking: String,
    pub thinking_share: String,
    /// The trainer the export is for (`domain::trainer::Trainer`'s names), or empty for none:
    /// a trainer decides the layout, the file format and the reasoning field.
    #[serde(default)]
    pub trainer: String,
    /// `conversations`, `messages` or `tokenized`.
    pub layout: String,
    /// `jsonl` or `parquet`.
    pub file: String,
    /// `field`, `inline_think` or `omit`.
    pub reasoning: String,
    pub tokenizer_dir: String,
    pub max_length: String,
    /// `truncate` or `drop`.
    pub overlong: String,
    /// `auto`, `captured` or `retokenize`.
    pub token_source: String,
    /// `per_conversation` or `per_turn`.
    pub turn_rows: String,
    /// `as_sampled` or `as_rendered`.
    #[serde(default)]
    pub turn_end: String,
    pub validation_share: String,
    pub seed: String,
    /// `directory` or `s3`.
    pub destination: String,
    pub folder: String,
    pub bucket: String,
    pub prefix: String,
}

impl Default for ExportForm {
    /// The engine's defaults: `ok` samples no reviewer rejected or flagged, without the engine's
    /// problem flags, duplicates removed, every thinking mode.
    fn default() -> Self {
        Self::from_spec(&ExportSpec {
            selection: ExportSelection::for_runs(Vec::new()),
            format: ExportFormat::default(),
            destination: Destination::Directory { path: "sets".into() },
        })
    }
}

/// The snake_case name serde gives a unit variant.
fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// Parses a select's value into a unit variant; a value the page never offers is a problem.
fn pick<T: DeserializeOwned>(raw: &str, what: &str, problems: &mut Vec<String>) -> Option<T> {
    let parsed = serde_json::from_value(serde_json::Value::String(raw.to_string())).ok();
    if parsed.is_none() {
        problems.push(format!("choose {what} from the list (`{raw}` is not one of them)"));
    }
    parsed
}

fn optional_number<T: std::str::FromStr>(raw: &str, what: &str, problems: &mut Vec<String>) -> Option<T> {
    let raw = raw.trim().replace(['_', ','], "");
    if raw.is_empty() {
        return None;
    }
    match raw.parse() {
        Ok(v) => Some(v),
        Err(_) => {
            problems.push(format!("{what} must be a whole number, not `{raw}`"));
            None
        }
    }
}

fn optional_decimal(raw: &str, what: &str, problems: &mut Vec<String>) -> Option<f64> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    match raw.parse::<f64>() {
        Ok(v) if v.is_finite() => Some(v),
        _ => {
            problems.push(format!("{what} must be a number such as 2.5, not `{raw}`"));
            None
        }
    }
}

fn share(raw: &str, what: &str, problems: &mut Vec<String>) -> f64 {
    let raw = raw.trim();
    if raw.is_empty() {
        return 0.0;
    }
    let (number, percent) = match raw.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (raw, false),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() => {
            if percent {
                v / 100.0
            } else {
                v
            }
        }
        _ => {
            problems.push(format!("{what} must be a number such as 0.05 or 5%, not `{raw}`"));
            0.0
        }
    }
}

impl ExportForm {
    pub fn from_spec(spec: &ExportSpec) -> Self {
        let s = &spec.selection;
        let f = &spec.format;
        let (thinking, thinking_share) = match s.thinking {
            ThinkingMix::Any => ("any", String::new()),
            ThinkingMix::ThinkingOnly => ("thinking_only", String::new()),
            ThinkingMix::NonThinkingOnly => ("non_thinking_only", String::new()),
            ThinkingMix::Ratio { thinking_share } => ("ratio", thinking_share.to_string()),
        };
        let tokenization = f.tokenization.clone();
        let (destination, folder, bucket, prefix) = match &spec.destination {
            Destination::Directory { path } => ("directory", path.clone(), String::new(), String::new()),
            Destination::S3 { bucket, prefix } => ("s3", String::new(), bucket.clone(), prefix.clone()),
        };
        Self {
            run_ids: s.run_ids.clone(),
            review: name(&s.review),
            outcomes: s.outcomes.clone(),
            excluded_flags: s.excluded_flags.clone(),
            categories: s.categories.join(", "),
            min_tokens: s.min_completion_tokens.map(|v| v.to_string()).unwrap_or_default(),
            max_tokens: s.max_completion_tokens.map(|v| v.to_string()).unwrap_or_default(),
            min_acceptance: s.acceptance.min.map(|v| v.to_string()).unwrap_or_default(),
            max_acceptance: s.acceptance.max.map(|v| v.to_string()).unwrap_or_default(),
            weakest: s.weakest.map(|v| v.to_string()).unwrap_or_default(),
            duplicates: name(&s.duplicates),
            thinking: thinking.into(),
            thinking_share,
            trainer: f.trainer.as_ref().map(name).unwrap_or_default(),
            layout: name(&f.layout),
            file: name(&f.file),
            reasoning: name(&f.reasoning),
            tokenizer_dir: tokenization.as_ref().map(|t| t.tokenizer_dir.clone()).unwrap_or_default(),
            max_length: tokenization.as_ref().map_or("4096".into(), |t| t.max_length.to_string()),
            overlong: tokenization.as_ref().map_or("drop".into(), |t| name(&t.overlong)),
            token_source: name(&tokenization.as_ref().map(|t| t.source).unwrap_or_default()),
            turn_rows: name(&tokenization.as_ref().map(|t| t.turn_rows).unwrap_or_default()),
            turn_end: name(&tokenization.as_ref().map(|t| t.turn_end).unwrap_or_default()),
            validation_share: if f.validation_share > 0.0 {
                f.validation_share.to_string()
            } else {
                String::new()
            },
            seed: s.seed.to_string(),
            destination: destination.into(),
            folder,
            bucket,
            prefix,
        }
    }

    /// The spec this form describes, or every problem with it, each saying what to change.
    pub fn to_spec(&self) -> Result<ExportSpec, Vec<String>> {
        let mut problems = Vec::new();
        let p = &mut problems;
        let review: Option<ReviewFilter> = pick(&self.review, "which review states to export", p);
        let duplicates: Option<Duplicates> = pick(&self.duplicates, "what to do with duplicates", p);
        let thinking = match self.thinking.as_str() {
            "any" => ThinkingMix::Any,
            "thinking_only" => ThinkingMix::ThinkingOnly,
            "non_thinking_only" => ThinkingMix::NonThinkingOnly,
            "ratio" => {
                if self.thinking_share.trim().is_empty() {
                    p.push("give the share of thinking samples, between 0 and 1".into());
                }
                ThinkingMix::Ratio { thinking_share: share(&self.thinking_share, "the thinking share", p) }
            }
            other => {
                p.push(format!("choose a thinking mix from the list (`{other}` is not one of them)"));
                ThinkingMix::Any
            }
        };
        let trainer: Option<Trainer> = match self.trainer.as_str() {
            "" => None,
            raw => pick(raw, "a trainer", p),
        };
        let layout: Option<Layout> = match trainer {
            Some(t) => Some(t.layout()),
            None => pick(&self.layout, "a row layout", p),
        };
        let file: Option<FileFormat> = pick(&self.file, "a file format", p);
        let reasoning: Option<ReasoningStyle> = pick(&self.reasoning, "where reasoning goes", p);
        let tokenization = if layout == Some(Layout::Tokenized) {
            let overlong: Option<Overlong> = pick(&self.overlong, "what to do with overlong rows", p);
            let max_length = optional_number::<u32>(&self.max_length, "the maximum length", p);
            let source: Option<TokenSource> = pick(&self.token_source, "where the token ids come from", p);
            let turn_rows: Option<TurnRows> = pick(&self.turn_rows, "rows per conversation or per turn", p);
            let turn_end: Option<TurnEnd> = pick(&self.turn_end, "how rows from the server's ids end", p);
            if self.max_length.trim().is_empty() {
                p.push("give the maximum length in tokens".into());
            }
            Some(Tokenization {
                tokenizer_dir: self.tokenizer_dir.trim().to_string(),
                max_length: max_length.unwrap_or(0),
                overlong: overlong.unwrap_or(Overlong::Drop),
                source: source.unwrap_or_default(),
                turn_rows: turn_rows.unwrap_or_default(),
                turn_end: turn_end.unwrap_or_default(),
            })
        } else {
            None
        };
        let seed = match optional_number::<u64>(&self.seed, "the seed", p) {
            Some(seed) => seed,
            None => {
                if self.seed.trim().is_empty() {
                    p.push("give a seed (any whole number): it fixes the split and the mix".into());
                }
                0
            }
        };
        let destination = match self.destination.as_str() {
            "s3" => Destination::S3 {
                bucket: self.bucket.trim().to_string(),
                prefix: self.prefix.trim().trim_matches('/').to_string(),
            },
            _ => Destination::Directory { path: self.folder.trim().to_string() },
        };
        let mut categories: Vec<String> = Vec::new();
        for c in self.categories.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            if !categories.iter().any(|seen| seen == c) {
                categories.push(c.to_string());
            }
        }
        let selection = ExportSelection {
            run_ids: self.run_ids.clone(),
            outcomes: self.outcomes.clone(),
            review: review.unwrap_or(ReviewFilter::NotRejectedOrFlagged),
            categories,
            min_completion_tokens: optional_number(&self.min_tokens, "the minimum completion tokens", p),
            max_completion_tokens: optional_number(&self.max_tokens, "the maximum completion tokens", p),
            acceptance: AcceptanceRange {
                min: optional_decimal(&self.min_acceptance, "the lowest acceptance length", p),
                max: optional_decimal(&self.max_acceptance, "the highest acceptance length", p),
            },
            weakest: Some(self.weakest.trim())
                .filter(|w| !w.is_empty())
                .map(|w| share(w, "the weakest share", p)),
            duplicates: duplicates.unwrap_or(Duplicates::Remove),
            thinking,
            seed,
            excluded_flags: {
                let mut flags = self.excluded_flags.clone();
                flags.sort();
                flags.dedup();
                flags
            },
        };
        let spec = ExportSpec {
            selection,
            format: {
                let format = ExportFormat {
                    trainer: None,
                    layout: layout.unwrap_or(Layout::Conversations),
                    file: file.unwrap_or(FileFormat::Jsonl),
                    reasoning: reasoning.unwrap_or(ReasoningStyle::Field),
                    tokenization,
                    validation_share: share(&self.validation_share, "the validation share", p),
                };
                match trainer {
                    Some(t) => t.shape(&format),
                    None => format,
                }
            },
            destination,
        };
        problems.extend(spec.problems());
        if problems.is_empty() {
            Ok(spec)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled() -> ExportForm {
        ExportForm { run_ids: vec![3], ..ExportForm::default() }
    }

    #[test]
    fn the_default_form_with_a_run_is_a_valid_spec_and_round_trips() {
        let spec = filled().to_spec().unwrap();
        assert_eq!(spec.selection.run_ids, vec![3]);
        assert_eq!(spec.selection.outcomes, vec![SampleState::Ok]);
        assert_eq!(ExportForm::from_spec(&spec).to_spec().unwrap(), spec);
    }

    #[test]
    fn every_field_is_read() {
        let form = ExportForm {
            review: "all".into(),
            categories: "code, math,  ,code".into(),
            min_tokens: "10".into(),
            max_tokens: "4,000".into(),
            duplicates: "keep".into(),
            thinking: "ratio".into(),
            thinking_share: "25%".into(),
            layout: "tokenized".into(),
            file: "parquet".into(),
            reasoning: "inline_think".into(),
            tokenizer_dir: "tokenizers/qwen".into(),
            max_length: "2048".into(),
            overlong: "truncate".into(),
            token_source: "retokenize".into(),
            turn_rows: "per_turn".into(),
            turn_end: "as_rendered".into(),
            validation_share: "0.1".into(),
            seed: "7".into(),
            destination: "s3".into(),
            bucket: "training".into(),
            prefix: "/eagle3/".into(),
            ..filled()
        };
        let spec = form.to_spec().unwrap();
        let s = &spec.selection;
        assert_eq!(s.categories, vec!["code".to_string(), "math".to_string()]);
        assert_eq!((s.min_completion_tokens, s.max_completion_tokens), (Some(10), Some(4000)));
        assert_eq!(s.duplicates, Duplicates::Keep);
        assert_eq!(s.thinking, ThinkingMix::Ratio { thinking_share: 0.25 });
        assert_eq!(s.seed, 7);
        let t = spec.format.tokenization.as_ref().unwrap();
        assert_eq!(
            (t.tokenizer_dir.as_str(), t.max_length, t.overlong),
            ("tokenizers/qwen", 2048, Overlong::Truncate)
        );
        assert_eq!(
            (t.source, t.turn_rows, t.turn_end),
            (TokenSource::Retokenize, TurnRows::PerTurn, TurnEnd::AsRendered)
        );
        assert_eq!(spec.format.file, FileFormat::Parquet);
        assert_eq!(spec.format.reasoning, ReasoningStyle::InlineThink);
        assert_eq!(spec.format.validation_share, 0.1);
        assert_eq!(spec.destination, Destination::S3 { bucket: "training".into(), prefix: "eagle3".into() });
        assert_eq!(ExportForm::from_spec(&spec).to_spec().unwrap(), spec);
    }

    #[test]
    fn a_trainer_decides_the_layout_file_and_reasoning() {
        let form = ExportForm {
            trainer: "speculators".into(),
            layout: "messages".into(),
            file: "parquet".into(),
            reasoning: "omit".into(),
            ..filled()
        };
        let spec = form.to_spec().unwrap();
        let f = &spec.format;
        assert_eq!(
            (f.trainer, f.layout, f.file, f.reasoning),
            (Some(Trainer::Speculators), Layout::Conversations, FileFormat::Jsonl, ReasoningStyle::Field)
        );
        assert_eq!(ExportForm::from_spec(&spec).to_spec().unwrap(), spec);
        // SpecForge's online trainer reads pre-tokenized rows, so the tokenizer settings apply.
        let online =
            ExportForm { trainer: "specforge_online".into(), tokenizer_dir: "tok".into(), ..filled() };
        let spec = online.to_spec().unwrap();
        assert_eq!(spec.format.layout, Layout::Tokenized);
        assert_eq!(spec.format.tokenization.as_ref().unwrap().tokenizer_dir, "tok");
        let unknown = ExportForm { trainer: "axolotl".into(), ..filled() };
        assert!(unknown.to_spec().unwrap_err().join("; ").contains("choose a trainer from the list"));
    }

    #[test]
    fn acceptance_bounds_and_the_weakest_share_are_read() {
        let form = ExportForm {
            min_acceptance: "1.5".into(),
            max_acceptance: "3".into(),
            weakest: "30%".into(),
            ..filled()
        };
        let spec = form.to_spec().unwrap();
        assert_eq!(spec.selection.acceptance, AcceptanceRange { min: Some(1.5), max: Some(3.0) });
        assert_eq!(spec.selection.weakest, Some(0.3));
        assert_eq!(ExportForm::from_spec(&spec).to_spec().unwrap(), spec);
        let bad = ExportForm { min_acceptance: "low".into(), weakest: "0".into(), ..filled() };
        let problems = bad.to_spec().unwrap_err().join("; ");
        assert!(problems.contains("lowest acceptance length must be a number"), "{problems}");
        assert!(problems.contains("weakest share must be above 0"), "{problems}");
    }

    #[test]
    fn problems_say_what_to_change() {
        let form = ExportForm {
            run_ids: vec![],
            min_tokens: "lots".into(),
            thinking: "ratio".into(),
            thinking_share: "".into(),
            layout: "tokenized".into(),
            // Re-tokenizing needs the tokenizer folder (rows from captured ids need none).
            token_source: "retokenize".into(),
            folder: " ".into(),
            seed: "".into(),
            ..ExportForm::default()
        };
        let problems = form.to_spec().unwrap_err().join("; ");
        for expected in [
            "at least one run",
            "minimum completion tokens must be a whole number, not `lots`",
            "share of thinking samples",
            "tokenizer.json",
            "give a seed",
            "folder to export into",
        ] {
            assert!(problems.contains(expected), "{expected}: {problems}");
        }
    }
}
