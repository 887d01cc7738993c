//! Parity with Hugging Face transformers on published chat templates: for every template in
//! tests/fixtures/templates and every conversation in tests/parity/conversations.json, our
//! rendered text, `input_ids` and `loss_mask` must equal what tests/parity/reference.py computes
//! with transformers' `apply_chat_template`, on every token. A conversation transformers refuses
//! (the template raises) must be refused here too.
//!
//! The reference runs in the Python named by DS_PARITY_PYTHON, which must have the pinned
//! transformers, jinja2 and tokenizers (scripts/lib.sh: `ensure_parity_python`). Without it the
//! test fails: a parity test that passes without comparing anything would prove nothing.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::export::Overlong;
use engine::export::conversation::Conversation;
use engine::export::tokenize::RowTokenizer;
use engine::generation::conversation::Turn;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const PYTHON: &str = "DS_PARITY_PYTHON";

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn python() -> String {
    std::env::var(PYTHON).unwrap_or_else(|_| {
        panic!(
            "{PYTHON} is not set. This test compares our chat-template renders with transformers and \
             needs a Python with the pinned transformers, jinja2 and tokenizers. Set it up with\n\
             \n    source scripts/lib.sh && ensure_parity_python\n    \
             export {PYTHON}=$HOME/.cache/draft-studio/parity-venv/bin/python\n\n\
             (scripts/test.sh does both)."
        )
    })
}

/// Runs the reference script and returns its output.
fn reference(spec: &Path) -> Value {
    let out = tempfile::tempdir().unwrap();
    let result = out.path().join("reference.json");
    let run = Command::new(python())
        .arg(tests_dir().join("parity/reference.py"))
        .arg(tests_dir().join("fixtures/templates"))
        .arg(spec)
        .arg(&result)
        .output()
        .unwrap_or_else(|e| panic!("{PYTHON} could not be run: {e}"));
    assert!(
        run.status.success(),
        "the reference script failed (is transformers installed in {PYTHON}?):\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&std::fs::read(result).unwrap()).unwrap()
}

fn conversation(case: &Value) -> Conversation {
    Conversation {
        id: case["id"].as_str().unwrap().to_string(),
        tools: case.get("tools").filter(|t| !t.is_null()).cloned(),
        thinking: case["thinking"].as_bool(),
        turns: serde_json::from_value::<Vec<Turn>>(case["turns"].clone()).unwrap(),
    }
}

/// A few characters either side of byte `at`, escaped, for a mismatch report.
fn around(text: &str, at: usize) -> String {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let i = chars.iter().position(|&(b, _)| b >= at).unwrap_or(chars.len());
    let from = i.saturating_sub(30);
    let to = (i + 30).min(chars.len());
    format!("{:?}", chars[from..to].iter().map(|&(_, c)| c).collect::<String>())
}

/// The first position where two sequences differ, if they do.
fn first_difference<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

fn token(tokenizer: &RowTokenizer, ids: &[u32], at: usize) -> String {
    match ids.get(at) {
        Some(&id) => format!("{id} {:?}", tokenizer.tokenizer().decode(&[id], false).unwrap_or_default()),
        None => "(end)".into(),
    }
}

/// Checked apart from the reference (which computes the same definition): no supervised run of
/// tokens holds a tool result, and the last assistant turn's calls are supervised when the
/// template writes their arguments (checked by a value of theirs that appears nowhere else).
fn tool_spans_problem(
    tokenizer: &RowTokenizer,
    conversation: &Conversation,
    ids: &[u32],
    mask: &[u8],
) -> Option<String> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, &m) in mask.iter().chain([&0]).enumerate() {
        match (m, start) {
            (1, None) => start = Some(i),
            (0, Some(s)) => {
                runs.push(tokenizer.tokenizer().decode(&ids[s..i], false).unwrap_or_default());
                start = None;
            }
            _ => {}
        }
    }
    // A result's text may recur in what the assistant wrote ("it is 14:05"): only more copies in
    // the supervised runs than the assistant's turns hold means a result was supervised.
    let written: String = conversation
        .turns
        .iter()
        .filter(|t| t.role == "assistant")
        .map(|t| format!("{} {}", t.content, t.reasoning_content.as_deref().unwrap_or("")))
        .collect();
    for turn in conversation.turns.iter().filter(|t| t.role == "tool") {
        let copies = |text: &str| text.matches(turn.content.as_str()).count();
        let supervised: usize = runs.iter().map(|run| copies(run)).sum();
        if supervised > copies(&written) {
            return Some(format!("the tool result {:?} is supervised", turn.content));
        }
    }
    let last = conversation.turns.last()?;
    let marker = last
        .tool_calls
        .iter()
        .find_map(|c| c.parsed_arguments().ok()?.get("unit")?.as_str().map(String::from))?;
    let whole = tokenizer.tokenizer().decode(ids, false).unwrap_or_default();
    (whole.contains(&marker) && !runs.iter().any(|run| run.contains(&marker)))
        .then(|| format!("the last turn's call (`{marker}`) is rendered but not supervised"))
}

#[test]
fn rendered_ids_and_masks_equal_transformers() {
    let spec_path = tests_dir().join("parity/conversations.json");
    let spec: Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    let expected = reference(&spec_path);
    let date = time::Date::parse(
        spec["date"].as_str().unwrap(),
        &time::format_description::well_known::Iso8601::DATE,
    )
    .unwrap();

    let mut mismatches = Vec::new();
    let (mut rows, mut tokens, mut supervised, mut refusals) = (0, 0, 0, 0);
    for template in spec["templates"].as_array().unwrap() {
        let name = template.as_str().unwrap();
        let dir = tests_dir().join("fixtures/templates").join(name);
        let tokenizer = RowTokenizer::from_dir_dated(&dir, date, u32::MAX, Overlong::Truncate)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for case in spec["conversations"].as_array().unwrap() {
            let conversation = conversation(case);
            let want = &expected["templates"][name][&conversation.id];
            let label = format!("{name} / {}", conversation.id);
            let ours = tokenizer.encode_conversation(&conversation);
            let (ours, want) = match (ours, want.get("error")) {
                (Err(_), Some(_)) => {
                    refusals += 1;
                    continue;
                }
                (Err(e), None) => {
                    mismatches.push(format!("{label}: transformers renders it, we refuse: {e}"));
                    continue;
                }
                (Ok(_), Some(error)) => {
                    mismatches.push(format!("{label}: transformers refuses ({error}), we render it"));
                    continue;
                }
                (Ok(ours), None) => (ours, want),
            };
            let text = want["text"].as_str().unwrap();
            let ids: Vec<u32> = serde_json::from_value(want["input_ids"].clone()).unwrap();
            let mask: Vec<u8> = serde_json::from_value(want["loss_mask"].clone()).unwrap();
            rows += 1;
            if ours.text != text {
                let at = first_difference(ours.text.as_bytes(), text.as_bytes()).unwrap();
                mismatches.push(format!(
                    "{label}: the render differs at byte {at}:\n      ours:         {}\n      transformers: {}",
                    around(&ours.text, at),
                    around(text, at)
                ));
                continue;
            }
            if let Some(at) = first_difference(&ours.input_ids, &ids) {
                mismatches.push(format!(
                    "{label}: input_ids differ at token {at} of {}: ours {}, transformers {}",
                    ids.len(),
                    token(&tokenizer, &ours.input_ids, at),
                    token(&tokenizer, &ids, at)
                ));
                continue;
            }
            if let Some(at) = first_difference(&ours.loss_mask, &mask) {
                let wrong = ours.loss_mask.iter().zip(&mask).filter(|(a, b)| a != b).count();
                mismatches.push(format!(
                    "{label}: loss_mask differs on {wrong} tokens, first at token {at} ({}): ours {}, transformers {}",
                    token(&tokenizer, &ids, at),
                    ours.loss_mask.get(at).map_or("-".into(), u8::to_string),
                    mask.get(at).map_or("-".into(), u8::to_string)
                ));
                continue;
            }
            tokens += ids.len();
            supervised += mask.iter().filter(|&&m| m == 1).count();
            if let Some(problem) = tool_spans_problem(&tokenizer, &conversation, &ids, &mask) {
                mismatches.push(format!("{label}: {problem}"));
            }
        }
    }
    println!(
        "transformers {}: {rows} rows, {tokens} tokens ({supervised} supervised) equal; {refusals} refused by both",
        expected["versions"]["transformers"]
    );
    assert!(rows > 0, "nothing was compared");
    assert!(
        mismatches.is_empty(),
        "{} of {rows} rows differ from transformers:\n  {}",
        mismatches.len(),
        mismatches.join("\n  ")
    );
}
