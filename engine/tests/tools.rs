//! Tool-calling conversations through the generation engine, against the vLLM simulator: calls
//! assembled from streamed fragments, `finish_reason: tool_calls` as a finished answer, the
//! source's tool results kept and answering the regenerated calls, and the automatic flags; and
//! the tokens of each span (reasoning, answer, calls) counted from the streamed ids.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::conversation::ToolCall;
use domain::generation::{RunSettings, Thinking, ToolChoice, TurnMode};
use engine::testing::*;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

fn weather_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}])
}

/// An agent conversation: a question, a call, the tool's result, and a text answer.
fn agent_conversation(i: usize) -> Value {
    json!([
        {"role": "user", "content": format!("What is the weather in city {i}?")},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "source-call", "type": "function", "function": {"name": "get_weather", "arguments": "{\"text\": \"x\"}"}}]},
        {"role": "tool", "tool_call_id": "source-call", "content": format!("{{\"temp\": {i}}}")},
        {"role": "assistant", "content": "It is mild."}
    ])
}

async fn offer(pool: &PgPool, dataset: i64, tools: &Value) {
    // As text, as an import stores it: a bound Value is jsonb, which sorts the keys.
    sqlx::query("UPDATE dataset_rows SET tools = $2::json WHERE dataset_id = $1")
        .bind(dataset)
        .bind(tools.to_string())
        .execute(pool)
        .await
        .unwrap();
}

async fn run_to_end(pool: &PgPool, dataset: i64, turns: TurnMode, tool_choice: ToolChoice) -> i64 {
    run_on(pool, dataset, fast_sim(), |s| {
        s.turns = turns;
        s.tool_choice = tool_choice;
    })
    .await
}

async fn run_on(
    pool: &PgPool,
    dataset: i64,
    config: vllm_sim::SimConfig,
    set: impl FnOnce(&mut RunSettings),
) -> i64 {
    let sim = sim(config).await;
    let by: i64 = match sqlx::query_scalar("SELECT id FROM users LIMIT 1").fetch_optional(pool).await.unwrap()
    {
        Some(id) => id,
        None => user(pool).await,
    };
    let endpoint = endpoint(pool, &sim, by).await;
    let mut settings = settings(vec![endpoint]);
    set(&mut settings);
    let run = create_run(pool, dataset, settings, by).await;
    let (stop, worker) = start_worker(pool);
    wait_for_status(pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_exactly_one_result_each(pool, run).await;
    run
}

async fn conversations(pool: &PgPool, run: i64) -> Vec<(String, Vec<String>, Value)> {
    sqlx::query_as::<_, (String, Vec<String>, Value)>(
        "SELECT finish_reason, auto_flags, messages FROM samples WHERE run_id = $1 AND state = 'ok' ORDER BY id",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap()
}

fn calls_of(turn: &Value) -> Vec<ToolCall> {
    serde_json::from_value(turn.get("tool_calls").cloned().unwrap_or(json!([]))).unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_required_call_is_a_whole_answer_made_of_streamed_fragments(pool: PgPool) {
    let dataset = dataset_of_conversations(&pool, &(0..6).map(agent_conversation).collect::<Vec<_>>()).await;
    offer(&pool, dataset, &weather_tools()).await;
    let run = run_to_end(&pool, dataset, TurnMode::FirstUser, ToolChoice::Required).await;
    let done = conversations(&pool, run).await;
    assert_eq!(done.len(), 6, "{:?}", state_counts(&pool, run).await);
    for (finish_reason, flags, messages) in done {
        assert_eq!(finish_reason, "tool_calls");
        // A call with no text beside it is not an empty answer.
        assert!(flags.is_empty(), "{flags:?}");
        let answer = messages.as_array().unwrap().last().unwrap().clone();
        let calls = calls_of(&answer);
        assert_eq!(calls.len(), 1, "{answer}");
        assert_eq!(calls[0].function.name, "get_weather");
        assert!(calls[0].id.starts_with("chatcmpl-tool-"), "{}", calls[0].id);
        // The arguments came in many fragments and add up to one JSON object.
        assert!(calls[0].parsed_arguments().unwrap()["text"].as_str().unwrap().len() > 10);
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn every_assistant_turn_keeps_the_sources_results_answering_the_new_calls(pool: PgPool) {
    let dataset = dataset_of_conversations(&pool, &(0..4).map(agent_conversation).collect::<Vec<_>>()).await;
    offer(&pool, dataset, &weather_tools()).await;
    // `auto`: the simulator calls after a question and answers in text after a tool's result.
    let run = run_to_end(&pool, dataset, TurnMode::EveryAssistant, ToolChoice::Auto).await;
    let done = conversations(&pool, run).await;
    assert_eq!(done.len(), 4, "{:?}", state_counts(&pool, run).await);
    for (i, (finish_reason, flags, messages)) in done.iter().enumerate() {
        let turns = messages.as_array().unwrap();
        let roles: Vec<&str> = turns.iter().map(|t| t["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
        let call = &calls_of(&turns[1])[0];
        assert_ne!(call.id, "source-call");
        // The source's result, kept, now answers the regenerated call.
        assert_eq!(turns[2]["tool_call_id"], call.id.as_str());
        assert_eq!(turns[2]["content"], format!("{{\"temp\": {i}}}"));
        assert!(calls_of(&turns[3]).is_empty());
        assert_eq!(finish_reason, "stop");
        // The simulator's call asks for its own text, not the source's `{"text": "x"}`: the
        // source's result answers a question the call no longer asks.
        assert_ne!(Value::Object(call.parsed_arguments().unwrap()), json!({"text": "x"}));
        assert_eq!(flags, &["tool_arguments_changed"]);
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_call_left_unanswered_before_a_user_turn_is_flagged(pool: PgPool) {
    // The source answered in text, then the user asked again; with `required` the regenerated
    // first turn calls a tool, and no result answers it before the second question.
    let conversation = |i: usize| {
        json!([
            {"role": "user", "content": format!("What is the weather in city {i}?")},
            {"role": "assistant", "content": "Mild."},
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": "Also mild."}
        ])
    };
    let dataset = dataset_of_conversations(&pool, &(0..3).map(conversation).collect::<Vec<_>>()).await;
    offer(&pool, dataset, &weather_tools()).await;
    let run = run_to_end(&pool, dataset, TurnMode::EveryAssistant, ToolChoice::Required).await;
    let done = conversations(&pool, run).await;
    assert_eq!(done.len(), 3, "{:?}", state_counts(&pool, run).await);
    for (_, flags, messages) in done {
        let roles: Vec<&str> =
            messages.as_array().unwrap().iter().map(|t| t["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
        assert!(!calls_of(&messages[1]).is_empty(), "{messages}");
        assert_eq!(flags, ["unanswered_tool_call"]);
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_call_the_sources_results_no_longer_answer_is_flagged(pool: PgPool) {
    // The source called `get_time`; the row offers only `get_weather`, which the model calls.
    let conversation = |i: usize| {
        let mut c = agent_conversation(i);
        c[1]["tool_calls"][0]["function"]["name"] = json!("get_time");
        c
    };
    let dataset = dataset_of_conversations(&pool, &(0..3).map(conversation).collect::<Vec<_>>()).await;
    offer(&pool, dataset, &weather_tools()).await;
    let run = run_to_end(&pool, dataset, TurnMode::EveryAssistant, ToolChoice::Auto).await;
    for (_, flags, _) in conversations(&pool, run).await {
        assert_eq!(flags, ["tool_result_mismatch"]);
    }

    // Only the regenerated turns' calls are judged: the source's call to `get_time`, kept before
    // a regenerated last turn that answers in text, flags nothing.
    let run = run_to_end(&pool, dataset, TurnMode::LastAssistant, ToolChoice::Auto).await;
    for (finish_reason, flags, _) in conversations(&pool, run).await {
        assert_eq!(finish_reason, "stop");
        assert!(flags.is_empty(), "{flags:?}");
    }

    // A row offering no tools sends none, and the answer is text.
    let plain = dataset_of_conversations(&pool, &(0..2).map(agent_conversation).collect::<Vec<_>>()).await;
    let run = run_to_end(&pool, plain, TurnMode::FirstUser, ToolChoice::Required).await;
    for (finish_reason, flags, messages) in conversations(&pool, run).await {
        assert_eq!(finish_reason, "stop");
        assert!(flags.is_empty(), "{flags:?}");
        assert!(calls_of(messages.as_array().unwrap().last().unwrap()).is_empty());
    }
}

/// Each finished sample's reasoning text length and its counts: reasoning, answer, calls,
/// completion.
type Counts = (usize, Option<i32>, Option<i32>, Option<i32>, Option<i32>);

async fn span_counts(pool: &PgPool, run: i64) -> Vec<Counts> {
    sqlx::query_as::<_, (Option<String>, Option<i32>, Option<i32>, Option<i32>, Option<i32>)>(
        "SELECT reasoning, reasoning_tokens, answer_tokens, tool_call_tokens, completion_tokens FROM samples
         WHERE run_id = $1 AND state IN ('ok', 'truncated') ORDER BY id",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(reasoning, r, a, t, c)| (reasoning.map_or(0, |r| r.len()), r, a, t, c))
    .collect()
}

/// A simulator that says `reasoning_tokens: 0`, as real vLLM 0.32 did on most reasoning samples.
fn zero_reasoning_sim(one_token_a_chunk: bool) -> vllm_sim::SimConfig {
    vllm_sim::SimConfig {
        zero_reasoning_tokens: true,
        ignore_stream_interval: one_token_a_chunk,
        ..fast_sim()
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn reasoning_tokens_are_counted_from_the_ids_not_taken_from_the_servers_zero(pool: PgPool) {
    let questions = dataset(&pool, 8).await;
    // One token a chunk, as vLLM streams by default: every id's span is known.
    let run = run_on(&pool, questions, zero_reasoning_sim(true), |s| s.thinking = Thinking::On).await;
    let counts = span_counts(&pool, run).await;
    assert_eq!(counts.len(), 8);
    assert!(counts.iter().filter(|c| c.0 > 0).count() >= 6, "thinking on: samples reason: {counts:?}");
    for (reasoning_chars, r, a, t, completion) in counts {
        if reasoning_chars > 0 {
            assert!(r.unwrap() > 0, "{reasoning_chars} characters of reasoning counted as {r:?}");
        }
        assert_eq!(t, Some(0));
        assert_eq!(Some(r.unwrap() + a.unwrap()), completion, "the spans add up to the completion");
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_chunk_across_the_end_of_reasoning_is_split_at_its_end_token_whatever_the_server_says(
    pool: PgPool,
) {
    // Many tokens a chunk: the end of the reasoning falls inside one. Its `</think>` id (the
    // engine asks the server's /tokenize for it) splits it; the server's figure, 0 here, plays
    // no part.
    let questions = dataset(&pool, 8).await;
    let zero = run_on(&pool, questions, zero_reasoning_sim(false), |s| {
        s.thinking = Thinking::On;
        s.stream_interval = 64;
    })
    .await;
    let true_figure = run_on(&pool, questions, fast_sim(), |s| {
        s.thinking = Thinking::On;
        s.stream_interval = 64;
    })
    .await;
    let (zero, true_figure) = (span_counts(&pool, zero).await, span_counts(&pool, true_figure).await);
    assert_eq!(zero.len(), 8);
    assert_eq!(zero, true_figure, "the same counts whatever the server's figure");
    assert!(zero.iter().filter(|c| c.0 > 0).count() >= 6, "thinking on: samples reason: {zero:?}");
    for (reasoning_chars, r, a, t, completion) in zero {
        assert_eq!(reasoning_chars > 0, r.unwrap() > 0, "{r:?}");
        assert_eq!((Some(r.unwrap() + a.unwrap()), t), (completion, Some(0)), "the spans add up");
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn without_ids_the_servers_reasoning_figure_stands_alone(pool: PgPool) {
    let questions = dataset(&pool, 4).await;
    let config = vllm_sim::SimConfig { ignore_return_token_ids: true, ..fast_sim() };
    let run = run_on(&pool, questions, config, |s| s.thinking = Thinking::On).await;
    for (_, r, a, t, completion) in span_counts(&pool, run).await {
        assert!(r.unwrap() > 0 && r <= completion, "{r:?} of {completion:?}");
        assert_eq!((a, t), (None, None), "no ids, no answer or call counts");
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn call_tokens_are_counted_apart_from_the_answer(pool: PgPool) {
    let dataset = dataset_of_conversations(&pool, &(0..4).map(agent_conversation).collect::<Vec<_>>()).await;
    offer(&pool, dataset, &weather_tools()).await;
    let config = vllm_sim::SimConfig { ignore_stream_interval: true, ..fast_sim() };
    let run = run_on(&pool, dataset, config, |s| {
        s.turns = TurnMode::FirstUser;
        s.tool_choice = ToolChoice::Required;
        s.thinking = Thinking::On;
    })
    .await;
    let counts = span_counts(&pool, run).await;
    assert_eq!(counts.len(), 4);
    for (_, r, a, t, completion) in counts {
        // The simulator writes the answer's tokens as the call's arguments.
        assert!(t.unwrap() > 0, "{t:?}");
        assert_eq!(a, Some(0));
        assert_eq!(Some(r.unwrap() + t.unwrap()), completion);
    }
}

/// A tool list written the way people write schemas, not alphabetically: `type` before
/// `properties` before `required`, each property's `type` before its `description`, `unit`'s
/// `enum` before its `type`, and the function's own keys in the order OpenAI's docs show.
const UNSORTED_TOOLS: &str = r#"[{"function":{"name":"get_weather","description":"The weather of a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city"},"unit":{"enum":["celsius","fahrenheit"],"type":"string"},"at":{"type":"object","properties":{"hour":{"type":"integer"},"day":{"type":"string"}}}},"required":["city"]},"x-owner":"ops"},"type":"function"}]"#;

/// What vLLM hands the chat template for that list: `type` then `function`, the function's
/// `name`, `description`, `parameters`, other keys dropped, and `parameters` as written.
const SERVED_TOOLS: &str = r#"[{"type":"function","function":{"name":"get_weather","description":"The weather of a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city"},"unit":{"enum":["celsius","fahrenheit"],"type":"string"},"at":{"type":"object","properties":{"hour":{"type":"integer"},"day":{"type":"string"}}}},"required":["city"]}}}]"#;

#[sqlx::test(migrator = "MIGRATOR")]
async fn tools_keep_the_sources_key_order_from_import_to_request_to_export(pool: PgPool) {
    use domain::dataset::SourceSpec;
    use domain::export::*;
    use engine::datasets::{import, DatasetSettings};
    use engine::export::{job, S3Options, Storage};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("datasets")).unwrap();
    // Written as text: the file holds exactly the order above.
    let line = |i: usize| {
        format!(
            r#"{{"id": "t{i}", "tools": {UNSORTED_TOOLS}, "messages": [{{"role": "user", "content": "Weather in city {i}?"}}, {{"role": "assistant", "content": "old"}}]}}"#
        )
    };
    let file = root.join("datasets/agent.jsonl");
    std::fs::write(&file, (0..3).map(line).collect::<Vec<_>>().join("\n")).unwrap();
    let settings = DatasetSettings {
        roots: vec![root.join("datasets")],
        files_dir: root.join("files"),
        ..DatasetSettings::default()
    };
    let started = import::start(
        &pool,
        &reqwest::Client::new(),
        &settings,
        import::NewImport {
            name: "agent".into(),
            source: SourceSpec::Path { path: file.display().to_string() },
            mapping: None,
            created_by: None,
        },
    )
    .await
    .unwrap();
    started.job.await.unwrap();
    let dataset = started.id;

    // Stored as the source wrote it (a jsonb column sorted every level).
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT tools::text FROM dataset_rows WHERE dataset_id = $1 ORDER BY row_key")
            .bind(dataset)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(stored, vec![UNSORTED_TOOLS; 3]);

    // Sent as stored: the request body the client builds from the claimed row.
    let claimed: Value = sqlx::query_scalar("SELECT tools FROM dataset_rows WHERE dataset_id = $1 LIMIT 1")
        .bind(dataset)
        .fetch_one(&pool)
        .await
        .unwrap();
    let request = engine::vllm::ChatRequest {
        model: "m".into(),
        messages: Vec::new(),
        tools: Some(claimed),
        tool_choice: Some("auto"),
        parallel_tool_calls: None,
        max_tokens: 8,
        temperature: None,
        top_p: None,
        seed: None,
        chat_template_kwargs: None,
        stream_interval: None,
        stream: true,
        stream_options: engine::vllm::StreamOptions { include_usage: true },
        return_token_ids: true,
    };
    let body = serde_json::to_string(&request).unwrap();
    assert!(body.contains(&format!(r#""tools":{UNSORTED_TOOLS}"#)), "{body}");

    // Exported as vLLM handed them to the template, `parameters` in the source's order.
    let run = run_to_end(&pool, dataset, TurnMode::LastAssistant, ToolChoice::Required).await;
    let storage = Storage::new(vec![root.join("exports")], S3Options::default());
    for (layout, file) in
        [(Layout::Conversations, FileFormat::Jsonl), (Layout::Messages, FileFormat::Parquet)]
    {
        let spec = ExportSpec {
            selection: ExportSelection { excluded_flags: Vec::new(), ..ExportSelection::for_runs(vec![run]) },
            format: ExportFormat { layout, file, ..ExportFormat::default() },
            destination: Destination::Directory { path: "sets".into() },
        };
        let id = job::create(&pool, &spec, None, None).await.unwrap();
        assert_eq!(job::run(&pool, &storage, id).await.unwrap(), ExportStatus::Completed);
        let data = root.join(format!("exports/sets/export-{id}/train.{}", file.extension()));
        let written: Vec<String> = match file {
            FileFormat::Jsonl => std::fs::read_to_string(&data)
                .unwrap()
                .lines()
                .map(|l| {
                    let start = l.find(r#""tools":"#).expect("a tools field") + r#""tools":"#.len();
                    l[start..start + SERVED_TOOLS.len()].to_string()
                })
                .collect(),
            FileFormat::Parquet => parquet_tools(&data),
        };
        assert_eq!(written, vec![SERVED_TOOLS; 3], "{layout:?} {file:?}");
    }
}

/// The `tools` column of a Parquet export, as written.
fn parquet_tools(path: &std::path::Path) -> Vec<String> {
    use arrow_array::{Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    reader
        .flat_map(|batch| {
            let batch = batch.unwrap();
            let tools = batch
                .column_by_name("tools")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone();
            (0..tools.len()).map(|i| tools.value(i).to_string()).collect::<Vec<_>>()
        })
        .collect()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_run_letting_the_model_call_tools_is_refused_before_it_starts_on_a_server_without_a_tool_parser(
    pool: PgPool,
) {
    let sim = sim(vllm_sim::SimConfig { no_tool_parser: true, ..fast_sim() }).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset_of_conversations(&pool, &(0..3).map(agent_conversation).collect::<Vec<_>>()).await;
    offer(&pool, dataset, &weather_tools()).await;
    let new = |tool_choice: ToolChoice| {
        let mut settings = settings(vec![endpoint]);
        settings.tool_choice = tool_choice;
        engine::runs::NewRun {
            name: format!("tools {}", tool_choice.as_str()),
            dataset_id: dataset,
            selection: domain::generation::Selection::All,
            settings,
            draft: None,
            trained_on: None,
        }
    };
    let refused = engine::runs::create(&pool, &engine::vllm::http_client(), new(ToolChoice::Auto), by)
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("runs no tool parser"), "{message}");
    assert!(message.contains("--enable-auto-tool-choice --tool-call-parser"), "{message}");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runs").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0, "nothing was created");
    // A forced call needs no parser on the server (it constrains the output), and neither do
    // rows without tools.
    engine::runs::create(&pool, &engine::vllm::http_client(), new(ToolChoice::Required), by).await.unwrap();
    let plain = dataset_of(&pool, &["What is 2 + 2?".to_string()]).await;
    engine::runs::create(
        &pool,
        &engine::vllm::http_client(),
        engine::runs::NewRun { dataset_id: plain, ..new(ToolChoice::Auto) },
        by,
    )
    .await
    .unwrap();
}
