//! `/acceptance/compare?a=&b=`: two evaluations of the same prompts side by side, paired prompt
//! by prompt, overall and per category, and the prompts where B falls furthest below A.

use super::{api::compare_runs, format_difference, interval_note, signed, verdict};
use domain::acceptance::{Comparison, PairedFigure};
use domain::units::thousands;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn ComparePage() -> impl IntoView {
    let query = use_query_map();
    let runs = move || {
        query.with(|q| {
            let id = |k: &str| q.get(k).and_then(|v| v.trim().parse::<i64>().ok());
            id("a").zip(id("b"))
        })
    };
    let comparison = Resource::new(runs, |runs| async move {
        let (a, b) =
            runs.ok_or_else(|| crate::AppError::Invalid("choose two runs to compare (a and b)".into()))?;
        compare_runs(a, b).await
    });
    view! {
        <Title text="Compare drafts"/>
        <Suspense fallback=|| view! { <p class="muted">"Pairing the two evaluations…"</p> }>
            {move || Suspend::new(async move {
                match comparison.await {
                    Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> <p><a href="/acceptance">"Back to the evaluations"</a></p> }.into_any(),
                    Ok(c) => view! { <ComparisonView c/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ComparisonView(c: Comparison) -> impl IntoView {
    let (a, b) = (c.a.clone(), c.b.clone());
    view! {
        <div class="page-head">
            <h1>"Draft against draft"</h1>
            <a class="button" href="/acceptance">"Evaluations"</a>
        </div>
        <p>
            <strong>"A: "</strong> <a href=format!("/acceptance/runs/{}", a.run_id) data-testid="compare-a">{a.describe()}</a>
            " · " <strong>"B: "</strong> <a href=format!("/acceptance/runs/{}", b.run_id) data-testid="compare-b">{b.describe()}</a>
            " · " {format!("{} shared prompts", thousands(c.shared_prompts as i64))}
        </p>
        {(c.mode_mismatches > 0).then(|| view! {
            <p class="warnings">{format!(
                "{} of the shared prompts were sent with a different thinking mode by the two runs: those pairs compare more than the drafts.",
                thousands(c.mode_mismatches as i64)
            )}</p>
        })}
        {match &c.overall {
            None => view! { <p class="empty">"No prompt has a figure in both runs."</p> }.into_any(),
            Some(f) => view! {
                <div class="kpis" data-testid="compare-overall">
                    <div class="kpi"><span class="value" data-testid="compare-a-length">{format!("{:.2}", f.a.length)}</span><span class="label">{format!("A's acceptance{}", interval_note(&f.a))}</span></div>
                    <div class="kpi"><span class="value" data-testid="compare-b-length">{format!("{:.2}", f.b.length)}</span><span class="label">{format!("B's acceptance{}", interval_note(&f.b))}</span></div>
                    <div class="kpi">
                        <span class="value" data-testid="compare-difference">{signed(f.difference)}</span>
                        <span class="label">{match f.interval {
                            Some(i) => format!("B − A, paired · 95% {} to {}", signed(i.low), signed(i.high)),
                            None => "B − A, paired".to_string(),
                        }}</span>
                    </div>
                    <div class="kpi"><span class="value" data-testid="compare-verdict">{verdict(f)}</span><span class="label">{format!("B higher on {}, lower on {} of {} prompts", f.b_higher, f.a_higher, f.pairs)}</span></div>
                </div>
            }.into_any(),
        }}
        <table class="data" data-testid="compare-categories">
            <caption>"By category"</caption>
            <thead><tr><th>"Category"</th><th class="num">"Pairs"</th><th class="num">"A"</th><th class="num">"B"</th><th class="num">"B − A"</th><th>"Verdict"</th></tr></thead>
            <tbody>
                {c.by_category.into_iter().map(|(category, figure)| view! { <CategoryRow category figure/> }).collect_view()}
            </tbody>
        </table>
        {(!c.largest_drops.is_empty()).then(|| view! {
            <section class="panel">
                <h2>"Where B falls furthest below A"</h2>
                <table class="data" data-testid="compare-drops">
                    <thead><tr><th>"Prompt"</th><th>"Category"</th><th class="num">"A"</th><th class="num">"B"</th><th></th></tr></thead>
                    <tbody>
                        {c.largest_drops.into_iter().map(|d| view! {
                            <tr>
                                <td><a href=format!("/review/samples/{}", d.b_sample_id)>{d.preview.clone()}</a></td>
                                <td>{d.category.clone().unwrap_or_else(|| "—".into())}</td>
                                <td class="num">{format!("{:.2}", d.a_length)}</td>
                                <td class="num">{format!("{:.2}", d.b_length)}</td>
                                <td><a class="small" href=format!("/review/samples/{}", d.a_sample_id)>"A's sample"</a></td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        })}
    }
}

#[component]
fn CategoryRow(category: String, figure: Option<PairedFigure>) -> impl IntoView {
    let key = category.clone();
    match figure {
        None => view! { <tr data-category=key><th scope="row">{category}</th><td class="num">"0"</td><td colspan="4" class="muted">"no prompt with a figure in both"</td></tr> }.into_any(),
        Some(f) => view! {
            <tr data-category=key>
                <th scope="row">{category}</th>
                <td class="num">{thousands(f.pairs as i64)}</td>
                <td class="num">{format!("{:.2}", f.a.length)}</td>
                <td class="num">{format!("{:.2}", f.b.length)}</td>
                <td class="num">{format_difference(&f)}</td>
                <td class="verdict">{verdict(&f)}</td>
            </tr>
        }.into_any(),
    }
}
