//! Exports: selection, formats read back, loss masks on two template styles, manifests,
//! atomicity (cancel, failure), repeatability, path safety and a real S3-compatible server.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::export::*;
use domain::generation::SampleState;
use engine::export::conversation::Conversation;
use engine::export::manifest::{self, Manifest};
use engine::export::tokenize::{Outcome, RowTokenizer};
use engine::export::{job, selection, S3Options};
use engine::generation::conversation::Turn;
use engine::testing::{finished_run, user, SeedSample};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use time::macros::date;

mod export_env;

use export_env::{env, Env};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers")
}

fn turn(role: &str, content: &str, reasoning: Option<&str>) -> Turn {
    Turn {
        role: role.into(),
        content: content.into(),
        reasoning_content: reasoning.map(str::to_string),
        ..Turn::default()
    }
}

/// The seeded samples: a thinking one, a multi-turn non-thinking one, a truncated one, a
/// duplicate of the first and one in another category.
fn seeds() -> Vec<SeedSample> {
    let mut multi = SeedSample::answered("unused", "", "unused");
    multi.thinking = Some(false);
    multi.messages = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome."}
    ]);
    let mut truncated = SeedSample::answered("Count to a million.", "one, two", "1, 2, 3");
    truncated.state = SampleState::Truncated;
    let mut other = SeedSample::answered("def add(a, b)?", "", "return a + b");
    other.category = "code";
    other.completion_tokens = 500;
    vec![
        SeedSample::answered("What is 6 times 7?", "Let me think step by step.", "The answer is 42."),
        multi,
        truncated,
        SeedSample::answered("What is 6 times 7?", "Let me think step by step.", "The answer is 42."),
        other,
    ]
}

fn spec(run: i64, dir: &str) -> ExportSpec {
    ExportSpec {
        selection: ExportSelection::for_runs(vec![run]),
        format: ExportFormat::default(),
        destination: Destination::Directory { path: dir.into() },
    }
}

async fn export(pool: &sqlx::PgPool, env: &Env, spec: &ExportSpec) -> (i64, ExportStatus) {
    let by = sqlx::query_scalar!("SELECT id FROM users LIMIT 1").fetch_optional(pool).await.unwrap();
    let id = job::create(pool, spec, by, None).await.unwrap();
    let status = job::run(pool, &env.storage, id).await.unwrap();
    (id, status)
}

fn read_manifest(dir: &Path) -> Manifest {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn jsonl_reads_back_to_the_same_conversations(pool: sqlx::PgPool) {
    user(&pool).await;
    let run = finished_run(&pool, &seeds()).await;
    let env = env();
    let (id, status) = export(&pool, &env, &spec(run, "sets")).await;
    assert_eq!(
        status,
        ExportStatus::Completed,
        "{:?}",
        engine::export::store::get(&pool, id).await.unwrap().error
    );

    let dir = env.root.join("exports/sets").join(format!("export-{id}"));
    assert_eq!(entries(&dir), ["manifest.json", "train.jsonl"]);
    let rows = jsonl(&dir.join("train.jsonl"));
    // The truncated sample is left out by default and the duplicate is written once.
    assert_eq!(rows.len(), 3);
    let seeds = seeds();
    for (row, (i, seed)) in rows.iter().zip([(0, &seeds[0]), (1, &seeds[1]), (4, &seeds[4])]) {
        assert_eq!(row["id"], format!("{run}-row-{i}"));
        let mut expected = seed.messages.clone();
        // Empty reasoning is not written as a field.
        for m in expected.as_array_mut().unwrap() {
            if m.get("reasoning_content") == Some(&json!("")) {
                m.as_object_mut().unwrap().remove("reasoning_content");
            }
        }
        assert_eq!(row["conversations"], expected);
    }
    assert_eq!(rows[0]["conversations"][1]["reasoning_content"], "Let me think step by step.");

    let manifest = read_manifest(&dir);
    assert_eq!(manifest.export_id, id);
    assert_eq!(manifest.user.as_deref(), Some("eng"));
    assert_eq!(manifest.counts.selection.matched, 4);
    assert_eq!(manifest.counts.selection.duplicates_removed, 1);
    assert_eq!(manifest.counts.written, 3);
    assert_eq!(manifest.counts.selection.by_outcome, vec![("ok".to_string(), 3)]);
    assert_eq!(manifest.runs[0].id, run);
    assert_eq!(manifest.runs[0].settings["model"], "sim-model");
    // Every file's hash and size match the manifest.
    for file in &manifest.files {
        let (sha, bytes) = manifest::hash_file(&dir.join(&file.name)).unwrap();
        assert_eq!((sha, bytes), (file.sha256.clone(), file.bytes), "{}", file.name);
    }
    let record = engine::export::store::get(&pool, id).await.unwrap();
    assert_eq!(record.rows_done, 3);
    assert_eq!(record.location.as_deref(), Some(dir.to_str().unwrap()));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn filters_pick_outcomes_categories_token_ranges_and_thinking(pool: sqlx::PgPool) {
    let run = finished_run(&pool, &seeds()).await;
    let mut s = ExportSelection::for_runs(vec![run]);
    let preview = selection::plan(&pool, &s, 0.0).await.unwrap().preview;
    assert_eq!((preview.matched, preview.selected, preview.thinking, preview.non_thinking), (4, 3, 1, 2));

    s.outcomes = vec![SampleState::Ok, SampleState::Truncated];
    s.duplicates = Duplicates::Keep;
    assert_eq!(selection::plan(&pool, &s, 0.0).await.unwrap().preview.selected, 5);

    s.categories = vec!["code".into()];
    assert_eq!(selection::plan(&pool, &s, 0.0).await.unwrap().preview.selected, 1);
    s.categories.clear();
    s.min_completion_tokens = Some(100);
    assert_eq!(selection::plan(&pool, &s, 0.0).await.unwrap().preview.selected, 1);
    s.min_completion_tokens = None;
    s.thinking = ThinkingMix::ThinkingOnly;
    assert_eq!(selection::plan(&pool, &s, 0.0).await.unwrap().preview.selected, 3);
    s.thinking = ThinkingMix::Ratio { thinking_share: 0.0 };
    let p = selection::plan(&pool, &s, 0.0).await.unwrap().preview;
    assert_eq!((p.thinking, p.non_thinking, p.mix_removed), (0, 2, 3));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn review_states_and_flags_decide_what_is_exported(pool: sqlx::PgPool) {
    let run = finished_run(&pool, &seeds()).await;
    let ok: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM samples WHERE run_id = $1 AND state = 'ok' ORDER BY id")
            .bind(run)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(ok.len(), 4);
    // One approved, one rejected, one flagged by a reviewer; the last unreviewed but flagged by
    // the engine when its result arrived.
    for (id, state, flags) in
        [(ok[0], "approved", ""), (ok[1], "rejected", ""), (ok[2], "flagged", "repetition")]
    {
        sqlx::query(
            "UPDATE samples SET review_state = $2::review_state, reviewed_at = now(),
                    flags = CASE WHEN $3 = '' THEN '{}' ELSE ARRAY[$3] END WHERE id = $1",
        )
        .bind(id)
        .bind(state)
        .bind(flags)
        .execute(&pool)
        .await
        .unwrap();
    }
    sqlx::query("UPDATE samples SET auto_flags = '{think_markers}' WHERE id = $1")
        .bind(ok[3])
        .execute(&pool)
        .await
        .unwrap();

    let mut s = ExportSelection::for_runs(vec![run]);
    s.duplicates = Duplicates::Keep;
    // Every review state and no excluded flag (a new export starts from safer defaults).
    s.review = ReviewFilter::All;
    s.excluded_flags.clear();
    let selected = |p: engine::export::selection::Plan| p.samples.iter().map(|x| x.id).collect::<Vec<_>>();
    let all = selection::plan(&pool, &s, 0.0).await.unwrap();
    let by_review: Vec<(String, u64)> =
        ["approved", "flagged", "rejected", "unreviewed"].iter().map(|k| (k.to_string(), 1)).collect();
    assert_eq!(all.preview.by_review_state, by_review);
    assert_eq!(selected(all), ok);

    s.review = ReviewFilter::ApprovedOnly;
    assert_eq!(selected(selection::plan(&pool, &s, 0.0).await.unwrap()), vec![ok[0]]);
    s.review = ReviewFilter::NotRejected;
    assert_eq!(selected(selection::plan(&pool, &s, 0.0).await.unwrap()), vec![ok[0], ok[2], ok[3]]);

    s.review = ReviewFilter::All;
    s.excluded_flags = vec!["repetition".into()];
    assert_eq!(selected(selection::plan(&pool, &s, 0.0).await.unwrap()), vec![ok[0], ok[1], ok[3]]);
    s.excluded_flags = vec!["think_markers".into(), "repetition".into()];
    assert_eq!(selected(selection::plan(&pool, &s, 0.0).await.unwrap()), vec![ok[0], ok[1]]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn parquet_with_inline_thinking_reads_back(pool: sqlx::PgPool) {
    use arrow_array::{Array, ListArray, StringArray, StructArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let run = finished_run(&pool, &seeds()).await;
    let env = env();
    let mut spec = spec(run, "pq");
    spec.format.layout = Layout::Messages;
    spec.format.file = FileFormat::Parquet;
    spec.format.reasoning = ReasoningStyle::InlineThink;
    let (id, status) = export(&pool, &env, &spec).await;
    assert_eq!(status, ExportStatus::Completed);
    let file = std::fs::File::open(env.root.join(format!("exports/pq/export-{id}/train.parquet"))).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut conversations = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let ids = batch.column_by_name("id").unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        let lists =
            batch.column_by_name("messages").unwrap().as_any().downcast_ref::<ListArray>().unwrap().clone();
        for i in 0..batch.num_rows() {
            let turns = lists.value(i);
            let turns = turns.as_any().downcast_ref::<StructArray>().unwrap();
            let role = turns.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            let content = turns.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            let reasoning = turns.column(2).as_any().downcast_ref::<StringArray>().unwrap();
            let t: Vec<(String, String, bool)> = (0..turns.len())
                .map(|j| (role.value(j).to_string(), content.value(j).to_string(), reasoning.is_null(j)))
                .collect();
            conversations.push((ids.value(i).to_string(), t));
        }
    }
    assert_eq!(conversations.len(), 3);
    assert_eq!(conversations[0].0, format!("{run}-row-0"));
    assert_eq!(
        conversations[0].1[1],
        (
            "assistant".into(),
            "<think>\nLet me think step by step.\n</think>\n\nThe answer is 42.".into(),
            true
        )
    );
    assert_eq!(conversations[1].1.len(), 5);
    assert_eq!(conversations[1].1[4].1, "Rome.");
}

/// The masked tokens, decoded run by run.
fn masked_runs(tokenizer: &RowTokenizer, ids: &[u32], mask: &[u8]) -> Vec<String> {
    let mut runs = Vec::new();
    let mut current: Vec<u32> = Vec::new();
    for (&id, &m) in ids.iter().zip(mask) {
        if m == 1 {
            current.push(id);
        } else if !current.is_empty() {
            runs.push(tokenizer.tokenizer().decode(&std::mem::take(&mut current), false).unwrap());
        }
    }
    if !current.is_empty() {
        runs.push(tokenizer.tokenizer().decode(&current, false).unwrap());
    }
    runs
}

fn tokenized(tokenizer: &RowTokenizer, conversation: &Conversation) -> (Vec<u32>, Vec<u8>) {
    match tokenizer.tokenize(conversation).unwrap() {
        Outcome::Row(row) => (row.input_ids, row.loss_mask),
        _ => panic!("the row was dropped"),
    }
}

#[test]
fn loss_masks_cover_exactly_the_assistant_spans_on_both_templates() {
    let qwen = RowTokenizer::from_dir(&fixtures().join("qwen"), 4096, Overlong::Drop).unwrap();
    let thinking = Conversation {
        id: "t".into(),
        tools: None,
        thinking: Some(true),
        turns: vec![
            turn("system", "You are a helpful assistant.", None),
            turn("user", "What is 6 times 7?", None),
            turn("assistant", "The answer is 42.", Some("Let me think step by step.")),
        ],
    };
    let (ids, mask) = tokenized(&qwen, &thinking);
    assert_eq!(ids.len(), mask.len());
    assert_eq!(
        masked_runs(&qwen, &ids, &mask),
        ["<think>\nLet me think step by step.\n</think>\n\nThe answer is 42.<|im_end|>\n"]
    );
    // The whole sequence decodes back to the rendered conversation.
    let text = qwen.tokenizer().decode(&ids, false).unwrap();
    assert!(
        text.starts_with("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n")
    );

    // Multi-turn with thinking off: the template's empty think block belongs to the prompt. The
    // earlier answer is rendered without the empty think block its prompt had (this template,
    // like Qwen3, renders turns before the last user message differently), so it is not what
    // the model wrote after that prompt and stays unsupervised.
    let multi = Conversation {
        id: "m".into(),
        tools: None,
        thinking: Some(false),
        turns: vec![
            turn("user", "What is the capital of France?", None),
            turn("assistant", "Paris.", None),
            turn("user", "And of Italy?", None),
            turn("assistant", "Rome.", None),
        ],
    };
    let (ids, mask) = tokenized(&qwen, &multi);
    assert_eq!(masked_runs(&qwen, &ids, &mask), ["Rome.<|im_end|>\n"]);
    match qwen.tokenize(&multi).unwrap() {
        Outcome::Row(row) => assert_eq!(row.unsupervised_turns, 1),
        _ => panic!("the row was dropped"),
    }
    let text = qwen.tokenizer().decode(&ids, false).unwrap();
    assert!(text.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\nRome.<|im_end|>\n"), "{text}");

    let llama =
        RowTokenizer::from_dir_dated(&fixtures().join("llama"), date!(2026 - 02 - 03), 4096, Overlong::Drop)
            .unwrap();
    let plain = Conversation {
        id: "l".into(),
        tools: None,
        thinking: None,
        turns: vec![
            turn("system", "Answer briefly.", None),
            turn("user", "What is the capital of France?", None),
            turn("assistant", "  The capital of France is Paris. ", None),
            turn("user", "Thanks!", None),
            turn("assistant", "You are welcome.", None),
        ],
    };
    let (ids, mask) = tokenized(&llama, &plain);
    assert_eq!(
        masked_runs(&llama, &ids, &mask),
        ["The capital of France is Paris.<|eot_id|>", "You are welcome.<|eot_id|>"]
    );
    let text = llama.tokenizer().decode(&ids, false).unwrap();
    // strftime_now renders the tokenizer's date, not the day the test runs.
    assert!(text.starts_with(
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nToday Date: 03 Feb 2026"
    ));
    assert_eq!(llama.template_date(), date!(2026 - 02 - 03));

    // Too long: dropped, or truncated with the mask cut alike.
    let short = RowTokenizer::from_dir(&fixtures().join("llama"), 30, Overlong::Drop).unwrap();
    assert!(matches!(short.tokenize(&plain).unwrap(), Outcome::DroppedOverlong | Outcome::DroppedNoLoss));
    let cut = RowTokenizer::from_dir(&fixtures().join("qwen"), 40, Overlong::Truncate).unwrap();
    match cut.tokenize(&thinking).unwrap() {
        Outcome::Row(row) => {
            assert_eq!((row.input_ids.len(), row.loss_mask.len()), (40, 40));
            assert!(row.truncated);
            assert_eq!(row.loss_mask, mask_prefix(&qwen, &thinking, 40));
        }
        Outcome::DroppedNoLoss => {} // all 40 tokens were prompt
        Outcome::DroppedOverlong => panic!("truncate must not drop"),
    }
}

/// The answer's text also stands in the reasoning: the whole turn is still supervised (the span
/// used to end at the first "42", inside the reasoning).
#[test]
fn an_answer_repeated_in_its_reasoning_is_supervised_whole() {
    let qwen = RowTokenizer::from_dir(&fixtures().join("qwen"), 4096, Overlong::Drop).unwrap();
    let repeated = Conversation {
        id: "r".into(),
        tools: None,
        thinking: Some(true),
        turns: vec![
            turn("user", "What is 6 times 7?", None),
            turn("assistant", "42", Some("6 times 7 is 42. So the answer is 42.")),
        ],
    };
    let (ids, mask) = tokenized(&qwen, &repeated);
    assert_eq!(
        masked_runs(&qwen, &ids, &mask),
        ["<think>\n6 times 7 is 42. So the answer is 42.\n</think>\n\n42<|im_end|>\n"]
    );
}

fn mask_prefix(tokenizer: &RowTokenizer, conversation: &Conversation, n: usize) -> Vec<u8> {
    tokenized(tokenizer, conversation).1[..n].to_vec()
}

#[test]
fn a_template_that_fails_says_so() {
    let llama = RowTokenizer::from_dir(&fixtures().join("llama"), 4096, Overlong::Drop).unwrap();
    let tool = Conversation {
        id: "x".into(),
        tools: None,
        thinking: None,
        turns: vec![turn("user", "hi", None), turn("tool", "{}", None), turn("assistant", "ok", None)],
    };
    let error = llama.tokenize(&tool).err().expect("the template refuses tool turns").to_string();
    assert!(error.contains("roles must be user or assistant"), "{error}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn tokenized_export_is_repeatable_and_split_by_seed(pool: sqlx::PgPool) {
    let run = finished_run(&pool, &seeds()).await;
    let env = env();
    std::fs::create_dir_all(env.root.join("exports/tokenizers")).unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixtures().join("qwen").join(file), env.root.join("exports/tokenizers").join(file))
            .unwrap();
    }
    let mut spec = spec(run, "tok");
    spec.format.layout = Layout::Tokenized;
    spec.format.file = FileFormat::Parquet;
    spec.format.validation_share = 0.5;
    spec.selection.seed = 3;
    spec.format.tokenization = Some(Tokenization {
        tokenizer_dir: "tokenizers".into(),
        max_length: 4096,
        overlong: Overlong::Drop,
        source: TokenSource::Retokenize,
        turn_rows: TurnRows::PerConversation,
        turn_end: TurnEnd::AsSampled,
    });
    let (first, status) = export(&pool, &env, &spec).await;
    assert_eq!(
        status,
        ExportStatus::Completed,
        "{:?}",
        engine::export::store::get(&pool, first).await.unwrap().error
    );
    let (second, status) = export(&pool, &env, &spec).await;
    assert_eq!(status, ExportStatus::Completed);
    let a = read_manifest(&env.root.join(format!("exports/tok/export-{first}")));
    let b = read_manifest(&env.root.join(format!("exports/tok/export-{second}")));
    assert_eq!(a.files, b.files, "the same export gives the same bytes");
    assert_eq!(
        a.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["train.parquet", "validation.parquet"]
    );
    assert_eq!(a.files.iter().map(|f| f.rows).sum::<u64>(), 3);
    assert_eq!(a.counts.written, 3);
    assert!(a.counts.loss_tokens > 0 && a.counts.loss_tokens < a.counts.input_tokens);
    // The multi-turn sample's first answer is re-rendered in the history (see the mask test).
    assert_eq!(a.counts.unsupervised_turns, 1);
    // Templates that stamp a date get the export's creation date, and the manifest says so.
    assert_eq!(a.template_date.as_deref(), Some(&a.created_at[..10]));
    for dir in [first, second] {
        let dir = env.root.join(format!("exports/tok/export-{dir}"));
        for file in &a.files {
            assert_eq!(manifest::hash_file(&dir.join(&file.name)).unwrap().0, file.sha256);
        }
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn traversal_and_link_escapes_are_refused(pool: sqlx::PgPool) {
    let env = env();
    for bad in ["../outside", "a/../../outside", "/etc", "/tmp"] {
        let error = env.storage.resolve(bad, true).unwrap_err().to_string();
        assert!(error.contains("refused") || error.contains("outside the storage roots"), "{bad}: {error}");
    }
    std::fs::create_dir_all(env.root.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(env.root.join("elsewhere"), env.root.join("exports/link")).unwrap();
    let error = env.storage.resolve("link/sub", true).unwrap_err().to_string();
    assert!(error.contains("through a link"), "{error}");
    assert!(entries(&env.root.join("elsewhere")).is_empty(), "nothing is created beyond the link");

    // A job with such a destination fails with the reason and writes nothing.
    let run = finished_run(&pool, &seeds()).await;
    let (id, status) = export(&pool, &env, &spec(run, "../outside")).await;
    assert_eq!(status, ExportStatus::Failed);
    let record = engine::export::store::get(&pool, id).await.unwrap();
    assert!(record.error.unwrap().contains("refused"));
    assert!(!env.root.join("outside").exists());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_cancelled_export_leaves_nothing(pool: sqlx::PgPool) {
    let run = finished_run(&pool, &seeds()).await;
    let env = env();
    let id = job::create(&pool, &spec(run, "cancelled"), None, None).await.unwrap();
    assert!(job::cancel(&pool, id).await.unwrap());
    assert_eq!(job::run(&pool, &env.storage, id).await.unwrap(), ExportStatus::Cancelled);
    assert!(entries(&env.root.join("exports/cancelled")).is_empty());
    assert!(!job::cancel(&pool, id).await.unwrap(), "a finished export cannot be cancelled");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_failed_export_leaves_nothing(pool: sqlx::PgPool) {
    // A tool turn makes the Llama-style template raise midway through the export.
    let mut seeds = seeds();
    seeds[4].messages = json!([
        {"role": "user", "content": "hi"}, {"role": "tool", "content": "{}"}, {"role": "assistant", "content": "ok"}
    ]);
    let run = finished_run(&pool, &seeds).await;
    let env = env();
    std::fs::create_dir_all(env.root.join("exports/llama")).unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixtures().join("llama").join(file), env.root.join("exports/llama").join(file))
            .unwrap();
    }
    let mut spec = spec(run, "failed");
    spec.format.layout = Layout::Tokenized;
    spec.format.tokenization = Some(Tokenization {
        tokenizer_dir: "llama".into(),
        max_length: 4096,
        overlong: Overlong::Truncate,
        source: TokenSource::Auto,
        turn_rows: TurnRows::PerConversation,
        turn_end: TurnEnd::AsSampled,
    });
    let (id, status) = export(&pool, &env, &spec).await;
    assert_eq!(status, ExportStatus::Failed);
    let error = engine::export::store::get(&pool, id).await.unwrap().error.unwrap();
    assert!(error.contains("roles must be user or assistant"), "{error}");
    assert!(entries(&env.root.join("exports/failed")).is_empty());
}

/// A moto S3 server on a free port, stopped on drop.
struct Moto {
    child: std::process::Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn moto() -> Moto {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = std::process::Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto_server runs (scripts/test.sh installs it: pip install 'moto[server]')");
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client.get(format!("http://127.0.0.1:{port}/")).send().await.is_ok() {
            return Moto { child, port };
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("moto_server did not start on port {port}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_s3_upload_lands(pool: sqlx::PgPool) {
    use futures::TryStreamExt;
    use object_store::ObjectStore;

    let moto = moto().await;
    let endpoint = format!("http://127.0.0.1:{}", moto.port);
    let created = reqwest::Client::new().put(format!("{endpoint}/training")).send().await.unwrap();
    assert!(created.status().is_success(), "bucket created: {}", created.status());

    let run = finished_run(&pool, &seeds()).await;
    let mut env = env();
    env.storage.s3 = S3Options {
        endpoint: Some(endpoint),
        region: Some("us-east-1".into()),
        access_key_id: Some("test".into()),
        secret_access_key: Some("test".into()),
        allow_http: true,
    };
    let mut spec = spec(run, "");
    spec.destination = Destination::S3 { bucket: "training".into(), prefix: "sets/eagle3".into() };
    let (id, status) = export(&pool, &env, &spec).await;
    assert_eq!(
        status,
        ExportStatus::Completed,
        "{:?}",
        engine::export::store::get(&pool, id).await.unwrap().error
    );
    let record = engine::export::store::get(&pool, id).await.unwrap();
    assert_eq!(record.location.unwrap(), format!("s3://training/sets/eagle3/export-{id}"));

    let store = env.storage.s3.store("training").unwrap();
    let listed: Vec<String> = store
        .list(Some(&object_store::path::Path::from("sets/eagle3")))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    let mut listed = listed;
    listed.sort();
    assert_eq!(
        listed,
        [format!("sets/eagle3/export-{id}/manifest.json"), format!("sets/eagle3/export-{id}/train.jsonl")]
    );
    let manifest: Manifest = serde_json::from_slice(
        &store
            .get(&format!("sets/eagle3/export-{id}/manifest.json").into())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let data = store
        .get(&format!("sets/eagle3/export-{id}/train.jsonl").into())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    use sha2::Digest;
    assert_eq!(hex::encode(sha2::Sha256::digest(&data)), manifest.files[0].sha256);
    assert_eq!(data.iter().filter(|&&b| b == b'\n').count(), 3);
    assert!(entries(&env.root.join("staging")).is_empty(), "the local staging is removed");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn captured_rows_ending_as_rendered_are_the_rows_a_trainer_renders_turn_by_turn(pool: sqlx::PgPool) {
    // Thinking on: each prompt ends with the assistant header and each answer opens with
    // `<think>`, so the server's ids are the tokenizer's own (with thinking off they need not be).
    let mut multi = SeedSample::answered("unused", "", "unused");
    multi.thinking = Some(true);
    multi.messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris.", "reasoning_content": "A capital."},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome.", "reasoning_content": "Another one."}
    ]);
    let samples = [SeedSample::answered("What is 6 times 7?", "Six sevens.", "The answer is 42."), multi];
    let run = finished_run(&pool, &samples).await;
    let env = env();
    std::fs::create_dir_all(env.root.join("exports/tokenizers")).unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixtures().join("qwen").join(file), env.root.join("exports/tokenizers").join(file))
            .unwrap();
    }
    let qwen = RowTokenizer::from_dir(&fixtures().join("qwen"), 4096, Overlong::Drop).unwrap();
    engine::testing::seed_rendered_ids(&pool, run, &qwen, "<|im_end|>").await;

    let rows_of = |source: TokenSource, turn_end: TurnEnd, dir: &'static str| {
        let mut spec = spec(run, dir);
        spec.format.layout = Layout::Tokenized;
        spec.format.tokenization = Some(Tokenization {
            tokenizer_dir: "tokenizers".into(),
            max_length: 4096,
            overlong: Overlong::Drop,
            source,
            turn_rows: TurnRows::PerTurn,
            turn_end,
        });
        let (pool, env) = (&pool, &env);
        async move {
            let (id, status) = export(pool, env, &spec).await;
            let error = engine::export::store::get(pool, id).await.unwrap().error;
            assert_eq!(status, ExportStatus::Completed, "{dir}: {error:?}");
            let dir = env.root.join(format!("exports/{dir}/export-{id}"));
            (jsonl(&dir.join("train.jsonl")), read_manifest(&dir))
        }
    };
    let (rendered, rendered_manifest) = rows_of(TokenSource::Captured, TurnEnd::AsRendered, "rendered").await;
    let (sampled, _) = rows_of(TokenSource::Captured, TurnEnd::AsSampled, "sampled").await;
    let (retokenized, _) = rows_of(TokenSource::Retokenize, TurnEnd::AsRendered, "retokenized").await;
    assert_eq!(rendered_manifest.token_source, Some(engine::export::manifest::TokenSourceUsed::Captured));

    let row_ids =
        |rows: &[Value]| rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(
        row_ids(&rendered),
        [format!("{run}-row-0"), format!("{run}-row-1_turn0"), format!("{run}-row-1_turn1")]
    );
    // Captured ids followed by the template's end of turn are the trainer's row, mask included.
    assert_eq!(rendered, retokenized);
    let newline = qwen.tokenizer().encode("\n", false).unwrap().get_ids().to_vec();
    for (with_end, as_sampled) in rendered.iter().zip(&sampled) {
        let (a, b) = (with_end["input_ids"].as_array().unwrap(), as_sampled["input_ids"].as_array().unwrap());
        assert_eq!(a[..b.len()], b[..], "the server's ids come first, unchanged");
        assert_eq!(a[b.len()..].iter().map(|v| v.as_u64().unwrap() as u32).collect::<Vec<_>>(), newline);
        assert_eq!(
            with_end["loss_mask"].as_array().unwrap().last(),
            Some(&json!(1)),
            "the newline is learned"
        );
    }
}
