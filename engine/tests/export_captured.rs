//! Pre-tokenized exports from the server's own token ids: runs generated against the simulator
//! (which returns `prompt_token_ids` and `token_ids` as vLLM 0.32 does), exported, and each row
//! compared with the ids the server reported, request by request.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::export::*;
use domain::generation::TurnMode;
use engine::export::job;
use engine::export::manifest::{Manifest, TokenSourceUsed};
use engine::generation::token_ids;
use engine::testing::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod export_env;

use export_env::{env, Env};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

fn tokenized(run: i64, source: TokenSource, turn_rows: TurnRows, dir: &str) -> ExportSpec {
    ExportSpec {
        selection: ExportSelection::for_runs(vec![run]),
        format: ExportFormat {
            layout: Layout::Tokenized,
            tokenization: Some(Tokenization {
                tokenizer_dir: String::new(),
                max_length: 1 << 20,
                overlong: Overlong::Drop,
                source,
                turn_rows,
                turn_end: TurnEnd::AsSampled,
            }),
            ..Default::default()
        },
        destination: Destination::Directory { path: dir.into() },
    }
}

async fn export(
    pool: &sqlx::PgPool,
    env: &Env,
    spec: &ExportSpec,
) -> (ExportStatus, Option<String>, PathBuf) {
    let id = job::create(pool, spec, None, None).await.unwrap();
    let status = job::run(pool, &env.storage, id).await.unwrap();
    let record = engine::export::store::get(pool, id).await.unwrap();
    let Destination::Directory { path } = &spec.destination else { unreachable!() };
    (status, record.error, env.root.join("exports").join(path).join(format!("export-{id}")))
}

fn rows(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("train.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(value: &Value) -> Vec<u32> {
    value.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect()
}

/// One request's ids: (prompt, completion).
type Request = (Vec<u32>, Vec<u32>);

/// Each sample's requests as stored: (export id, [(prompt, completion)]).
async fn stored(pool: &sqlx::PgPool, run: i64) -> Vec<(String, Vec<Request>)> {
    type Row = (i64, String, i16, Vec<u8>, Vec<u8>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT s.id, r.row_key, t.turn, t.prompt_ids, t.completion_ids
         FROM samples s JOIN dataset_rows r ON r.id = s.row_id JOIN sample_tokens t ON t.sample_id = s.id
         WHERE s.run_id = $1 ORDER BY s.id, t.turn",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out: Vec<(i64, String, Vec<Request>)> = Vec::new();
    for (id, key, _turn, prompt, completion) in rows {
        let pair = (token_ids::unpack(&prompt).unwrap(), token_ids::unpack(&completion).unwrap());
        match out.last_mut() {
            Some((last, _, requests)) if *last == id => requests.push(pair),
            _ => out.push((id, format!("{run}-{key}"), vec![pair])),
        }
    }
    out.into_iter().map(|(_, key, requests)| (key, requests)).collect()
}

async fn generated_run(pool: &sqlx::PgPool, config: vllm_sim::SimConfig, turns: TurnMode, n: usize) -> i64 {
    let sim = sim(config).await;
    let by = user(pool).await;
    let endpoint = endpoint(pool, &sim, by).await;
    let dataset = if turns == TurnMode::EveryAssistant {
        multi_turn_dataset(pool, n).await
    } else {
        dataset(pool, n).await
    };
    let mut s = settings(vec![endpoint]);
    s.turns = turns;
    let run = create_run(pool, dataset, s, by).await;
    let (stop, worker) = start_worker(pool);
    wait_for_status(pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    run
}

/// Conversations of two user turns, each with an old answer to regenerate.
async fn multi_turn_dataset(pool: &sqlx::PgPool, n: usize) -> i64 {
    let conversations: Vec<Value> =
        (0..n).map(|i| two_turns(&format!("first question {i}"), &format!("second question {i}"))).collect();
    dataset_of_conversations(pool, &conversations).await
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_tokenized_export_is_the_servers_ids_token_for_token(pool: sqlx::PgPool) {
    let run = generated_run(&pool, fast_sim(), TurnMode::LastAssistant, 16).await;
    let env = env();
    // No tokenizer folder: the rows need none, and Auto picks the captured ids.
    let (status, error, dir) =
        export(&pool, &env, &tokenized(run, TokenSource::Auto, TurnRows::PerConversation, "c")).await;
    assert_eq!(status, ExportStatus::Completed, "{error:?}");
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest.token_source, Some(TokenSourceUsed::Captured));
    let expected = stored(&pool, run).await;
    let written = rows(&dir);
    assert_eq!(written.len(), 16);
    assert_eq!(manifest.counts.captured_requests, 16);
    for ((id, requests), row) in expected.iter().zip(&written) {
        assert_eq!(row["id"].as_str().unwrap(), id);
        let [(prompt, completion)] = &requests[..] else { panic!("one request per single-turn sample") };
        let input = ids(&row["input_ids"]);
        let mask = ids(&row["loss_mask"]);
        assert_eq!(input, [prompt.clone(), completion.clone()].concat(), "{id}");
        assert_eq!(mask, [vec![0; prompt.len()], vec![1; completion.len()]].concat(), "{id}");
        assert!(!completion.is_empty());
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn conversations_regenerated_turn_by_turn_give_rows_per_turn_or_per_conversation(pool: sqlx::PgPool) {
    let run = generated_run(&pool, fast_sim(), TurnMode::EveryAssistant, 6).await;
    let env = env();
    let expected = stored(&pool, run).await;
    assert!(expected.iter().all(|(_, requests)| requests.len() == 2), "two requests per conversation");

    let (status, error, dir) =
        export(&pool, &env, &tokenized(run, TokenSource::Captured, TurnRows::PerTurn, "t")).await;
    assert_eq!(status, ExportStatus::Completed, "{error:?}");
    let written = rows(&dir);
    assert_eq!(written.len(), 12, "one row per request");
    for ((id, requests), pair) in expected.iter().zip(written.chunks(2)) {
        for (k, ((prompt, completion), row)) in requests.iter().zip(pair).enumerate() {
            assert_eq!(row["id"].as_str().unwrap(), format!("{id}_turn{k}"));
            assert_eq!(ids(&row["input_ids"]), [prompt.clone(), completion.clone()].concat());
            assert_eq!(ids(&row["loss_mask"]), [vec![0; prompt.len()], vec![1; completion.len()]].concat());
        }
    }

    let (status, error, dir) =
        export(&pool, &env, &tokenized(run, TokenSource::Captured, TurnRows::PerConversation, "p")).await;
    assert_eq!(status, ExportStatus::Completed, "{error:?}");
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let written = rows(&dir);
    assert_eq!(written.len(), 6, "one row per conversation");
    let mut unsupervised = 0;
    for ((id, requests), row) in expected.iter().zip(&written) {
        let [(first_prompt, first), (prompt, completion)] = &requests[..] else { unreachable!() };
        assert_eq!(row["id"].as_str().unwrap(), id);
        assert_eq!(ids(&row["input_ids"]), [prompt.clone(), completion.clone()].concat());
        let mask = ids(&row["loss_mask"]);
        assert!(mask[prompt.len()..].iter().all(|&m| m == 1), "the last answer is learned");
        // The first answer is learned exactly where the last prompt repeats it token for token.
        let end = first_prompt.len() + first.len();
        let repeated =
            prompt.len() >= end && prompt[..end] == [first_prompt.clone(), first.clone()].concat()[..];
        let expected_mask: Vec<u32> =
            (0..prompt.len()).map(|i| u32::from(repeated && i >= first_prompt.len() && i < end)).collect();
        assert_eq!(mask[..prompt.len()], expected_mask[..], "{id}");
        unsupervised += u64::from(!repeated);
    }
    assert_eq!(manifest.counts.unsupervised_turns, unsupervised);
    assert_eq!(manifest.counts.captured_requests, 12);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn samples_without_ids_are_re_tokenized_by_default_and_refused_when_ids_are_demanded(
    pool: sqlx::PgPool,
) {
    let mut config = fast_sim();
    config.ignore_return_token_ids = true;
    let run = generated_run(&pool, config, TurnMode::LastAssistant, 4).await;
    let env = env();
    let (status, error, _) =
        export(&pool, &env, &tokenized(run, TokenSource::Captured, TurnRows::PerConversation, "x")).await;
    assert_eq!(status, ExportStatus::Failed);
    let error = error.unwrap();
    assert!(error.contains("4 of the 4 selected samples have no token ids"), "{error}");
    assert!(error.contains("re-tokenize"), "the message says what to do: {error}");

    // Auto falls back to re-tokenizing, which needs the target's tokenizer.
    std::fs::create_dir_all(env.root.join("exports/tok")).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers/qwen");
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixtures.join(file), env.root.join("exports/tok").join(file)).unwrap();
    }
    let mut spec = tokenized(run, TokenSource::Auto, TurnRows::PerConversation, "y");
    spec.format.tokenization.as_mut().unwrap().tokenizer_dir = "tok".into();
    let (status, error, dir) = export(&pool, &env, &spec).await;
    assert_eq!(status, ExportStatus::Completed, "{error:?}");
    let manifest: Manifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest.token_source, Some(TokenSourceUsed::Retokenized));
    assert_eq!(manifest.counts.written, 4);
    assert_eq!(manifest.counts.captured_requests, 0);
}
