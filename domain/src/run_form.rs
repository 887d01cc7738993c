//! The new-run form as the browser sends it (plain strings, as typed), and its parsing into
//! settings, with every problem phrased as what to change.

use crate::acceptance::DraftRef;
use crate::export::ExportSplit;
use crate::generation::{Concurrency, RunSettings, Selection, Thinking, ToolChoice, TurnMode};
use serde::{Deserialize, Serialize};

/// A dataset a run can draw from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetChoice {
    pub id: i64,
    pub name: String,
    pub rows: i64,
    /// Categories with their row counts, largest first.
    pub categories: Vec<(String, i64)>,
}

/// An earlier run whose prompts a new run (an evaluation, most often) can send again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunChoice {
    pub id: i64,
    pub name: String,
    pub dataset_id: i64,
    pub samples: i64,
    /// The draft it evaluated, if it is an evaluation.
    pub draft: Option<DraftRef>,
}

/// A finished export whose split's prompts a new run can send: rows per split and dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportChoice {
    pub id: i64,
    /// (split, dataset id, rows)
    pub splits: Vec<(ExportSplit, i64, i64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunForm {
    pub name: String,
    pub dataset_id: Option<i64>,
    /// `all`, `categories`, `sample`, `run` (an earlier run's prompts), `export` (an export's
    /// split) or `weighted` (toward an evaluation's weakest categories).
    pub selection: String,
    pub categories: Vec<String>,
    /// How many rows `sample` and `weighted` draw, and with which seed.
    pub sample_count: String,
    pub sample_seed: String,
    /// The earlier run whose prompts `run` sends again.
    #[serde(default)]
    pub source_run_id: Option<i64>,
    /// The export, and its split (`validation` or `train`), whose prompts `export` sends.
    #[serde(default)]
    pub source_export_id: Option<i64>,
    #[serde(default)]
    pub source_split: String,
    /// The evaluation run whose acceptance per category weighs a `weighted` draw.
    #[serde(default)]
    pub weighted_evaluation_id: Option<i64>,
    /// Set to evaluate a named draft (the endpoints serve the target with that draft).
    #[serde(default)]
    pub draft_name: String,
    #[serde(default)]
    pub draft_revision: String,
    /// The export the draft revision was trained on, for the loop's lineage.
    #[serde(default)]
    pub draft_trained_on: Option<i64>,
    pub endpoint_ids: Vec<i64>,
    pub model: String,
    pub max_tokens: String,
    pub temperature: String,
    pub top_p: String,
    pub seed: String,
    pub system_prompt: String,
    /// `server_default`, `on`, `off` or `mix`.
    pub thinking: String,
    pub thinking_ratio: String,
    /// `last_assistant`, `first_user` or `every_assistant`.
    pub turns: String,
    /// `auto`, `required` or `none`: for rows that offer tools. Empty reads as `auto`.
    #[serde(default)]
    pub tool_choice: String,
    /// `false` asks for one call per turn at most.
    #[serde(default = "yes")]
    pub parallel_tool_calls: bool,
    /// `adaptive` or `fixed`.
    pub concurrency: String,
    pub concurrency_min: String,
    pub concurrency_max: String,
    pub concurrency_fixed: String,
    /// The run's share of an endpoint's adaptive capacity against other runs on it.
    pub weight: String,
    pub idle_timeout_secs: String,
    pub deadline_secs: String,
    pub max_attempts: String,
}

fn yes() -> bool {
    true
}

/// What a valid form describes.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRun {
    pub name: String,
    pub dataset_id: i64,
    pub selection: Selection,
    pub settings: RunSettings,
    /// The draft this run evaluates; `None` for a generation run.
    pub draft: Option<DraftRef>,
    /// The export that draft revision was trained on.
    pub trained_on: Option<i64>,
}

struct Fields<'a> {
    problems: &'a mut Vec<String>,
}

impl Fields<'_> {
    /// A required number; `what` names the field as the form labels it.
    fn required<T: std::str::FromStr>(&mut self, raw: &str, what: &str) -> Option<T> {
        let raw = raw.trim();
        if raw.is_empty() {
            self.problems.push(format!("fill in {what}"));
            return None;
        }
        self.parse(raw, what)
    }

    fn optional<T: std::str::FromStr>(&mut self, raw: &str, what: &str) -> Option<T> {
        let raw = raw.trim();
        if raw.is_empty() {
            None
        } else {
            self.parse(raw, what)
        }
    }

    fn parse<T: std::str::FromStr>(&mut self, raw: &str, what: &str) -> Option<T> {
        match raw.parse() {
            Ok(v) => Some(v),
            Err(_) => {
                self.problems.push(format!("{what} must be a number, not `{raw}`"));
                None
            }
        }
    }
}

impl RunForm {
    /// The form with the defaults a new run starts from.
    pub fn with_defaults() -> Self {
        Self {
            selection: "all".into(),
            sample_seed: "42".into(),
            source_split: ExportSplit::Validation.as_str().into(),
            max_tokens: "4096".into(),
            thinking: "server_default".into(),
            thinking_ratio: "0.5".into(),
            turns: "last_assistant".into(),
            tool_choice: ToolChoice::Auto.as_str().into(),
            parallel_tool_calls: true,
            concurrency: "adaptive".into(),
            concurrency_min: "4".into(),
            concurrency_max: "512".into(),
            concurrency_fixed: "64".into(),
            weight: RunSettings::DEFAULT_WEIGHT.to_string(),
            idle_timeout_secs: RunSettings::DEFAULT_IDLE_TIMEOUT_SECS.to_string(),
            max_attempts: RunSettings::DEFAULT_MAX_ATTEMPTS.to_string(),
            ..Default::default()
        }
    }

    pub fn parse(&self) -> Result<ParsedRun, Vec<String>> {
        let mut problems = Vec::new();
        let mut f = Fields { problems: &mut problems };
        let selection = match self.selection.as_str() {
            "all" => Some(Selection::All),
            "categories" => Some(Selection::Categories { categories: self.categories.clone() }),
            "sample" => {
                let count = f.required::<u64>(&self.sample_count, "the number of rows to sample");
                let seed = f.required::<u64>(&self.sample_seed, "the sampling seed");
                count.zip(seed).map(|(count, seed)| Selection::Sample { count, seed })
            }
            "run" => match self.source_run_id {
                Some(run_id) => Some(Selection::Run { run_id }),
                None => {
                    f.problems.push("choose the run whose prompts to send again".into());
                    None
                }
            },
            "export" => {
                let split = match self.source_split.as_str() {
                    "validation" => Some(ExportSplit::Validation),
                    "train" => Some(ExportSplit::Train),
                    other => {
                        f.problems
                            .push(format!("an export's split is `validation` or `train`, not `{other}`"));
                        None
                    }
                };
                match (self.source_export_id, split) {
                    (Some(export_id), Some(split)) => Some(Selection::Export { export_id, split }),
                    (None, _) => {
                        f.problems.push("choose the export whose prompts to send".into());
                        None
                    }
                    _ => None,
                }
            }
            "weighted" => {
                let count = f.required::<u64>(&self.sample_count, "the number of rows to draw");
                let seed = f.required::<u64>(&self.sample_seed, "the sampling seed");
                if self.weighted_evaluation_id.is_none() {
                    f.problems.push("choose the evaluation whose weakest categories to draw toward".into());
                }
                match (self.weighted_evaluation_id, count, seed) {
                    (Some(evaluation_run_id), Some(count), Some(seed)) => {
                        Some(Selection::Weighted { evaluation_run_id, count, seed })
                    }
                    _ => None,
                }
            }
            other => {
                f.problems.push(format!("unknown row selection `{other}`"));
                None
            }
        };
        let max_tokens = f.required::<u32>(&self.max_tokens, "max_tokens");
        let temperature = f.optional::<f64>(&self.temperature, "temperature");
        let top_p = f.optional::<f64>(&self.top_p, "top_p");
        let seed = f.optional::<i64>(&self.seed, "the sampling seed of the model");
        let thinking = match self.thinking.as_str() {
            "server_default" => Some(Thinking::ServerDefault),
            "as_source" => Some(Thinking::AsSource),
            "on" => Some(Thinking::On),
            "off" => Some(Thinking::Off),
            "mix" => f
                .required::<f64>(&self.thinking_ratio, "the share of thinking samples")
                .map(|on_ratio| Thinking::Mix { on_ratio }),
            other => {
                f.problems.push(format!("unknown thinking mode `{other}`"));
                None
            }
        };
        let turns = match self.turns.as_str() {
            "last_assistant" => Some(TurnMode::LastAssistant),
            "first_user" => Some(TurnMode::FirstUser),
            "every_assistant" => Some(TurnMode::EveryAssistant),
            other => {
                f.problems.push(format!("unknown turn mode `{other}`"));
                None
            }
        };
        let tool_choice = match self.tool_choice.trim() {
            "" | "auto" => Some(ToolChoice::Auto),
            "required" => Some(ToolChoice::Required),
            "none" => Some(ToolChoice::None),
            other => {
                f.problems.push(format!("the tool choice is `auto`, `required` or `none`, not `{other}`"));
                None
            }
        };
        let concurrency = match self.concurrency.as_str() {
            "adaptive" => {
                let min = f.required::<u32>(&self.concurrency_min, "the lowest concurrency");
                let max = f.required::<u32>(&self.concurrency_max, "the highest concurrency");
                min.zip(max).map(|(min, max)| Concurrency::Adaptive { min, max })
            }
            "fixed" => f
                .required::<u32>(&self.concurrency_fixed, "the fixed concurrency")
                .map(|limit| Concurrency::Fixed { limit }),
            other => {
                f.problems.push(format!("unknown concurrency mode `{other}`"));
                None
            }
        };
        let weight = f.required::<u32>(&self.weight, "the weight");
        let idle = f.required::<u32>(&self.idle_timeout_secs, "the idle timeout");
        let deadline = f.optional::<u32>(&self.deadline_secs, "the deadline");
        let attempts = f.required::<u32>(&self.max_attempts, "attempts");
        if self.dataset_id.is_none() {
            problems.push("choose a dataset".into());
        }
        let (
            Some(selection),
            Some(max_tokens),
            Some(thinking),
            Some(turns),
            Some(concurrency),
            Some(idle),
            Some(attempts),
            Some(weight),
            Some(tool_choice),
        ) = (selection, max_tokens, thinking, turns, concurrency, idle, attempts, weight, tool_choice)
        else {
            return Err(problems);
        };
        let settings = RunSettings {
            temperature,
            top_p,
            seed,
            system_prompt: Some(self.system_prompt.trim().to_string()).filter(|s| !s.is_empty()),
            thinking,
            turns,
            concurrency,
            idle_timeout_secs: idle,
            deadline_secs: deadline,
            max_attempts: attempts,
            weight,
            tool_choice,
            parallel_tool_calls: self.parallel_tool_calls,
            ..RunSettings::with_defaults(self.model.trim(), self.endpoint_ids.clone(), max_tokens)
        };
        problems.extend(settings.problems());
        if settings.thinking == Thinking::AsSource && !selection.has_source_modes() {
            problems.push(
                "thinking \"as the source\" keeps the modes of an earlier run or export: send one's prompts, or choose a mode"
                    .into(),
            );
        }
        let draft = match (self.draft_name.trim(), self.draft_revision.trim()) {
            ("", "") => None,
            ("", _) => {
                problems.push("name the draft the revision belongs to".into());
                None
            }
            (name, revision) => Some(DraftRef { name: name.to_string(), revision: revision.to_string() }),
        };
        if let (None, Some(export)) = (&draft, self.draft_trained_on) {
            problems.push(format!("name the draft trained on export {export}, or clear that export"));
        }
        let trained_on = self.draft_trained_on;
        match self.dataset_id {
            Some(dataset_id) if problems.is_empty() => Ok(ParsedRun {
                name: self.name.trim().to_string(),
                dataset_id,
                selection,
                settings,
                draft,
                trained_on,
            }),
            _ => Err(problems),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled() -> RunForm {
        RunForm {
            name: "qwen3 regen".into(),
            dataset_id: Some(3),
            endpoint_ids: vec![1, 2],
            model: "Qwen/Qwen3-8B".into(),
            ..RunForm::with_defaults()
        }
    }

    #[test]
    fn the_defaults_with_a_dataset_endpoint_and_model_make_a_run() {
        let run = filled().parse().unwrap();
        assert_eq!(run.dataset_id, 3);
        assert_eq!(run.selection, Selection::All);
        assert_eq!(run.settings.max_tokens, 4096);
        assert_eq!(run.settings.idle_timeout_secs, 120);
        assert_eq!(run.settings.max_attempts, 5);
        assert_eq!(run.settings.concurrency, Concurrency::Adaptive { min: 4, max: 512 });
        assert_eq!(run.settings.deadline_secs, None);
    }

    #[test]
    fn every_problem_is_listed_as_what_to_change() {
        let form = RunForm {
            dataset_id: None,
            max_tokens: "lots".into(),
            temperature: "3".into(),
            concurrency: "fixed".into(),
            concurrency_fixed: "0".into(),
            ..filled()
        };
        let problems = form.parse().unwrap_err();
        assert!(problems.contains(&"max_tokens must be a number, not `lots`".to_string()), "{problems:?}");
        assert!(problems.contains(&"choose a dataset".to_string()), "{problems:?}");
        let form = RunForm {
            temperature: "3".into(),
            concurrency: "fixed".into(),
            concurrency_fixed: "0".into(),
            ..filled()
        };
        let problems = form.parse().unwrap_err();
        assert!(
            problems.iter().any(|p| p.starts_with("temperature must be between 0 and 2")),
            "{problems:?}"
        );
        assert!(problems.contains(&"fixed concurrency must be at least 1".to_string()), "{problems:?}");
    }

    #[test]
    fn the_tool_choice_is_read_and_a_wrong_one_named() {
        assert_eq!(filled().parse().unwrap().settings.tool_choice, ToolChoice::Auto);
        assert!(filled().parse().unwrap().settings.parallel_tool_calls);
        let run = RunForm { tool_choice: "required".into(), parallel_tool_calls: false, ..filled() }
            .parse()
            .unwrap();
        assert_eq!(run.settings.tool_choice, ToolChoice::Required);
        assert!(!run.settings.parallel_tool_calls);
        let problems = RunForm { tool_choice: "always".into(), ..filled() }.parse().unwrap_err();
        assert!(
            problems.contains(&"the tool choice is `auto`, `required` or `none`, not `always`".to_string()),
            "{problems:?}"
        );
    }

    #[test]
    fn an_evaluation_names_its_draft_and_sends_an_earlier_runs_prompts_as_they_were() {
        let form = RunForm {
            selection: "run".into(),
            source_run_id: Some(9),
            thinking: "as_source".into(),
            draft_name: " eagle3-qwen3 ".into(),
            draft_revision: "step-4000".into(),
            ..filled()
        };
        let run = form.parse().unwrap();
        assert_eq!(run.selection, Selection::Run { run_id: 9 });
        assert_eq!(run.settings.thinking, Thinking::AsSource);
        assert_eq!(run.draft, Some(DraftRef { name: "eagle3-qwen3".into(), revision: "step-4000".into() }));
        let export =
            RunForm { selection: "export".into(), source_export_id: Some(4), ..filled() }.parse().unwrap();
        assert_eq!(export.selection, Selection::Export { export_id: 4, split: ExportSplit::Validation });
        assert_eq!(export.draft, None, "no name, a generation run");

        let problems = RunForm { thinking: "as_source".into(), draft_revision: "x".into(), ..filled() }
            .parse()
            .unwrap_err()
            .join("; ");
        assert!(problems.contains("as the source"), "{problems}");
        assert!(problems.contains("name the draft"), "{problems}");
        let problems = RunForm { selection: "weighted".into(), sample_count: "100".into(), ..filled() }
            .parse()
            .unwrap_err()
            .join("; ");
        assert!(problems.contains("choose the evaluation"), "{problems}");
        let weighted = RunForm {
            selection: "weighted".into(),
            weighted_evaluation_id: Some(2),
            sample_count: "100".into(),
            ..filled()
        };
        assert_eq!(
            weighted.parse().unwrap().selection,
            Selection::Weighted { evaluation_run_id: 2, count: 100, seed: 42 }
        );
    }

    #[test]
    fn sampling_and_thinking_mix_take_their_numbers() {
        let form = RunForm {
            selection: "sample".into(),
            sample_count: "500".into(),
            sample_seed: "7".into(),
            thinking: "mix".into(),
            thinking_ratio: "0.25".into(),
            deadline_secs: "900".into(),
            ..filled()
        };
        let run = form.parse().unwrap();
        assert_eq!(run.selection, Selection::Sample { count: 500, seed: 7 });
        assert_eq!(run.settings.thinking, Thinking::Mix { on_ratio: 0.25 });
        assert_eq!(run.settings.deadline_secs, Some(900));
    }
}
