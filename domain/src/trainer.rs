//! The EAGLE-3 trainers an export can be made for, and what each one's own data code needs of it.
//!
//! Each rule here was found by feeding exports through the trainer's loader (SpecForge a6b6b02,
//! speculators 0.9.0; `scripts/trainer-compat.sh`, docs/export.md "Trainers"), not read off its
//! documentation, which is silent or wrong on most of them:
//!
//! - Neither reads Parquet as a file, and neither reads the OpenAI `messages` layout: SpecForge's
//!   offline loader builds 0 rows from it without an error, speculators says "No samples remain".
//! - SpecForge's offline loader (`safe_conversations_generator`) takes its columns from the first
//!   1,000 rows: `tools` on only some rows raises `KeyError: 'tools'`, or is dropped from every
//!   row without a word. Every row carries `tools`.
//! - `datasets` before 4.8.4 (speculators allows 4.0) merges the keys of every row's tool
//!   definitions, giving each tool `null` entries for the others' keys and sorting them; both
//!   trainers parse `tools` written as JSON text, which no version reshapes. So rows for the
//!   conversation routes carry `tools` as JSON text.
//! - speculators sends a row's tools to vLLM's render server as they are, and vLLM refuses an
//!   empty list (400, "`tools` must not be an empty array"): the conversation is dropped with a log
//!   line. So its rows carry `tools` only when they offer some, and SpecForge's `"[]"` otherwise.
//! - SpecForge's online trainer uses pre-tokenized rows (`data.prompts_path`) as they are: the
//!   only SpecForge route whose loss mask is exactly ours. Its conversation routes rebuild the same
//!   ids with the `qwen3.5` template but supervise the think block by their own rule.

use crate::export::{ExportFormat, FileFormat, Layout, ReasoningStyle};
use serde::{Deserialize, Serialize};

/// How JSONL conversation rows carry the functions a conversation offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolsColumn {
    /// A list, on the rows that offer any (OpenAI's shape): where an export without a trainer is.
    ListWhenOffered,
    /// JSON text, on the rows that offer any (speculators).
    TextWhenOffered,
    /// JSON text on every row, `"[]"` on rows that offer none (SpecForge's offline loader).
    TextOnEveryRow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trainer {
    /// `specforge train` with `data.prompts_path`: pre-tokenized JSONL rows, used as written.
    SpecforgeOnline,
    /// SpecForge's `scripts/prepare_hidden_states.py` (and `specforge train` with
    /// `data.train_data_path`): conversations JSONL, rendered by SpecForge's own template.
    SpecforgeOffline,
    /// speculators' `prepare-data`: conversations JSONL, rendered by the target's own chat
    /// template through a vLLM render server.
    Speculators,
}

impl Trainer {
    pub const ALL: [Trainer; 3] = [Trainer::SpecforgeOnline, Trainer::SpecforgeOffline, Trainer::Speculators];

    pub fn as_str(self) -> &'static str {
        match self {
            Trainer::SpecforgeOnline => "specforge_online",
            Trainer::SpecforgeOffline => "specforge_offline",
            Trainer::Speculators => "speculators",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// What the export form and tables call it.
    pub fn label(self) -> &'static str {
        match self {
            Trainer::SpecforgeOnline => "SpecForge (online, pre-tokenized)",
            Trainer::SpecforgeOffline => "SpecForge (offline hidden states)",
            Trainer::Speculators => "speculators",
        }
    }

    /// The layout it reads.
    pub fn layout(self) -> Layout {
        match self {
            Trainer::SpecforgeOnline => Layout::Tokenized,
            Trainer::SpecforgeOffline | Trainer::Speculators => Layout::Conversations,
        }
    }

    /// How its rows carry the functions a conversation offers.
    pub fn tools_column(self) -> ToolsColumn {
        match self {
            Trainer::SpecforgeOnline => ToolsColumn::ListWhenOffered,
            Trainer::SpecforgeOffline => ToolsColumn::TextOnEveryRow,
            Trainer::Speculators => ToolsColumn::TextWhenOffered,
        }
    }

    /// `format` made loadable by this trainer: its layout, JSONL, reasoning in
    /// `reasoning_content` (the field both trainers read); the tokenization and the validation
    /// share stay as they were.
    pub fn shape(self, format: &ExportFormat) -> ExportFormat {
        ExportFormat {
            trainer: Some(self),
            layout: self.layout(),
            file: FileFormat::Jsonl,
            reasoning: match self.layout() {
                Layout::Conversations => ReasoningStyle::Field,
                _ => format.reasoning,
            },
            ..format.clone()
        }
    }

    /// What in `format` this trainer cannot load, each phrased as what to change.
    pub fn problems(self, format: &ExportFormat) -> Vec<String> {
        let mut problems = Vec::new();
        let name = self.label();
        if format.layout != self.layout() {
            let wanted = match self.layout() {
                Layout::Tokenized => "pre-tokenized rows",
                _ => "SpecForge conversations",
            };
            problems.push(format!("{name} reads {wanted}: choose that row layout, or another trainer"));
        }
        if format.file != FileFormat::Jsonl {
            problems.push(format!("{name} does not read Parquet files: choose JSONL"));
        }
        if self.layout() == Layout::Conversations && format.reasoning != ReasoningStyle::Field {
            problems.push(format!(
                "{name} reads reasoning from `reasoning_content`: choose the reasoning_content field"
            ));
        }
        problems
    }

    /// How to load the export, one line per step: `{export}` stands for the export's folder.
    pub fn how_to_load(self) -> &'static [&'static str] {
        match self {
            Trainer::SpecforgeOnline => &[
                "specforge train -c run.yaml, with data.prompts_path: {export}/train.jsonl and data.max_length \
                 at least the export's longest row (rows are used as written: ids and loss_mask exactly as exported)",
            ],
            Trainer::SpecforgeOffline => &[
                "python scripts/prepare_hidden_states.py --data-path {export}/train.jsonl --chat-template qwen3.5 \
                 --cache-dir <a new folder per export> (for a Qwen3-style target; other flags as SpecForge's docs)",
                "ids equal the export's; SpecForge's template supervises the think block by its own rule \
                 (docs/export.md, \"Trainers\")",
            ],
            Trainer::Speculators => &[
                "vllm launch render <target model> --enable-auto-tool-choice --tool-call-parser <the target's parser> \
                 --max-model-len <N>",
                "speculators prepare-data --model <target model> --data {export}/train.jsonl --render-endpoint \
                 http://<render server> --seq-length <at most N> --output <folder>",
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in Trainer::ALL {
            assert_eq!(Trainer::parse(t.as_str()), Some(t));
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
        }
        assert_eq!(Trainer::parse("axolotl"), None);
    }

    #[test]
    fn a_shaped_format_has_no_problems_and_a_parquet_one_says_what_to_change() {
        for t in Trainer::ALL {
            let shaped = t.shape(&ExportFormat { file: FileFormat::Parquet, ..ExportFormat::default() });
            assert!(t.problems(&shaped).is_empty(), "{t:?}: {:?}", t.problems(&shaped));
            assert_eq!(shaped.trainer, Some(t));
        }
        let parquet = ExportFormat { file: FileFormat::Parquet, ..ExportFormat::default() };
        let problems = Trainer::Speculators.problems(&parquet).join("; ");
        assert!(problems.contains("does not read Parquet files: choose JSONL"), "{problems}");
        let messages = ExportFormat { layout: Layout::Messages, ..ExportFormat::default() };
        assert!(Trainer::SpecforgeOffline.problems(&messages)[0].contains("reads SpecForge conversations"));
        assert!(Trainer::SpecforgeOnline.problems(&ExportFormat::default())[0].contains("pre-tokenized rows"));
    }
}
