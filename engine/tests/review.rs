//! Review: decisions with version checks, undo, the audit log, queue leases, the filtered list
//! with keyset paging and counts, bulk actions, automatic flags and regeneration.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::{
    generation::{RunSettings, SampleState},
    review::{Decision, ReviewEventKind, ReviewState, SampleFilter, SortKey, TokenRange},
    Role, Viewer,
};
use engine::review::counts::{self, Counting};
use engine::review::{self, bulk, detail, list, queue, regenerate, DecisionInput};
use engine::testing::*;
use engine::Error;
use std::{collections::HashSet, time::Duration};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

async fn person(pool: &sqlx::PgPool, name: &str, role: Role) -> Viewer {
    let user = engine::auth::create_user(
        pool,
        engine::auth::NewUser { username: name, password: "a-long-password", role },
    )
    .await
    .unwrap();
    Viewer { id: user.id, username: user.username, role }
}

/// What one seeded sample looks like.
struct Spec {
    state: SampleState,
    finish_reason: Option<&'static str>,
    reasoning: &'static str,
    content: &'static str,
    completion_tokens: i32,
}

fn ok(content: &'static str, tokens: i32) -> Spec {
    Spec {
        state: SampleState::Ok,
        finish_reason: Some("stop"),
        reasoning: "thinking it over",
        content,
        completion_tokens: tokens,
    }
}

/// A sample cut at `max_tokens` mid-answer.
fn cut_at_max_tokens() -> Spec {
    Spec {
        state: SampleState::Truncated,
        finish_reason: Some("length"),
        reasoning: "thinking and thinking",
        content: "half an ans",
        completion_tokens: 256,
    }
}

/// A sample in `state` that holds no text: running, or failed before any arrived.
fn without_text(state: SampleState) -> Spec {
    Spec { state, finish_reason: None, reasoning: "", content: "", completion_tokens: 0 }
}

/// A run with one sample per spec, written straight to the tables (no generation needed).
async fn seeded_run(pool: &sqlx::PgPool, specs: &[Spec]) -> (i64, Vec<i64>) {
    let questions: Vec<String> = (0..specs.len()).map(|i| format!("Question number {i}?")).collect();
    let dataset = dataset_of(pool, &questions).await;
    let settings = RunSettings::with_defaults(MODEL, vec![], 256);
    let run: i64 = sqlx::query_scalar(
        "INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count)
         VALUES ('seeded', $1, 'completed', $2, '{\"mode\":\"all\"}', $3) RETURNING id",
    )
    .bind(dataset)
    .bind(serde_json::to_value(&settings).unwrap())
    .bind(specs.len() as i32)
    .fetch_one(pool)
    .await
    .unwrap();
    let rows: Vec<i64> = sqlx::query_scalar("SELECT id FROM dataset_rows WHERE dataset_id = $1 ORDER BY id")
        .bind(dataset)
        .fetch_all(pool)
        .await
        .unwrap();
    let mut ids = Vec::new();
    for (spec, row) in specs.iter().zip(rows) {
        let terminal = spec.state.is_terminal();
        let auto: Vec<String> =
            review::auto_flags(spec.state, Some(spec.reasoning), Some(spec.content), false)
                .into_iter()
                .map(String::from)
                .collect();
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO samples (run_id, row_id, state, finish_reason, reasoning, content, messages, prompt_tokens,
                                  completion_tokens, reasoning_tokens, duration_ms, finished_at, auto_flags, lease_owner,
                                  lease_expires_at)
             SELECT $1, $2, $3, $4, $5, $6,
                    messages - (jsonb_array_length(messages) - 1) || jsonb_build_array(jsonb_build_object(
                        'role', 'assistant', 'content', $6::text, 'reasoning_content', $5::text)),
                    12, $7, NULLIF(length($5::text) / 4, 0), $7 * 10, CASE WHEN $8 THEN now() END, $9,
                    CASE WHEN $3 = 'running'::sample_state THEN gen_random_uuid() END,
                    CASE WHEN $3 = 'running'::sample_state THEN now() + interval '1 minute' END
             FROM dataset_rows WHERE id = $2 RETURNING id",
        )
        .bind(run)
        .bind(row)
        .bind(spec.state)
        .bind(spec.finish_reason)
        .bind(spec.reasoning)
        .bind(spec.content)
        .bind(spec.completion_tokens)
        .bind(terminal)
        .bind(&auto)
        .fetch_one(pool)
        .await
        .unwrap();
        ids.push(id);
    }
    (run, ids)
}

async fn version(pool: &sqlx::PgPool, id: i64) -> i32 {
    sqlx::query_scalar("SELECT review_version FROM samples WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn decision(sample_id: i64, version: i32, decision: Decision) -> DecisionInput {
    DecisionInput { sample_id, version, decision, flags: vec![], note: None }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_decision_is_logged_and_a_stale_save_is_refused(pool: sqlx::PgPool) {
    let (_, ids) = seeded_run(&pool, &[ok("Four.", 10)]).await;
    let ann = person(&pool, "ann", Role::Reviewer).await;
    let bob = person(&pool, "bob", Role::Reviewer).await;
    let id = ids[0];

    let v1 = review::decide(
        &pool,
        &ann,
        DecisionInput { note: Some("  clear and correct ".into()), ..decision(id, 0, Decision::Approve) },
    )
    .await
    .unwrap();
    assert_eq!(v1, 1);

    // Bob opened the sample before Ann saved: his save is refused and says why.
    let stale = review::decide(&pool, &bob, decision(id, 0, Decision::Reject)).await.unwrap_err();
    match stale {
        Error::Conflict(message) => {
            assert!(message.contains("changed since you opened it"), "{message}");
            assert!(message.contains("ann changed it to approved"), "{message}");
            assert!(message.contains("Nothing was saved"), "{message}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let sample = detail::load(&pool, &bob, id).await.unwrap();
    assert_eq!(sample.review_state, ReviewState::Approved);
    assert_eq!(sample.reviewer.as_deref(), Some("ann"));
    assert_eq!(sample.note.as_deref(), Some("clear and correct"));

    // With the current version his decision goes through; the log has both, newest first.
    review::decide(
        &pool,
        &bob,
        DecisionInput { flags: vec!["factual_error".into()], ..decision(id, 1, Decision::Flag) },
    )
    .await
    .unwrap();
    let events = detail::events(&pool, id).await.unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].actor.as_deref(), Some("bob"));
    assert_eq!((events[0].from_state, events[0].to_state), (ReviewState::Approved, ReviewState::Flagged));
    assert_eq!(events[0].to_flags, vec!["factual_error".to_string()]);
    assert_eq!(events[1].actor.as_deref(), Some("ann"));
    assert_eq!((events[1].from_state, events[1].to_state), (ReviewState::Unreviewed, ReviewState::Approved));
    assert_eq!(events[1].note.as_deref(), Some("clear and correct"));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn flags_need_known_reasons_and_unfinished_samples_cannot_be_judged(pool: sqlx::PgPool) {
    let (_, ids) = seeded_run(&pool, &[ok("Fine.", 3), without_text(SampleState::Running)]).await;
    let ann = person(&pool, "ann", Role::Reviewer).await;
    let no_reason = review::decide(&pool, &ann, decision(ids[0], 0, Decision::Flag)).await.unwrap_err();
    assert!(no_reason.to_string().contains("at least one reason"), "{no_reason}");
    let unknown = review::decide(
        &pool,
        &ann,
        DecisionInput { flags: vec!["boring".into()], ..decision(ids[0], 0, Decision::Flag) },
    )
    .await
    .unwrap_err();
    assert!(unknown.to_string().contains("\"boring\" is not a flag reason"), "{unknown}");
    assert!(unknown.to_string().contains("wrong_language"), "{unknown}");
    // Automatic-only reasons are not offered to reviewers.
    let automatic = review::decide(
        &pool,
        &ann,
        DecisionInput { flags: vec!["think_markers".into()], ..decision(ids[0], 0, Decision::Flag) },
    )
    .await
    .unwrap_err();
    assert!(automatic.to_string().contains("not a flag reason"), "{automatic}");
    let running = review::decide(&pool, &ann, decision(ids[1], 0, Decision::Approve)).await.unwrap_err();
    assert!(running.to_string().contains("still running"), "{running}");
    let long_note = review::decide(
        &pool,
        &ann,
        DecisionInput { note: Some("x".repeat(5000)), ..decision(ids[0], 0, Decision::Approve) },
    )
    .await
    .unwrap_err();
    assert!(long_note.to_string().contains("note is too long"), "{long_note}");
    assert_eq!(version(&pool, ids[0]).await, 0, "nothing was saved");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn undo_restores_the_previous_decision_exactly(pool: sqlx::PgPool) {
    let (_, ids) = seeded_run(&pool, &[ok("Yes.", 2)]).await;
    let id = ids[0];
    let ann = person(&pool, "ann", Role::Reviewer).await;
    let bob = person(&pool, "bob", Role::Reviewer).await;
    let eve = person(&pool, "eve", Role::Engineer).await;

    review::decide(
        &pool,
        &ann,
        DecisionInput { note: Some("ok".into()), ..decision(id, 0, Decision::Approve) },
    )
    .await
    .unwrap();
    review::decide(
        &pool,
        &ann,
        DecisionInput { flags: vec!["formatting".into()], ..decision(id, 1, Decision::Reject) },
    )
    .await
    .unwrap();
    assert!(detail::load(&pool, &ann, id).await.unwrap().can_undo);
    // Bob may not undo Ann's decision.
    assert!(!detail::load(&pool, &bob, id).await.unwrap().can_undo);
    let refused = review::undo(&pool, &bob, id, 2).await.unwrap_err();
    assert!(refused.to_string().contains("another reviewer's"), "{refused}");
    // A stale undo is refused like a stale decision.
    assert!(matches!(review::undo(&pool, &ann, id, 1).await, Err(Error::Conflict(_))));

    let v = review::undo(&pool, &ann, id, 2).await.unwrap();
    let sample = detail::load(&pool, &ann, id).await.unwrap();
    assert_eq!(sample.review_state, ReviewState::Approved);
    assert_eq!(sample.flags, Vec::<String>::new());
    assert_eq!(sample.note.as_deref(), Some("ok"));
    assert_eq!(sample.reviewer.as_deref(), Some("ann"));
    assert_eq!(sample.review_version, v);
    assert_eq!(sample.events[0].kind, ReviewEventKind::Undo);
    assert!(sample.events[1].undone);
    // Undo does not stack on itself: after an undo, there is no decision to undo.
    let again = review::undo(&pool, &ann, id, v).await.unwrap_err();
    assert!(again.to_string().contains("no decision to undo"), "{again}");

    // An engineer may undo anyone's decision, back to unreviewed.
    let v = review::decide(&pool, &bob, decision(id, v, Decision::Reject)).await.unwrap();
    review::undo(&pool, &eve, id, v).await.unwrap();
    let v = version(&pool, id).await;
    review::undo(&pool, &eve, id, v).await.unwrap_err();
    let sample = detail::load(&pool, &eve, id).await.unwrap();
    assert_eq!(sample.review_state, ReviewState::Approved, "back to Ann's approval");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn two_reviewers_never_get_the_same_sample_in_queue_mode(pool: sqlx::PgPool) {
    let specs: Vec<Spec> = (0..40).map(|_| ok("An answer.", 5)).collect();
    let (run, _) = seeded_run(&pool, &specs).await;
    let reviewers: Vec<Viewer> = {
        let mut v = Vec::new();
        for i in 0..8 {
            v.push(person(&pool, &format!("r{i}"), Role::Reviewer).await);
        }
        v
    };
    // Eight reviewers work the queue at once until it is empty.
    let mut tasks = Vec::new();
    for r in reviewers.clone() {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(id) = queue::next(&pool, r.id, Some(run)).await.unwrap() {
                got.push(id);
                let v = version(&pool, id).await;
                review::decide(&pool, &r, decision(id, v, Decision::Approve)).await.unwrap();
            }
            got
        }));
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    for t in tasks {
        for id in t.await.unwrap() {
            total += 1;
            assert!(seen.insert(id), "sample {id} was handed to two reviewers");
        }
    }
    assert_eq!(total, 40);
    let progress = queue::progress(&pool, reviewers[0].id, Some(run)).await.unwrap();
    assert_eq!(progress.remaining, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_queue_lease_is_kept_renewed_and_freed(pool: sqlx::PgPool) {
    let (run, ids) = seeded_run(&pool, &[ok("a", 1), ok("b", 1), ok("c", 1)]).await;
    let ann = person(&pool, "ann", Role::Reviewer).await;
    let bob = person(&pool, "bob", Role::Reviewer).await;

    let first = queue::next(&pool, ann.id, Some(run)).await.unwrap().unwrap();
    assert_eq!(first, ids[0]);
    // Asking again (a page reload) returns the sample she holds.
    assert_eq!(queue::next(&pool, ann.id, Some(run)).await.unwrap(), Some(first));
    let for_bob = queue::next(&pool, bob.id, Some(run)).await.unwrap().unwrap();
    assert_ne!(for_bob, first);
    assert!(queue::renew(&pool, ann.id, first).await.unwrap());
    assert!(!queue::renew(&pool, bob.id, first).await.unwrap(), "bob holds no lease on it");

    // While Ann holds it, Bob's decision from the list is refused.
    let held = review::decide(&pool, &bob, decision(first, 0, Decision::Reject)).await.unwrap_err();
    assert!(held.to_string().contains("ann is reviewing this sample"), "{held}");
    let page = detail::load(&pool, &bob, first).await.unwrap();
    assert_eq!(page.leased_by_other.as_deref(), Some("ann"));

    let progress = queue::progress(&pool, bob.id, Some(run)).await.unwrap();
    assert_eq!((progress.remaining, progress.held_by_others), (3, 1));

    // An expired lease goes back to the queue.
    sqlx::query("UPDATE samples SET review_lease_expires = now() - interval '1 second' WHERE id = $1")
        .bind(first)
        .execute(&pool)
        .await
        .unwrap();
    assert!(!queue::renew(&pool, ann.id, first).await.unwrap());
    let carl = person(&pool, "carl", Role::Reviewer).await;
    assert_eq!(queue::next(&pool, carl.id, Some(run)).await.unwrap(), Some(first));
    // A released sample is free at once.
    assert!(queue::release(&pool, carl.id, first).await.unwrap());
    assert_eq!(queue::next(&pool, ann.id, Some(run)).await.unwrap(), Some(first));
    // A decision frees the lease and counts as progress.
    review::decide(&pool, &ann, decision(first, 0, Decision::Approve)).await.unwrap();
    let progress = queue::progress(&pool, ann.id, Some(run)).await.unwrap();
    assert_eq!((progress.mine_today, progress.mine_total, progress.remaining), (1, 1, 2));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_list_filters_searches_counts_and_pages_by_key(pool: sqlx::PgPool) {
    let mut specs: Vec<Spec> = (0..25)
        .map(|i| {
            ok(if i % 5 == 0 { "The mitochondria is the powerhouse." } else { "Plain answer." }, 100 + i)
        })
        .collect();
    specs.push(Spec {
        state: SampleState::Truncated,
        finish_reason: Some("length"),
        reasoning: "a long chain of thought",
        content: "",
        completion_tokens: 256,
    });
    specs.push(without_text(SampleState::Failed));
    let (run, ids) = seeded_run(&pool, &specs).await;
    let ann = person(&pool, "ann", Role::Reviewer).await;
    review::decide(&pool, &ann, decision(ids[0], 0, Decision::Approve)).await.unwrap();

    // Keyset paging visits every sample once, in order, for every sort.
    for sort in SortKey::ALL {
        let filter = SampleFilter { run: Some(run), sort, ..Default::default() };
        let mut after: Option<String> = None;
        let mut seen = Vec::new();
        loop {
            let page = list::page(&pool, &filter, after.as_deref(), Some(4)).await.unwrap();
            assert!(page.rows.len() <= 4);
            let value = |r: &domain::review::SampleRow| match sort {
                SortKey::LongestReasoning => r.reasoning_tokens,
                _ => r.completion_tokens,
            };
            seen.extend(page.rows.iter().map(|r| (value(r), r.id)));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen.len(), 27, "{sort:?}");
        let unique: HashSet<i64> = seen.iter().map(|(_, id)| *id).collect();
        assert_eq!(unique.len(), 27, "{sort:?} repeats a sample");
        if sort == SortKey::LongestCompletion {
            assert_eq!(seen[0].0, Some(256));
            assert!(seen.windows(2).all(|w| w[0].0 >= w[1].0));
        }
        if sort == SortKey::LongestReasoning {
            assert!(seen[0].0 > Some(0), "{seen:?}");
            assert!(seen.windows(2).all(|w| w[0].0 >= w[1].0), "{seen:?}");
        }
    }

    let count = |filter: SampleFilter| {
        let pool = pool.clone();
        async move { list::count(&pool, &filter).await.unwrap() }
    };
    let base = SampleFilter { run: Some(run), ..Default::default() };
    assert_eq!(count(SampleFilter { q: Some("mitochondria".into()), ..base.clone() }).await, 5);
    assert_eq!(count(SampleFilter { q: Some("\"powerhouse\" -plain".into()), ..base.clone() }).await, 5);
    assert_eq!(
        count(SampleFilter { q: Some("chain thought".into()), ..base.clone() }).await,
        1,
        "reasoning is searched"
    );
    assert_eq!(
        count(SampleFilter { q: Some("\"Question number 7\"".into()), ..base.clone() }).await,
        1,
        "the prompt is searched"
    );
    // The conversation ends with the answer: it is indexed once, not again from its column.
    let positions: Vec<i16> = sqlx::query_scalar(
        "SELECT cardinality(t.positions)::smallint FROM sample_search x, unnest(x.search) t
         WHERE x.sample_id = $1 AND t.lexeme = 'mitochondria'",
    )
    .bind(ids[0])
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(positions, [1], "the answer's words are indexed once");
    // A failed try keeps no conversation, only what had arrived: that is searched instead.
    sqlx::query("UPDATE samples SET messages = NULL, reasoning = 'cut off midway' WHERE id = $1")
        .bind(ids[26])
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        count(SampleFilter { q: Some("midway".into()), ..base.clone() }).await,
        1,
        "a failed try's partial reasoning is searched"
    );
    // A conversation whose vector would pass PostgreSQL's 1 MB tsvector limit (120,000 distinct
    // words of prompt) is still stored, and searched by its answer.
    sqlx::query(
        "UPDATE samples SET content = 'an aardvark answer', messages = jsonb_build_array(
             jsonb_build_object('role', 'user', 'content',
                 (SELECT string_agg('w' || g, ' ') FROM generate_series(1, 120000) g)),
             jsonb_build_object('role', 'assistant', 'content', 'an aardvark answer'))
         WHERE id = $1",
    )
    .bind(ids[1])
    .execute(&pool)
    .await
    .expect("a long conversation is stored");
    assert_eq!(
        count(SampleFilter { q: Some("aardvark".into()), ..base.clone() }).await,
        1,
        "a long conversation is searched by its answer"
    );
    assert_eq!(count(SampleFilter { outcome: Some(SampleState::Truncated), ..base.clone() }).await, 1);
    assert_eq!(count(SampleFilter { finish_reason: Some("-".into()), ..base.clone() }).await, 1);
    assert_eq!(count(SampleFilter { flag: Some("reasoning_only".into()), ..base.clone() }).await, 1);
    assert_eq!(count(SampleFilter { flag: Some("empty_answer".into()), ..base.clone() }).await, 2);
    assert_eq!(count(SampleFilter { review: Some(ReviewState::Approved), ..base.clone() }).await, 1);
    assert_eq!(count(SampleFilter { reviewer: Some(ann.id), ..base.clone() }).await, 1);
    assert_eq!(count(SampleFilter { category: Some("even".into()), ..base.clone() }).await, 14);
    let range = TokenRange { min: Some(110), max: Some(119) };
    assert_eq!(count(SampleFilter { completion_tokens: range, ..base.clone() }).await, 10);

    let facets = counts::count(
        &pool,
        &SampleFilter { outcome: Some(SampleState::Ok), ..base.clone() },
        Counting::Exact,
    )
    .await
    .unwrap();
    assert_eq!(facets.total, 25);
    // A dimension's counts ignore its own filter, so the other outcomes stay visible.
    let outcome: Vec<(String, i64)> = facets.outcome.iter().map(|f| (f.value.clone(), f.count)).collect();
    assert_eq!(outcome, vec![("ok".into(), 25), ("failed".into(), 1), ("truncated".into(), 1)]);
    let review_counts: Vec<(String, i64)> =
        facets.review.iter().map(|f| (f.value.clone(), f.count)).collect();
    assert_eq!(review_counts, vec![("unreviewed".into(), 24), ("approved".into(), 1)]);
    assert_eq!(facets.reviewer[0].label, "ann");
    assert_eq!(facets.run[0].count, 25);
    let cat: Vec<(String, i64)> = facets.category.iter().map(|f| (f.value.clone(), f.count)).collect();
    assert_eq!(cat, vec![("even".into(), 13), ("odd".into(), 12)]);
    let all = counts::count(&pool, &base, Counting::Exact).await.unwrap();
    let empty = all.flag.iter().find(|f| f.value == "empty_answer").unwrap();
    assert_eq!((empty.label.as_str(), empty.count), ("empty answer", 2));

    // j/k neighbours follow the list order.
    let oldest = SampleFilter { run: Some(run), ..Default::default() };
    assert_eq!(list::neighbour(&pool, &oldest, ids[3], true).await.unwrap(), Some(ids[4]));
    assert_eq!(list::neighbour(&pool, &oldest, ids[3], false).await.unwrap(), Some(ids[2]));
    assert_eq!(list::neighbour(&pool, &oldest, ids[0], false).await.unwrap(), None);

    let bad = list::page(&pool, &base, Some("garbage"), None).await.unwrap_err();
    assert!(bad.to_string().contains("page link is damaged"), "{bad}");
    let empty_range = SampleFilter { prompt_tokens: TokenRange { min: Some(9), max: Some(2) }, ..base };
    let bad = list::page(&pool, &empty_range, None, None).await.unwrap_err();
    assert!(bad.to_string().contains("prompt token range is empty"), "{bad}");
}

/// What the samples of `run` hold along one facet, counted from the samples themselves with
/// `cond` applied: (value, count), most first, as the counts panel lists them.
async fn counted(pool: &sqlx::PgPool, run: i64, value: &str, cond: &str) -> Vec<(String, i64)> {
    sqlx::query_as(&format!(
        "SELECT {value} AS v, count(*) FROM samples s JOIN dataset_rows d ON d.id = s.row_id
         LEFT JOIN LATERAL unnest(ARRAY(SELECT DISTINCT x FROM unnest(s.flags || s.auto_flags) x)) AS f(code) ON true
         WHERE s.run_id = $1 AND {cond} AND {value} IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1"
    ))
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The counts panel of `filter` (one run, maybe one review state) against the samples.
async fn assert_counts_true(pool: &sqlx::PgPool, filter: &SampleFilter, step: &str) {
    let run = filter.run.unwrap();
    let review = filter.review.map_or("true".to_string(), |r| format!("s.review_state = '{}'", r.as_str()));
    let facets = counts::count(pool, filter, Counting::Exact).await.unwrap();
    let pairs = |values: &[domain::review::FacetValue]| -> Vec<(String, i64)> {
        values.iter().map(|f| (f.value.clone(), f.count)).collect()
    };
    // Each sample once (its first flag's row, or its only row when it has none), except in
    // the flag facet, where a sample counts under each of its flags.
    let one = |cond: &str| {
        format!(
            "{cond} AND f.code IS NOT DISTINCT FROM (SELECT min(y) FROM unnest(s.flags || s.auto_flags) y)"
        )
    };
    let total = counted(pool, run, "'all'", &one(&review)).await;
    assert_eq!(facets.total, total.first().map_or(0, |t| t.1), "{step}: total");
    let dimensions = [
        ("outcome", &facets.outcome, "s.state::text", one(&review)),
        ("finish reason", &facets.finish_reason, "COALESCE(s.finish_reason, '-')", one(&review)),
        ("flags", &facets.flag, "f.code", review.clone()),
        ("review", &facets.review, "s.review_state::text", one("true")),
        ("reviewer", &facets.reviewer, "s.reviewed_by::text", one(&review)),
        ("category", &facets.category, "COALESCE(d.category, '-')", one(&review)),
    ];
    for (name, values, value, cond) in dimensions {
        assert_eq!(pairs(values), counted(pool, run, value, &cond).await, "{step}: {name}");
    }
}

/// The counts panel reads the tally kept by triggers (migration 0018); whatever moves a sample
/// (a decision, a bulk decision, an undo, a requeue, a settle, a delete) moves its counts, and
/// folding the tally changes no count.
#[sqlx::test(migrator = "MIGRATOR")]
async fn the_counts_follow_every_change_of_a_sample(pool: sqlx::PgPool) {
    let mut specs: Vec<Spec> = (0..6).map(|_| ok("Fine.", 10)).collect();
    specs.push(ok("", 10)); // flagged empty_answer by the engine
    for _ in 0..3 {
        specs.push(cut_at_max_tokens());
    }
    specs.push(without_text(SampleState::Failed));
    specs.push(without_text(SampleState::Running));
    let (run, ids) = seeded_run(&pool, &specs).await;
    let (other_run, _) = seeded_run(&pool, &[ok("Elsewhere.", 5), ok("Also elsewhere.", 5)]).await;
    let all = SampleFilter { run: Some(run), ..Default::default() };
    let rejected = SampleFilter { review: Some(ReviewState::Rejected), ..all.clone() };
    assert_counts_true(&pool, &all, "seeded").await;

    let ann = person(&pool, "ann", Role::Reviewer).await;
    let eve = person(&pool, "eve", Role::Engineer).await;
    review::decide(&pool, &ann, decision(ids[0], 0, Decision::Approve)).await.unwrap();
    review::decide(
        &pool,
        &ann,
        DecisionInput { flags: vec!["factual_error".into()], ..decision(ids[1], 0, Decision::Reject) },
    )
    .await
    .unwrap();
    assert_counts_true(&pool, &all, "two decisions").await;
    assert_counts_true(&pool, &rejected, "two decisions, rejected only").await;

    let truncated = SampleFilter { flag: Some("truncated".into()), ..all.clone() };
    let input = bulk::BulkInput {
        filter: truncated,
        decision: Decision::Reject,
        flags: vec!["truncated".into()],
        note: None,
        expected: 3,
    };
    assert_eq!(bulk::apply(&pool, &eve, input).await.unwrap(), 3);
    assert_counts_true(&pool, &rejected, "a bulk rejection").await;
    review::undo(&pool, &eve, ids[7], version(&pool, ids[7]).await).await.unwrap();
    assert_counts_true(&pool, &rejected, "an undo").await;

    regenerate::regenerate(&pool, &eve, ids[1], version(&pool, ids[1]).await).await.unwrap();
    assert_counts_true(&pool, &all, "a regeneration").await;
    // A settle, a lease renewal and a text change, as the engine writes them.
    sqlx::query(
        "UPDATE samples SET state = 'ok', finish_reason = 'stop', finished_at = now(), lease_owner = NULL,
                lease_expires_at = NULL WHERE id = $1",
    )
    .bind(ids[11])
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE samples SET content = 'Fine, truly.' WHERE run_id = $1")
        .bind(run)
        .execute(&pool)
        .await
        .unwrap();
    assert_counts_true(&pool, &all, "a settle and a text change").await;

    let rows_before: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sample_tally").fetch_one(&pool).await.unwrap();
    let folded = engine::samples::tally::fold(&pool, 0).await.unwrap();
    assert_eq!(folded.rows, rows_before);
    let (rows, keys): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT (run_id, state, finish_reason, review_state, reviewed_by, category, flags))
         FROM sample_tally",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((rows, keys), (folded.keys, folded.keys), "one row per key after a fold");
    assert!(rows < rows_before, "a fold leaves fewer rows: {rows} of {rows_before}");
    assert_counts_true(&pool, &all, "a fold").await;
    assert_counts_true(&pool, &rejected, "a fold, rejected only").await;
    let again = engine::samples::tally::fold(&pool, rows).await.unwrap();
    assert_eq!(again, engine::samples::tally::Folded::default(), "few rows are left alone");

    // A deleted run takes its counts with it; the other run's stay.
    sqlx::query("DELETE FROM runs WHERE id = $1").bind(run).execute(&pool).await.unwrap();
    assert_eq!(counts::count(&pool, &all, Counting::Exact).await.unwrap().total, 0);
    engine::samples::tally::fold(&pool, 0).await.unwrap();
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT DISTINCT run_id FROM sample_tally").fetch_all(&pool).await.unwrap();
    assert_eq!(left, vec![other_run]);
    assert_counts_true(&pool, &SampleFilter { run: Some(other_run), ..Default::default() }, "the other run")
        .await;

    // A filter the tally does not keep (a length range) is counted from the samples.
    let ranged = SampleFilter {
        run: Some(other_run),
        completion_tokens: TokenRange { min: Some(5), max: Some(5) },
        ..Default::default()
    };
    let ranged_counts = counts::count(&pool, &ranged, Counting::Exact).await.unwrap();
    assert_eq!(ranged_counts.total, 2);
    let pairs = |values: &[domain::review::FacetValue]| -> Vec<(String, i64)> {
        values.iter().map(|f| (f.value.clone(), f.count)).collect()
    };
    assert_eq!(pairs(&ranged_counts.outcome), vec![("ok".to_string(), 2)]);
    assert_eq!(pairs(&ranged_counts.review), vec![("unreviewed".to_string(), 2)]);
    let none_in_range = SampleFilter { completion_tokens: TokenRange { min: Some(6), max: None }, ..ranged };
    assert_eq!(
        counts::count(&pool, &none_in_range, Counting::Exact).await.unwrap(),
        domain::review::Facets::default()
    );
}

/// Counts that need a pass over the samples (a text search) are exact while the pass is quick;
/// past the bound they are scaled up from a sample of the table's pages, and say so.
#[sqlx::test(migrator = "MIGRATOR")]
async fn counts_past_the_time_bound_are_estimates_that_say_so(pool: sqlx::PgPool) {
    use domain::review::Counted;
    // Every other sample has the word; every fifth was cut at max_tokens.
    let specs: Vec<Spec> = (0..800)
        .map(|i| Spec {
            content: if i % 2 == 0 { "a zebra answer" } else { "a plain answer" },
            ..if i % 5 == 0 { cut_at_max_tokens() } else { ok("", 10) }
        })
        .collect();
    seeded_run(&pool, &specs).await;
    let zebra = SampleFilter { q: Some("zebra".into()), ..Default::default() };
    let exact = counts::count(&pool, &zebra, Counting::Exact).await.unwrap();
    assert_eq!((exact.counted, exact.total), (Counted::Exact, 400));
    assert_eq!(counts::count(&pool, &zebra, Counting::PANEL).await.unwrap(), exact, "a quick pass is exact");
    let whole_table = Counting::Bounded { exact_within: Duration::ZERO, sample_rows: 10_000 };
    assert_eq!(
        counts::count(&pool, &zebra, whole_table).await.unwrap(),
        exact,
        "a sample of everything is exact"
    );

    // About a quarter of the pages.
    let quarter = Counting::Bounded { exact_within: Duration::ZERO, sample_rows: 200 };
    let estimate = counts::count(&pool, &zebra, quarter).await.unwrap();
    let Counted::Estimated { sampled, of } = estimate.counted else {
        panic!("a sample of a quarter is an estimate: {:?}", estimate.counted)
    };
    assert_eq!(of, 800);
    assert!(sampled > 0 && sampled < 800, "sampled {sampled} of 800");
    assert!((estimate.total - 400).abs() <= 60, "the estimate {} is near 400", estimate.total);
    let sum = |values: &[domain::review::FacetValue]| values.iter().map(|v| v.count).sum::<i64>();
    assert_eq!(sum(&estimate.outcome), estimate.total, "each sample is in one outcome");
    for value in &estimate.outcome {
        assert!(
            exact.outcome.iter().any(|e| e.value == value.value),
            "{} is an outcome there is",
            value.value
        );
    }
    // The other dimensions narrow the estimate as they narrow exact counts.
    let truncated = SampleFilter { outcome: Some(SampleState::Truncated), ..zebra.clone() };
    let narrowed = counts::count(&pool, &truncated, quarter).await.unwrap();
    let truncated_count = estimate.outcome.iter().find(|v| v.value == "truncated").map_or(0, |v| v.count);
    assert_eq!((narrowed.total, narrowed.counted), (truncated_count, estimate.counted));
    assert_eq!(narrowed.outcome, estimate.outcome, "a dimension's counts ignore its own filter");

    // A pass that outlasts its bound (here held up behind a lock) is given up for the estimate.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE samples IN ACCESS EXCLUSIVE MODE").execute(&mut *blocker).await.unwrap();
    let bounded = Counting::Bounded { exact_within: Duration::from_millis(100), sample_rows: 200 };
    let counting = tokio::spawn({
        let (pool, zebra) = (pool.clone(), zebra.clone());
        async move { counts::count(&pool, &zebra, bounded).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    blocker.rollback().await.unwrap();
    assert_eq!(counting.await.unwrap().unwrap(), estimate, "the same pages, the same estimate");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn bulk_actions_cover_exactly_the_confirmed_set(pool: sqlx::PgPool) {
    let mut specs: Vec<Spec> = (0..6).map(|_| ok("Fine.", 10)).collect();
    for _ in 0..4 {
        specs.push(cut_at_max_tokens());
    }
    let (run, ids) = seeded_run(&pool, &specs).await;
    let rita = person(&pool, "rita", Role::Reviewer).await;
    let eve = person(&pool, "eve", Role::Engineer).await;
    let truncated = SampleFilter { run: Some(run), flag: Some("truncated".into()), ..Default::default() };
    assert_eq!(bulk::count(&pool, &truncated).await.unwrap(), 4);

    let input = |expected| bulk::BulkInput {
        filter: truncated.clone(),
        decision: Decision::Reject,
        flags: vec!["truncated".into()],
        note: Some("cut at max_tokens".into()),
        expected,
    };
    assert!(bulk::apply(&pool, &rita, input(4))
        .await
        .unwrap_err()
        .to_string()
        .contains("engineers and admins"));
    let changed_meanwhile = bulk::apply(&pool, &eve, input(3)).await.unwrap_err();
    assert!(
        changed_meanwhile.to_string().contains("now matches 4 finished samples, not the 3"),
        "{changed_meanwhile}"
    );
    assert_eq!(bulk::apply(&pool, &eve, input(4)).await.unwrap(), 4);
    // The same action again (a client retrying after a timeout) changes nothing and logs nothing.
    assert_eq!(bulk::apply(&pool, &eve, input(4)).await.unwrap(), 0);

    let rejected = SampleFilter { run: Some(run), review: Some(ReviewState::Rejected), ..Default::default() };
    assert_eq!(list::count(&pool, &rejected).await.unwrap(), 4);
    let sample = detail::load(&pool, &eve, ids[9]).await.unwrap();
    assert_eq!(sample.events.len(), 1);
    assert_eq!(sample.events[0].kind, ReviewEventKind::Bulk);
    assert_eq!(sample.events[0].actor.as_deref(), Some("eve"));
    assert_eq!(sample.note.as_deref(), Some("cut at max_tokens"));
    // A bulk decision is undone per sample like any other.
    assert!(sample.can_undo);
    review::undo(&pool, &eve, ids[9], sample.review_version).await.unwrap();
    assert_eq!(list::count(&pool, &rejected).await.unwrap(), 3);
    assert_eq!(version(&pool, ids[0]).await, 0, "the other samples were not touched");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn results_are_flagged_on_arrival_and_one_sample_can_be_regenerated(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 12).await;
    let mut s = settings(vec![endpoint]);
    // Short enough that the simulator's answers are cut.
    s.max_tokens = 8;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;

    let truncated =
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'truncated'", run).await;
    assert!(truncated > 0, "{:?}", state_counts(&pool, run).await);
    let flagged = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'truncated' AND 'truncated' = ANY(auto_flags)",
        run,
    )
    .await;
    assert_eq!(flagged, truncated, "every truncated sample carries the automatic flag");
    let unflagged_ok = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok' AND 'truncated' = ANY(auto_flags)",
        run,
    )
    .await;
    assert_eq!(unflagged_ok, 0);

    // Judge one sample, then regenerate it: it is generated again and its review starts over.
    let ann = Viewer { id: by, username: "eng".into(), role: Role::Engineer };
    let id: i64 = sqlx::query_scalar("SELECT min(id) FROM samples WHERE run_id = $1")
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
    let v = review::decide(&pool, &ann, decision(id, 0, Decision::Reject)).await.unwrap();
    let stale = regenerate::regenerate(&pool, &ann, id, 0).await.unwrap_err();
    assert!(matches!(stale, Error::Conflict(_)));
    assert_eq!(regenerate::regenerate(&pool, &ann, id, v).await.unwrap(), regenerate::Requeued::Running);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    let sample = detail::load(&pool, &ann, id).await.unwrap();
    assert!(sample.state.is_terminal());
    assert_eq!(sample.review_state, ReviewState::Unreviewed);
    assert_eq!(sample.events[0].kind, ReviewEventKind::Regenerate);
    assert_eq!(sample.events[0].from_state, ReviewState::Rejected);
    let counted =
        count(&pool, "SELECT count(*) FROM sample_attempts WHERE sample_id = $1 AND counted", id).await;
    assert!(counted >= 2, "both generations are in the history");
    assert!(!sample.attempts.is_empty());
}
