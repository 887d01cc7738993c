//! The draft in the loop against the simulator: per-sample acceptance captured from vLLM's
//! per-request speculative-decoding figures, evaluation runs of named drafts, the views that
//! pool and compare them, and curation by acceptance.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::acceptance::{Dimension, DraftRef};
use domain::generation::{Selection, Thinking};
use engine::runs;
use engine::testing::*;
use engine::vllm::http_client;
use std::time::Duration;
use vllm_sim::{AcceptanceRule, RunningSim, SimConfig};

mod export_env;

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Where the simulated draft is weak: prompts holding this word.
const WEAK: &str = "MATH";

/// A simulator serving a draft of `k` tokens that accepts with `strong` chance, and `weak` on
/// prompts holding `WEAK`.
fn draft_sim(k: u32, strong: f64, weak: f64) -> SimConfig {
    let mut config = fast_sim();
    config.draft.num_speculative_tokens = k;
    config.draft.draft_acceptance = strong;
    config.draft.draft_acceptance_rules = vec![AcceptanceRule { contains: WEAK.into(), chance: weak }];
    config.draft.per_request_spec_decode_metrics = true;
    config
}

/// `n` questions; the even ones (category `even`) hold `WEAK`.
async fn mixed_dataset(pool: &sqlx::PgPool, n: usize) -> i64 {
    let questions: Vec<String> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                format!("Question {i}: a {WEAK} problem, number {i}; show the working.")
            } else {
                format!("Question {i}: explain topic number {i} in a few sentences, please.")
            }
        })
        .collect();
    dataset_of(pool, &questions).await
}

async fn run_to_end(pool: &sqlx::PgPool, run: i64) {
    let (stop, worker) = start_worker(pool);
    wait_for_status(pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
}

/// A run of every row of `dataset` on `sim`: (run, endpoint).
async fn generate(pool: &sqlx::PgPool, sim: &RunningSim, dataset: i64, by: i64) -> (i64, i64) {
    let endpoint = endpoint(pool, sim, by).await;
    let run = create_run(pool, dataset, settings(vec![endpoint]), by).await;
    run_to_end(pool, run).await;
    (run, endpoint)
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn each_try_and_sample_keeps_the_servers_figures_and_a_server_without_a_draft_gives_none(
    pool: sqlx::PgPool,
) {
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 24).await;
    let drafted = sim(draft_sim(3, 0.9, 0.1)).await;
    let (run, _) = generate(&pool, &drafted, dataset, by).await;

    // category, steps, accepted, drafted, K, histogram, acceptance (milli), completion tokens
    type Figures = (String, i32, i32, i32, i16, Vec<i32>, i32, i32);
    let rows: Vec<Figures> = sqlx::query_as(
        "SELECT d.category, s.spec_steps, s.spec_accepted, s.spec_drafted, s.spec_tokens, s.spec_histogram,
                s.acceptance_milli, s.completion_tokens
         FROM samples s JOIN dataset_rows d ON d.id = s.row_id WHERE s.run_id = $1 AND s.state = 'ok'",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 24, "every sample answered with its figures");
    let mut pooled = std::collections::HashMap::<String, (i64, i64)>::new();
    for (category, steps, accepted, drafted, k, histogram, milli, completion) in &rows {
        assert!(*steps > 0 && *k == 3 && *drafted == steps * 3, "{steps} {k} {drafted}");
        assert_eq!(histogram.len(), 4);
        assert_eq!(histogram.iter().sum::<i32>(), *steps);
        assert_eq!(histogram.iter().enumerate().map(|(j, n)| j as i32 * n).sum::<i32>(), *accepted);
        let length = 1.0 + f64::from(*accepted) / f64::from(*steps);
        assert_eq!(*milli, (1000.0 * length).round() as i32);
        assert!(1 + accepted + steps >= *completion, "steps and accepted tokens cover the completion");
        let entry = pooled.entry(category.clone()).or_default();
        entry.0 += i64::from(*accepted);
        entry.1 += i64::from(*steps);
    }
    let length = |c: &str| 1.0 + pooled[c].0 as f64 / pooled[c].1 as f64;
    assert!(length("even") < 1.5 && length("odd") > 3.0, "even {} odd {}", length("even"), length("odd"));
    let tries: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.counted AND a.spec_steps = s.spec_steps AND a.spec_accepted = s.spec_accepted",
    )
    .bind(run)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(tries, 24, "each try keeps its own figures");

    // The same prompts on a server without a draft: no figure, never a zero.
    let plain = sim(fast_sim()).await;
    let (run, endpoint) = generate(&pool, &plain, dataset, by).await;
    assert_eq!(engine::endpoints::get(&pool, endpoint).await.unwrap().draft_acceptance, None);
    let with_figures: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM samples WHERE run_id = $1 AND (spec_steps IS NOT NULL OR acceptance_milli IS NOT NULL)",
    )
    .bind(run)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(with_figures, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_endpoints_page_shows_the_drafts_acceptance_over_the_last_minute(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let dataset = dataset(&pool, 200).await;
    // Slow enough that the run lasts a few seconds: the figure is read while runs use the server.
    let mut config = draft_sim(3, 0.5, 0.5);
    config.time_scale = 2.0;
    config.engine.per_seq_tokens_per_s = 40.0;
    let drafted = sim(config).await;
    let endpoint = endpoint(&pool, &drafted, by).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let (stop, worker) = start_worker(&pool);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let live = loop {
        let summary = engine::endpoints::get(&pool, endpoint).await.unwrap();
        if let Some(live) = summary.draft_acceptance {
            break live;
        }
        assert!(tokio::time::Instant::now() < deadline, "no live figure: {summary:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    engine::runs::control(&pool, run, engine::runs::Control::Cancel).await.unwrap();
    stop.cancel();
    worker.await.unwrap().unwrap();
    // A draft accepting each token with chance 0.5 of 3: 1 + 0.5 + 0.25 + 0.125 = 1.875 a step.
    assert!((live.length - 1.875).abs() < 0.3, "{live:?}");
    assert!(live.seconds > 0.0 && live.seconds <= 61.0, "{live:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_connection_test_tells_whether_a_server_runs_a_draft(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let drafted = sim(draft_sim(3, 0.9, 0.1)).await;
    let plain = sim(fast_sim()).await;
    let mut hidden = fast_sim();
    hidden.no_metrics = true;
    let hidden = sim(hidden).await;
    for (server, expected) in [(&drafted, Some(true)), (&plain, Some(false)), (&hidden, None)] {
        let id = endpoint(&pool, server, by).await;
        let summary = engine::endpoints::get(&pool, id).await.unwrap();
        assert_eq!(summary.runs_draft, expected, "{}", server.base_url());
    }
}

/// A run of `selection` on `endpoint` evaluating `draft` (or a generation run without one).
async fn start(
    pool: &sqlx::PgPool,
    dataset: i64,
    endpoint: i64,
    selection: Selection,
    draft: Option<&str>,
    by: i64,
) -> engine::Result<i64> {
    let mut settings = settings(vec![endpoint]);
    if selection.has_source_modes() {
        settings.thinking = Thinking::AsSource;
    }
    runs::create(
        pool,
        &http_client(),
        runs::NewRun {
            name: draft.map_or("generation".into(), |d| format!("evaluate {d}")),
            dataset_id: dataset,
            selection,
            settings,
            draft: draft.map(|name| DraftRef { name: name.into(), revision: "r1".into() }),
            trained_on: None,
        },
        by,
    )
    .await
}

async fn rows_and_modes(pool: &sqlx::PgPool, run: i64) -> Vec<(i64, Option<bool>)> {
    sqlx::query_as("SELECT row_id, thinking FROM samples WHERE run_id = $1 ORDER BY row_id")
        .bind(run)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_evaluation_sends_an_earlier_runs_prompts_as_they_were_to_a_server_that_reports_acceptance(
    pool: sqlx::PgPool,
) {
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 30).await;
    let plain = sim(fast_sim()).await;
    let plain_endpoint = endpoint(&pool, &plain, by).await;
    let mut mixed = settings(vec![plain_endpoint]);
    mixed.thinking = Thinking::Mix { on_ratio: 0.5 };
    let source = runs::create(
        &pool,
        &http_client(),
        runs::NewRun {
            name: "first".into(),
            dataset_id: dataset,
            selection: Selection::Sample { count: 12, seed: 3 },
            settings: mixed,
            draft: None,
            trained_on: None,
        },
        by,
    )
    .await
    .unwrap();
    run_to_end(&pool, source).await;

    // A server without a draft, and one that does not report each request, are refused with
    // what to do.
    let refused = start(&pool, dataset, plain_endpoint, Selection::Run { run_id: source }, Some("d"), by)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("runs no draft") && refused.contains("--speculative-config"), "{refused}");
    let mut silent = draft_sim(3, 0.9, 0.1);
    silent.draft.per_request_spec_decode_metrics = false;
    let silent = sim(silent).await;
    let silent = endpoint(&pool, &silent, by).await;
    let refused = start(&pool, dataset, silent, Selection::Run { run_id: source }, Some("d"), by)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("--per-request-spec-decode-metrics summary"), "{refused}");
    let other = mixed_dataset(&pool, 4).await;
    let drafted = sim(draft_sim(3, 0.9, 0.1)).await;
    let drafted = endpoint(&pool, &drafted, by).await;
    let refused = start(&pool, other, drafted, Selection::Run { run_id: source }, Some("d"), by)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("choose that dataset"), "{refused}");

    let evaluation = start(&pool, dataset, drafted, Selection::Run { run_id: source }, Some("eagle3-a"), by)
        .await
        .unwrap();
    let recorded: (Option<String>, Option<String>) =
        sqlx::query_as("SELECT draft_name, draft_revision FROM runs WHERE id = $1")
            .bind(evaluation)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(recorded, (Some("eagle3-a".into()), Some("r1".into())));
    let sent = rows_and_modes(&pool, source).await;
    assert_eq!(sent.len(), 12);
    assert!(sent.iter().any(|(_, m)| *m == Some(true)) && sent.iter().any(|(_, m)| *m == Some(false)));
    assert_eq!(rows_and_modes(&pool, evaluation).await, sent, "the same rows, each in its mode");
    let listed = engine::acceptance::evaluations::list(&pool).await.unwrap();
    assert_eq!(listed.iter().map(|e| e.run_id).collect::<Vec<_>>(), [evaluation]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_exports_validation_split_becomes_an_evaluations_prompts(pool: sqlx::PgPool) {
    use domain::export::{Destination, ExportFormat, ExportSelection, ExportSpec, ExportSplit};
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 40).await;
    let plain = sim(fast_sim()).await;
    let (run, _) = generate(&pool, &plain, dataset, by).await;
    let env = export_env::env();
    let spec = ExportSpec {
        selection: ExportSelection { excluded_flags: vec![], ..ExportSelection::for_runs(vec![run]) },
        format: ExportFormat { validation_share: 0.3, ..ExportFormat::default() },
        destination: Destination::Directory { path: "sets".into() },
    };
    let export = engine::export::job::create(&pool, &spec, Some(by), None).await.unwrap();
    engine::export::job::run(&pool, &env.storage, export).await.unwrap();
    let validation: Vec<i64> = sqlx::query_scalar(
        "SELECT s.row_id FROM export_samples e JOIN samples s ON s.id = e.sample_id
         WHERE e.export_id = $1 AND e.split = 'validation' ORDER BY s.row_id",
    )
    .bind(export)
    .fetch_all(&pool)
    .await
    .unwrap();
    let written =
        std::fs::read_to_string(env.root.join(format!("exports/sets/export-{export}/validation.jsonl")))
            .unwrap()
            .lines()
            .count();
    assert!(!validation.is_empty() && validation.len() < 40, "{}", validation.len());
    assert_eq!(validation.len(), written, "the recorded split is the written file");

    let drafted = sim(draft_sim(3, 0.9, 0.1)).await;
    let drafted = endpoint(&pool, &drafted, by).await;
    let split = Selection::Export { export_id: export, split: ExportSplit::Validation };
    let evaluation = start(&pool, dataset, drafted, split.clone(), Some("eagle3-a"), by).await.unwrap();
    let sent: Vec<i64> = rows_and_modes(&pool, evaluation).await.into_iter().map(|(row, _)| row).collect();
    assert_eq!(sent, validation);

    // An export of two datasets' runs cannot feed one run.
    let second = mixed_dataset(&pool, 6).await;
    let (other_run, _) = generate(&pool, &sim(fast_sim()).await, second, by).await;
    let both = ExportSpec {
        // The second dataset repeats the first's questions, and so their answers: keep both.
        selection: ExportSelection {
            excluded_flags: vec![],
            duplicates: domain::export::Duplicates::Keep,
            ..ExportSelection::for_runs(vec![run, other_run])
        },
        format: ExportFormat { validation_share: 0.5, ..ExportFormat::default() },
        destination: Destination::Directory { path: "both".into() },
    };
    let both = engine::export::job::create(&pool, &both, Some(by), None).await.unwrap();
    engine::export::job::run(&pool, &env.storage, both).await.unwrap();
    let refused = start(
        &pool,
        dataset,
        drafted,
        Selection::Export { export_id: both, split: ExportSplit::Validation },
        Some("d"),
        by,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("come from 2 datasets"), "{refused}");
    let refused = start(
        &pool,
        dataset,
        drafted,
        Selection::Export { export_id: 9_999, split: ExportSplit::Validation },
        Some("d"),
        by,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("export 9999 does not exist"), "{refused}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_report_pools_by_verify_steps_and_finds_the_weak_category(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 40).await;
    let drafted = sim(draft_sim(3, 0.9, 0.2)).await;
    let drafted = endpoint(&pool, &drafted, by).await;
    let evaluation = start(&pool, dataset, drafted, Selection::All, Some("eagle3-a"), by).await.unwrap();
    run_to_end(&pool, evaluation).await;

    let report = engine::acceptance::report::run(&pool, evaluation).await.unwrap();
    assert_eq!((report.finished, report.spec_tokens), (40, Some(3)));
    let (accepted, steps, mean_of_means): (i64, i64, f64) = sqlx::query_as(
        "SELECT sum(spec_accepted)::bigint, sum(spec_steps)::bigint, avg(1 + spec_accepted::float8 / spec_steps)
         FROM samples WHERE run_id = $1",
    )
    .bind(evaluation)
    .fetch_one(&pool)
    .await
    .unwrap();
    let overall = report.overall.clone().unwrap();
    assert_eq!((overall.accepted, overall.steps, overall.samples), (accepted as u64, steps as u64, 40));
    assert!((overall.length - (1.0 + accepted as f64 / steps as f64)).abs() < 1e-9);
    // Weak samples are short in steps (few accepted tokens each) but many; the mean of
    // per-sample means weighs them like the strong ones and so disagrees.
    assert!((overall.length - mean_of_means).abs() > 0.05, "{} vs {mean_of_means}", overall.length);
    let interval = overall.interval.unwrap();
    assert!(interval.low < overall.length && overall.length < interval.high);

    let categories = &report.breakdowns.iter().find(|(d, _)| *d == Dimension::Category).unwrap().1;
    let length = |c: &str| categories.iter().find(|g| g.group == c).unwrap().pooled.clone().unwrap().length;
    assert!(length("even") < 2.0 && length("odd") > 3.0, "{categories:?}");
    for (dimension, groups) in &report.breakdowns {
        assert_eq!(groups.iter().map(|g| g.samples).sum::<u64>(), 40, "{dimension:?} covers every sample");
    }
    assert_eq!(report.weakest.len(), 20);
    assert!(report.weakest.iter().all(|s| s.category.as_deref() == Some("even")), "{:?}", report.weakest);
    assert!(report.weakest.windows(2).all(|w| w[0].length <= w[1].length + 1e-3));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn two_drafts_on_the_same_prompts_are_compared_pair_by_pair(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 40).await;
    let strong = sim(draft_sim(3, 0.9, 0.6)).await;
    let strong = endpoint(&pool, &strong, by).await;
    let a = start(&pool, dataset, strong, Selection::All, Some("draft-a"), by).await.unwrap();
    run_to_end(&pool, a).await;
    // Draft B is as good on general prompts and worse on the weak category.
    let weaker = sim(draft_sim(3, 0.9, 0.2)).await;
    let weaker = endpoint(&pool, &weaker, by).await;
    let b = start(&pool, dataset, weaker, Selection::Run { run_id: a }, Some("draft-b"), by).await.unwrap();
    run_to_end(&pool, b).await;

    let c = engine::acceptance::compare::compare(&pool, a, b).await.unwrap();
    assert_eq!((c.shared_prompts, c.mode_mismatches), (40, 0));
    assert_eq!(c.b.draft.as_ref().unwrap().name, "draft-b");
    let overall = c.overall.clone().unwrap();
    assert_eq!(overall.pairs, 40);
    assert!(overall.difference < 0.0, "{overall:?}");
    assert!(overall.interval.unwrap().high < 0.0, "B is measurably weaker: {overall:?}");
    let by_category: std::collections::HashMap<_, _> = c.by_category.iter().cloned().collect();
    let even = by_category["even"].clone().unwrap();
    let odd = by_category["odd"].clone().unwrap();
    assert!(even.difference < -0.5, "{even:?}");
    assert!(odd.difference.abs() < 0.2 && odd.interval.unwrap().contains(0.0), "no difference: {odd:?}");
    assert!(!c.largest_drops.is_empty() && c.largest_drops.len() <= 20);
    assert!(c.largest_drops.iter().all(|d| d.b_length < d.a_length && !d.preview.is_empty()));
    assert!(c
        .largest_drops
        .windows(2)
        .all(|w| w[0].a_length - w[0].b_length >= w[1].a_length - w[1].b_length));

    let unrelated = mixed_dataset(&pool, 4).await;
    let other = start(&pool, unrelated, strong, Selection::All, Some("draft-c"), by).await.unwrap();
    let refused = engine::acceptance::compare::compare(&pool, a, other).await.unwrap_err().to_string();
    assert!(refused.contains("no prompt in common"), "{refused}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_new_run_draws_its_prompts_toward_the_weakest_category_with_the_quotas_shown(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 200).await;
    let drafted = sim(draft_sim(3, 0.9, 0.2)).await;
    let drafted = endpoint(&pool, &drafted, by).await;
    let evaluation = start(&pool, dataset, drafted, Selection::Sample { count: 40, seed: 1 }, Some("d"), by)
        .await
        .unwrap();
    run_to_end(&pool, evaluation).await;

    let quotas = engine::acceptance::quota::weighted(&pool, dataset, evaluation, 60).await.unwrap();
    let quota = |c: &str| quotas.iter().find(|q| q.category.as_deref() == Some(c)).unwrap().quota;
    assert_eq!(quota("even") + quota("odd"), 60);
    assert!(quota("even") > 2 * quota("odd"), "{quotas:?}");

    let plain = sim(fast_sim()).await;
    let plain = endpoint(&pool, &plain, by).await;
    let weighted = Selection::Weighted { evaluation_run_id: evaluation, count: 60, seed: 5 };
    let run = start(&pool, dataset, plain, weighted, None, by).await.unwrap();
    let drawn: Vec<(String, i64)> = sqlx::query_as(
        "SELECT d.category, count(*) FROM samples s JOIN dataset_rows d ON d.id = s.row_id
         WHERE s.run_id = $1 GROUP BY 1 ORDER BY 1",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(drawn, [("even".to_string(), quota("even") as i64), ("odd".to_string(), quota("odd") as i64)]);

    let (generation, _) = generate(&pool, &sim(fast_sim()).await, dataset, by).await;
    let refused = start(
        &pool,
        dataset,
        plain,
        Selection::Weighted { evaluation_run_id: generation, count: 5, seed: 1 },
        None,
        by,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("no acceptance figures"), "{refused}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn review_sorts_and_filters_by_acceptance_and_an_export_takes_each_categorys_weakest(
    pool: sqlx::PgPool,
) {
    use domain::export::{Destination, ExportFormat, ExportSelection, ExportSpec, FileFormat};
    use domain::review::{SampleFilter, SortKey};
    use domain::sample_query::AcceptanceRange;
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 40).await;
    let drafted = sim(draft_sim(3, 0.9, 0.2)).await;
    let drafted = endpoint(&pool, &drafted, by).await;
    let run = start(&pool, dataset, drafted, Selection::All, Some("d"), by).await.unwrap();
    run_to_end(&pool, run).await;
    let lengths: std::collections::HashMap<i64, (String, f64)> = sqlx::query_as::<_, (i64, String, i32, i32)>(
        "SELECT s.id, d.category, s.spec_accepted, s.spec_steps FROM samples s JOIN dataset_rows d ON d.id = s.row_id
         WHERE s.run_id = $1",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(id, category, accepted, steps)| (id, (category, 1.0 + f64::from(accepted) / f64::from(steps))))
    .collect();

    // The list, weakest first, pages by key through every sample in acceptance order.
    let mut filter = SampleFilter { run: Some(run), sort: SortKey::LowestAcceptance, ..Default::default() };
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = engine::review::list::page(&pool, &filter, after.as_deref(), Some(7)).await.unwrap();
        seen.extend(page.rows.iter().map(|r| (r.id, r.acceptance.unwrap())));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 40);
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1 + 5e-4), "{seen:?}");
    for (id, shown) in &seen {
        assert!((lengths[id].1 - shown).abs() < 1e-9);
    }
    assert_eq!(lengths[&seen[0].0].0, "even", "the weakest is a weak-category sample");
    filter.sort = SortKey::HighestAcceptance;
    let top = engine::review::list::page(&pool, &filter, None, Some(1)).await.unwrap();
    assert_eq!(lengths[&top.rows[0].id].0, "odd");

    // A bound keeps the samples inside it; the counts and bulk decisions agree with the list.
    filter.acceptance = AcceptanceRange { min: None, max: Some(2.0) };
    let weak = engine::review::list::page(&pool, &filter, None, Some(100)).await.unwrap();
    let expected = lengths.values().filter(|(_, l)| (l * 1000.0).round() <= 2000.0).count();
    assert_eq!(weak.rows.len(), expected);
    assert!(weak.rows.iter().all(|r| r.acceptance.unwrap() <= 2.0005));
    assert_eq!(engine::review::list::count(&pool, &filter).await.unwrap(), expected as i64);
    assert_eq!(engine::review::bulk::count(&pool, &filter).await.unwrap(), expected as i64);
    filter.acceptance = AcceptanceRange { min: Some(0.5), max: None };
    let refused = engine::review::list::page(&pool, &filter, None, None).await.unwrap_err().to_string();
    assert!(refused.contains("at least 1"), "{refused}");

    // An export of the weakest 25% of each category: ceil(0.25 × 20) = 5 of each, the lowest.
    let env = export_env::env();
    let spec = ExportSpec {
        selection: ExportSelection {
            excluded_flags: vec![],
            weakest: Some(0.25),
            ..ExportSelection::for_runs(vec![run])
        },
        format: ExportFormat::default(),
        destination: Destination::Directory { path: "weak".into() },
    };
    let plan = engine::export::selection::plan(&pool, &spec.selection, 0.0).await.unwrap();
    assert_eq!((plan.preview.selected, plan.preview.acceptance_removed), (10, 30));
    for category in ["even", "odd"] {
        let mut all: Vec<f64> = lengths.values().filter(|(c, _)| c == category).map(|(_, l)| *l).collect();
        all.sort_by(f64::total_cmp);
        let chosen: Vec<f64> = plan
            .samples
            .iter()
            .map(|s| &lengths[&s.id])
            .filter(|(c, _)| c == category)
            .map(|(_, l)| *l)
            .collect();
        assert_eq!(chosen.len(), 5, "{category}");
        assert!(chosen.iter().all(|l| *l <= all[4] + 1e-12), "{category}: {chosen:?} vs {all:?}");
    }
    let pooled = plan.preview.acceptance.clone().unwrap();
    assert_eq!(pooled.samples, 10);
    assert_eq!(plan.preview.acceptance_by_category.len(), 2);

    // Each row carries its sample's acceptance; the manifest the selection's.
    let id = engine::export::job::create(&pool, &spec, Some(by), None).await.unwrap();
    engine::export::job::run(&pool, &env.storage, id).await.unwrap();
    let folder = env.root.join(format!("exports/weak/export-{id}"));
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(folder.join("train.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 10);
    let by_row_key: std::collections::HashMap<String, f64> = sqlx::query_as::<_, (String, i32, i32)>(
        "SELECT $1 || '-' || d.row_key, s.spec_accepted, s.spec_steps FROM samples s JOIN dataset_rows d ON d.id = s.row_id
         WHERE s.run_id = $2",
    )
    .bind(run.to_string())
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(key, accepted, steps)| (key, 1.0 + f64::from(accepted) / f64::from(steps)))
    .collect();
    for row in &rows {
        let shown = row["metadata"]["acceptance_length"].as_f64().unwrap();
        assert!((by_row_key[row["id"].as_str().unwrap()] - shown).abs() < 1e-9, "{row}");
        assert!(row["metadata"]["verify_steps"].as_u64().unwrap() > 0);
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap();
    let in_manifest = manifest["counts"]["selection"]["acceptance"]["length"].as_f64().unwrap();
    assert!((in_manifest - pooled.length).abs() < 1e-12);

    // Parquet rows hold the same figures in two nullable columns.
    let parquet = ExportSpec {
        format: ExportFormat { file: FileFormat::Parquet, ..ExportFormat::default() },
        destination: Destination::Directory { path: "weak-parquet".into() },
        ..spec
    };
    let id = engine::export::job::create(&pool, &parquet, Some(by), None).await.unwrap();
    engine::export::job::run(&pool, &env.storage, id).await.unwrap();
    let file = std::fs::File::open(env.root.join(format!("exports/weak-parquet/export-{id}/train.parquet")))
        .unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut lengths_read = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = batch.column_by_name("acceptance_length").unwrap();
        let column = column.as_any().downcast_ref::<arrow_array::Float64Array>().unwrap();
        lengths_read.extend(column.iter().map(|v| v.unwrap()));
        assert!(batch.column_by_name("verify_steps").is_some());
    }
    assert_eq!(lengths_read.len(), 10);
}

/// An evaluation of `draft@revision`, trained on `trained_on`, of every row of `dataset`, run
/// to the end.
async fn evaluate(
    pool: &sqlx::PgPool,
    dataset: i64,
    endpoint: i64,
    draft: (&str, &str),
    trained_on: Option<i64>,
    by: i64,
) -> engine::Result<i64> {
    let run = runs::create(
        pool,
        &http_client(),
        runs::NewRun {
            name: format!("evaluate {}@{}", draft.0, draft.1),
            dataset_id: dataset,
            selection: Selection::All,
            settings: settings(vec![endpoint]),
            draft: Some(DraftRef { name: draft.0.into(), revision: draft.1.into() }),
            trained_on,
        },
        by,
    )
    .await?;
    run_to_end(pool, run).await;
    Ok(run)
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_loop_reads_each_revision_its_export_and_its_change_from_the_one_before(pool: sqlx::PgPool) {
    use domain::export::{Destination, ExportFormat, ExportSelection, ExportSpec};
    use domain::lineage::NewDraftRevision;
    use engine::acceptance::lineage;
    let by = user(&pool).await;
    let dataset = mixed_dataset(&pool, 40).await;
    let (run, _) = generate(&pool, &sim(fast_sim()).await, dataset, by).await;
    let env = export_env::env();
    let export_of = |categories: Vec<String>, path: &str| ExportSpec {
        selection: ExportSelection {
            excluded_flags: vec![],
            categories,
            ..ExportSelection::for_runs(vec![run])
        },
        format: ExportFormat::default(),
        destination: Destination::Directory { path: path.into() },
    };
    let mut exports = Vec::new();
    for (categories, path) in [(vec![], "everything"), (vec!["even".to_string()], "even")] {
        let export =
            engine::export::job::create(&pool, &export_of(categories, path), Some(by), None).await.unwrap();
        engine::export::job::run(&pool, &env.storage, export).await.unwrap();
        exports.push(export);
    }
    let (everything, even) = (exports[0], exports[1]);

    // The starting draft is weak everywhere; v1, trained on everything, gains on `odd`; v2,
    // trained on the weak category, gains there too.
    let sims = [
        sim(draft_sim(3, 0.5, 0.2)).await,
        sim(draft_sim(3, 0.9, 0.2)).await,
        sim(draft_sim(3, 0.9, 0.8)).await,
    ];
    let mut servers = Vec::new();
    for s in &sims {
        servers.push(endpoint(&pool, s, by).await);
    }
    let start = evaluate(&pool, dataset, servers[0], ("tiny", "start"), None, by).await.unwrap();
    let v1_server = servers[1];
    let v1 = evaluate(&pool, dataset, v1_server, ("tiny", "v1"), Some(everything), by).await.unwrap();
    let v2 = evaluate(&pool, dataset, servers[2], ("tiny", "v2"), Some(even), by).await.unwrap();

    let table = lineage::loop_table(&pool, "tiny", None).await.unwrap();
    assert_eq!((table.dataset_id, table.categories.clone()), (dataset, vec!["even".into(), "odd".into()]));
    let revisions: Vec<&str> = table.steps.iter().map(|s| s.revision.as_str()).collect();
    assert_eq!(revisions, ["start", "v1", "v2"]);
    let [s0, s1, s2] = &table.steps[..] else { panic!("three steps") };
    assert!(s0.trained_on.is_none() && s0.change.is_none());
    assert_eq!(s0.evaluation.as_ref().unwrap().run_id, start);
    let trained = s1.trained_on.as_ref().unwrap();
    assert_eq!((trained.export_id, trained.train_rows), (everything, Some(40)));
    assert!(trained.selection.starts_with(&format!("run {run} · ok")), "{}", trained.selection);
    assert!(s2.trained_on.as_ref().unwrap().selection.contains("categories even"));
    assert_eq!((s1.evaluation.as_ref().unwrap().run_id, s2.evaluation.as_ref().unwrap().run_id), (v1, v2));
    // Each change is paired on the 40 prompts both sent; a category moves where its draft did.
    let up = |f: &Option<domain::acceptance::PairedFigure>| f.as_ref().unwrap().interval.unwrap().low > 0.0;
    let unclear =
        |f: &Option<domain::acceptance::PairedFigure>| f.as_ref().unwrap().interval.unwrap().contains(0.0);
    let (c1, c2) = (s1.change.as_ref().unwrap(), s2.change.as_ref().unwrap());
    assert_eq!(
        (c1.from_revision.as_str(), c1.shared_prompts, c2.from_revision.as_str()),
        ("start", 40, "v1")
    );
    assert!(up(&c1.overall) && unclear(&c1.by_category[0]) && up(&c1.by_category[1]), "{c1:?}");
    assert!(up(&c2.overall) && up(&c2.by_category[0]) && unclear(&c2.by_category[1]), "{c2:?}");
    let v2_even = s2.evaluation.as_ref().unwrap().by_category[0].as_ref().unwrap().length;
    assert!(v2_even > 2.5, "a chance of 0.8 at K = 3 accepts about 2.95: {v2_even}");

    // The export lists the drafts trained on it, with their evaluations.
    let listed = lineage::trained_on_export(&pool, even).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].draft.describe(), "tiny@v2");
    assert_eq!(listed[0].evaluations.iter().map(|e| e.run_id).collect::<Vec<_>>(), [v2]);
    assert!(
        (listed[0].evaluations[0].overall.as_ref().unwrap().length
            - s2.evaluation.as_ref().unwrap().overall.as_ref().unwrap().length)
            .abs()
            < 1e-9
    );
    let mut items = engine::export::store::items(&pool, 10).await.unwrap();
    engine::export::store::with_trained(&pool, &mut items).await.unwrap();
    let item = items.iter().find(|e| e.id == everything).unwrap();
    assert_eq!(item.trained.iter().map(|d| d.draft.describe()).collect::<Vec<_>>(), ["tiny@v1"]);

    // A revision is trained on one export: evaluating it again with it is fine, with another
    // refused, and an export a draft was trained on cannot be deleted.
    evaluate(&pool, dataset, v1_server, ("tiny", "v1"), Some(everything), by).await.unwrap();
    let refused =
        evaluate(&pool, dataset, v1_server, ("tiny", "v1"), Some(even), by).await.unwrap_err().to_string();
    assert!(refused.contains(&format!("recorded as trained on export {everything}")), "{refused}");
    let mut conn = pool.acquire().await.unwrap();
    let again = NewDraftRevision { name: "tiny".into(), revision: "v3".into(), trained_on: Some(9_999) };
    let refused = lineage::register(&mut conn, &again, Some(by)).await.unwrap_err().to_string();
    assert!(refused.contains("export 9999 does not exist"), "{refused}");
    let named = NewDraftRevision { name: "a@b".into(), revision: String::new(), trained_on: None };
    assert!(lineage::register(&mut conn, &named, Some(by)).await.is_err());
    let deleted = sqlx::query("DELETE FROM exports WHERE id = $1").bind(even).execute(&pool).await;
    assert!(deleted.is_err(), "the lineage keeps the export");

    // A draft nobody evaluated says what to do.
    let refused = lineage::loop_table(&pool, "never", None).await.unwrap_err().to_string();
    assert!(refused.contains("no completed evaluation"), "{refused}");
}
