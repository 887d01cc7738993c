//! The loop's lineage (`domain::lineage`): draft revisions registered with the export they were
//! trained on, the drafts an export trained, and a draft's revisions as one chain measured on
//! the same held-out prompts.
//!
//! A revision is registered once; registering it again (an evaluation of it, say) may add the
//! export when none was recorded, never change it: a revision is trained on one export, and a
//! second answer is refused rather than quietly rewriting the lineage.

use super::compare;
use crate::{Error, Result};
use domain::acceptance::{DraftRef, Pool};
use domain::export::ExportSpec;
use domain::lineage::{
    DraftRevision, EvaluationFigure, LoopEvaluation, LoopStep, LoopTable, NewDraftRevision, StepChange,
    TrainedDraft, TrainedOn,
};
use domain::stored::from_stored;
use sqlx::{PgConnection, PgPool};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Registers a revision, or finds it registered; refuses a second, different export.
pub async fn register(conn: &mut PgConnection, new: &NewDraftRevision, by: Option<i64>) -> Result<DraftRef> {
    let problems = new.problems();
    if !problems.is_empty() {
        return Err(Error::Invalid(problems.join("; ")));
    }
    let draft = new.draft();
    if let Some(export_id) = new.trained_on {
        let status =
            sqlx::query_scalar!("SELECT status::text AS \"status!\" FROM exports WHERE id = $1", export_id)
                .fetch_optional(&mut *conn)
                .await?;
        match status.as_deref() {
            None => return Err(Error::invalid(format!("export {export_id} does not exist"))),
            Some("completed") => {}
            Some(status) => {
                return Err(Error::invalid(format!(
                    "export {export_id} is {status}: a draft is trained on a completed export"
                )))
            }
        }
    }
    let stored = sqlx::query_scalar!(
        "INSERT INTO draft_revisions (name, revision, trained_on, created_by) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name, revision) DO UPDATE SET trained_on = COALESCE(draft_revisions.trained_on, EXCLUDED.trained_on)
         RETURNING trained_on",
        draft.name,
        draft.revision,
        new.trained_on,
        by
    )
    .fetch_one(&mut *conn)
    .await?;
    match (new.trained_on, stored) {
        (Some(given), Some(recorded)) if given != recorded => Err(Error::conflict(format!(
            "`{}` is recorded as trained on export {recorded}; a revision is trained on one export: \
             give this one a revision name of its own",
            draft.describe()
        ))),
        _ => Ok(draft),
    }
}

/// Every registered revision, the newest first; of one draft when `name` is given.
pub async fn revisions(pool: &PgPool, name: Option<&str>) -> Result<Vec<DraftRevision>> {
    let rows = sqlx::query!(
        r#"SELECT r.name, r.revision, r.created_at, r.trained_on, e.spec AS "spec?",
                  (SELECT count(*) FROM export_samples x WHERE x.export_id = r.trained_on AND x.split = 'train')
                      AS "train_rows!"
           FROM draft_revisions r LEFT JOIN exports e ON e.id = r.trained_on
           WHERE $1::text IS NULL OR r.name = $1
           ORDER BY r.created_at DESC, r.name, r.revision DESC
           LIMIT 500"#,
        name
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| DraftRevision {
            draft: DraftRef { name: r.name, revision: r.revision },
            trained_on: r.trained_on.map(|id| trained_on(id, r.spec, r.train_rows)),
            created_at: r.created_at,
        })
        .collect())
}

fn trained_on(export_id: i64, spec: Option<serde_json::Value>, train_rows: i64) -> TrainedOn {
    let selection = spec
        .and_then(|s| from_stored::<ExportSpec>(s).ok())
        .map(|s| s.selection.in_words())
        .unwrap_or_else(|| "(its spec cannot be read)".into());
    TrainedOn { export_id, selection, train_rows: (train_rows > 0).then_some(train_rows as u64) }
}

/// The drafts trained on an export, each with its evaluations, the newest first.
pub async fn trained_on_export(pool: &PgPool, export_id: i64) -> Result<Vec<TrainedDraft>> {
    Ok(trained_on_exports(pool, &[export_id]).await?.remove(&export_id).unwrap_or_default())
}

/// The drafts trained on each of these exports, with their evaluations (newest first).
pub async fn trained_on_exports(
    pool: &PgPool,
    export_ids: &[i64],
) -> Result<HashMap<i64, Vec<TrainedDraft>>> {
    // Served by draft_revisions_trained_on_idx and runs_draft_revision_idx.
    let rows = sqlx::query!(
        r#"SELECT d.trained_on AS "export_id!", d.name, d.revision, r.id AS "run_id?", r.name AS "run_name?",
                  ds.name AS "dataset?"
           FROM draft_revisions d
           LEFT JOIN runs r ON r.draft_name = d.name AND r.draft_revision = d.revision
           LEFT JOIN datasets ds ON ds.id = r.dataset_id
           WHERE d.trained_on = ANY($1)
           ORDER BY d.trained_on, d.created_at DESC, d.name, d.revision, r.id DESC"#,
        export_ids
    )
    .fetch_all(pool)
    .await?;
    let runs: Vec<i64> = rows.iter().filter_map(|r| r.run_id).collect();
    let pools = run_pools(pool, &runs).await?;
    let mut by_export: HashMap<i64, Vec<TrainedDraft>> = HashMap::new();
    for row in rows {
        let drafts = by_export.entry(row.export_id).or_default();
        let draft = DraftRef { name: row.name, revision: row.revision };
        if drafts.last().is_none_or(|d| d.draft != draft) {
            drafts.push(TrainedDraft { draft, evaluations: Vec::new() });
        }
        if let (Some(run_id), Some(name)) = (row.run_id, row.run_name) {
            let overall = pools.get(&run_id).and_then(|p| p.overall.pooled());
            let evaluations = &mut drafts.last_mut().expect("pushed above").evaluations;
            evaluations.push(EvaluationFigure {
                run_id,
                name,
                dataset: row.dataset.unwrap_or_default(),
                overall,
            });
        }
    }
    Ok(by_export)
}

/// Runs' figures pooled per category (added up by PostgreSQL, served by
/// samples_run_outcome_idx), and overall by merging their categories.
async fn run_pools(pool: &PgPool, run_ids: &[i64]) -> Result<HashMap<i64, RunPools>> {
    let rows = sqlx::query!(
        r#"SELECT s.run_id, COALESCE(d.category, '(none)') AS "category!", count(*) AS "n!",
                  sum(s.spec_accepted)::float8 AS "accepted!", sum(s.spec_steps)::float8 AS "steps!",
                  sum(s.spec_accepted::float8 * s.spec_accepted) AS "aa!",
                  sum(s.spec_accepted::float8 * s.spec_steps) AS "a_s!",
                  sum(s.spec_steps::float8 * s.spec_steps) AS "ss!"
           FROM samples s JOIN dataset_rows d ON d.id = s.row_id
           WHERE s.run_id = ANY($1) AND s.state NOT IN ('pending', 'running') AND s.spec_steps > 0
           GROUP BY 1, 2"#,
        run_ids
    )
    .fetch_all(pool)
    .await?;
    let mut pools: HashMap<i64, RunPools> = HashMap::new();
    for r in rows {
        let category = Pool::from_sums(r.n.max(0) as u64, r.accepted, r.steps, r.aa, r.a_s, r.ss);
        let run = pools.entry(r.run_id).or_default();
        run.overall.merge(&category);
        run.by_category.insert(r.category, category);
    }
    Ok(pools)
}

#[derive(Default)]
struct RunPools {
    overall: Pool,
    by_category: BTreeMap<String, Pool>,
}

/// A draft's revisions in the order they were registered, each with its newest completed
/// evaluation on `dataset_id` (by default the dataset of the draft's newest completed
/// evaluation) and its change from the revision before it, paired on the prompts both sent.
pub async fn loop_table(pool: &PgPool, draft: &str, dataset_id: Option<i64>) -> Result<LoopTable> {
    let draft = draft.trim();
    let dataset_id = match dataset_id {
        Some(id) => id,
        None => sqlx::query_scalar!(
            "SELECT dataset_id FROM runs WHERE draft_name = $1 AND status = 'completed' ORDER BY id DESC LIMIT 1",
            draft
        )
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| {
            Error::invalid(format!(
                "`{draft}` has no completed evaluation yet: evaluate a revision on held-out prompts \
                 (a run with the draft named) first"
            ))
        })?,
    };
    let dataset = sqlx::query_scalar!("SELECT name FROM datasets WHERE id = $1", dataset_id)
        .fetch_optional(pool)
        .await?
        .ok_or(Error::NotFound("dataset"))?;
    let mut revisions = revisions(pool, Some(draft)).await?;
    if revisions.is_empty() {
        return Err(Error::invalid(format!(
            "no revision of `{draft}` is registered: register one with the export it was trained on, or evaluate it"
        )));
    }
    revisions.reverse(); // oldest first
    let mut evaluated: Vec<(DraftRevision, Option<(LoopEvaluation, RunPools)>)> = Vec::new();
    let mut categories: BTreeSet<String> = BTreeSet::new();
    for revision in revisions {
        // Served by runs_draft_revision_idx.
        let run = sqlx::query!(
            "SELECT id, name FROM runs
             WHERE draft_name = $1 AND draft_revision = $2 AND dataset_id = $3 AND status = 'completed'
             ORDER BY id DESC LIMIT 1",
            revision.draft.name,
            revision.draft.revision,
            dataset_id
        )
        .fetch_optional(pool)
        .await?;
        let evaluation = match run {
            None => None,
            Some(run) => {
                let pools = run_pools(pool, &[run.id]).await?.remove(&run.id).unwrap_or_default();
                categories.extend(pools.by_category.keys().cloned());
                let evaluation = LoopEvaluation {
                    run_id: run.id,
                    name: run.name,
                    overall: pools.overall.pooled(),
                    by_category: vec![],
                };
                Some((evaluation, pools))
            }
        };
        evaluated.push((revision, evaluation));
    }
    let categories: Vec<String> = categories.into_iter().collect();
    let mut steps = Vec::with_capacity(evaluated.len());
    let mut previous: Option<(String, i64)> = None;
    for (revision, evaluation) in evaluated {
        let evaluation = evaluation.map(|(mut e, pools)| {
            e.by_category =
                categories.iter().map(|c| pools.by_category.get(c).and_then(Pool::pooled)).collect();
            e
        });
        let change = match (&previous, &evaluation) {
            (Some((from_revision, from_run)), Some(e)) => {
                Some(match compare::compare(pool, *from_run, e.run_id).await {
                    Ok(c) => {
                        let by_category: BTreeMap<String, _> = c.by_category.into_iter().collect();
                        StepChange {
                            from_revision: from_revision.clone(),
                            shared_prompts: c.shared_prompts,
                            overall: c.overall,
                            by_category: categories
                                .iter()
                                .map(|cat| by_category.get(cat).cloned().flatten())
                                .collect(),
                        }
                    }
                    // No prompt in common: the step shows that rather than a difference.
                    Err(Error::Invalid(_)) => StepChange {
                        from_revision: from_revision.clone(),
                        shared_prompts: 0,
                        overall: None,
                        by_category: vec![None; categories.len()],
                    },
                    Err(e) => return Err(e),
                })
            }
            _ => None,
        };
        if let Some(e) = &evaluation {
            previous = Some((revision.draft.revision.clone(), e.run_id));
        }
        steps.push(LoopStep {
            revision: revision.draft.revision,
            trained_on: revision.trained_on,
            evaluation,
            change,
        });
    }
    Ok(LoopTable { draft: draft.to_string(), dataset_id, dataset, categories, steps })
}
