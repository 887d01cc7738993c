//! `draft-studio acceptance …` as text: the figures of the API's JSON, a line each. Read as
//! `serde_json::Value`, like the other client commands, so an older or newer server's extra or
//! missing fields print what there is.

use serde_json::Value;
use std::fmt::Write;

fn pooled(p: &Value) -> String {
    let length = p["length"].as_f64().unwrap_or(f64::NAN);
    match (p["interval"]["low"].as_f64(), p["interval"]["high"].as_f64()) {
        (Some(low), Some(high)) => format!("{length:.3} (95% {low:.3}–{high:.3})"),
        _ => format!("{length:.3}"),
    }
}

fn draft(run: &Value) -> String {
    match (run["draft"]["name"].as_str(), run["draft"]["revision"].as_str()) {
        (Some(name), Some(rev)) if !rev.is_empty() => format!(" (draft {name}@{rev})"),
        (Some(name), _) => format!(" (draft {name})"),
        _ => String::new(),
    }
}

/// The run's pooled figure and one line per category.
pub fn report_text(report: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} {}{}",
        report["run_id"],
        report["run_name"].as_str().unwrap_or("?"),
        draft(report)
    );
    match report["overall"].as_object() {
        None => {
            let _ = writeln!(
                out,
                "no acceptance figure among its {} finished samples (no draft, or no per-request figures)",
                report["finished"]
            );
        }
        Some(_) => {
            let overall = &report["overall"];
            let _ = writeln!(
                out,
                "acceptance {} over {} samples, {} verify steps",
                pooled(overall),
                overall["samples"],
                overall["steps"]
            );
        }
    }
    for (dimension, groups) in report["breakdowns"].as_array().into_iter().flatten().filter_map(|b| {
        let pair = b.as_array()?;
        Some((pair.first()?.as_str()?, pair.get(1)?.as_array()?))
    }) {
        if dimension != "category" {
            continue;
        }
        for group in groups {
            let figure =
                group["pooled"].as_object().map_or_else(|| "—".to_string(), |_| pooled(&group["pooled"]));
            let _ = writeln!(
                out,
                "  {:<24} {:>8} samples  {figure}",
                group["group"].as_str().unwrap_or("?"),
                group["samples"]
            );
        }
    }
    out
}

/// The paired difference overall and one line per category.
pub fn comparison_text(c: &Value) -> String {
    let mut out = String::new();
    let label =
        |run: &Value| format!("run {} {}{}", run["run_id"], run["name"].as_str().unwrap_or("?"), draft(run));
    let _ = writeln!(out, "A: {}\nB: {}", label(&c["a"]), label(&c["b"]));
    let line = |f: &Value| {
        let difference = f["difference"].as_f64().unwrap_or(f64::NAN);
        let interval = match (f["interval"]["low"].as_f64(), f["interval"]["high"].as_f64()) {
            (Some(low), Some(high)) => format!(" (95% {low:+.3} to {high:+.3})"),
            _ => String::new(),
        };
        format!(
            "A {} · B {} · B − A {difference:+.3}{interval} over {} prompts",
            pooled(&f["a"]),
            pooled(&f["b"]),
            f["pairs"]
        )
    };
    let _ = writeln!(out, "{} shared prompts", c["shared_prompts"]);
    if c["overall"].is_object() {
        let _ = writeln!(out, "overall: {}", line(&c["overall"]));
    }
    for entry in c["by_category"].as_array().into_iter().flatten() {
        let (Some(category), Some(figure)) = (entry[0].as_str(), entry.get(1)) else { continue };
        if figure.is_object() {
            let _ = writeln!(out, "  {category}: {}", line(figure));
        }
    }
    out
}

/// One line per registered revision: the draft and the export it was trained on.
pub fn drafts_text(drafts: &Value) -> String {
    let mut out = String::new();
    for d in drafts.as_array().into_iter().flatten() {
        let name = match (d["draft"]["name"].as_str(), d["draft"]["revision"].as_str()) {
            (Some(name), Some(rev)) if !rev.is_empty() => format!("{name}@{rev}"),
            (name, _) => name.unwrap_or("?").to_string(),
        };
        let trained = match d["trained_on"].as_object() {
            Some(t) => format!(
                "trained on export {} ({} training rows): {}",
                t["export_id"],
                t["train_rows"].as_u64().map_or("?".to_string(), |n| n.to_string()),
                t["selection"].as_str().unwrap_or("?")
            ),
            None => "no export recorded (a starting draft, or trained elsewhere)".to_string(),
        };
        let _ = writeln!(out, "{name}  {trained}");
    }
    if out.is_empty() {
        out.push_str("no draft revision registered\n");
    }
    out
}

/// The loop as lines: per revision, its export, its acceptance overall and per category, and
/// its change from the revision before.
pub fn loop_text(table: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "draft {} on held-out dataset {} ({})",
        table["draft"].as_str().unwrap_or("?"),
        table["dataset_id"],
        table["dataset"].as_str().unwrap_or("?")
    );
    let categories: Vec<&str> =
        table["categories"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let change = |f: &Value| {
        let difference = f["difference"].as_f64().unwrap_or(f64::NAN);
        match (f["interval"]["low"].as_f64(), f["interval"]["high"].as_f64()) {
            (Some(low), Some(high)) => format!("{difference:+.3} (95% {low:+.3} to {high:+.3})"),
            _ => format!("{difference:+.3}"),
        }
    };
    for step in table["steps"].as_array().into_iter().flatten() {
        let revision = step["revision"].as_str().filter(|r| !r.is_empty()).unwrap_or("(no revision)");
        let export = match step["trained_on"].as_object() {
            Some(t) => format!("export {}: {}", t["export_id"], t["selection"].as_str().unwrap_or("?")),
            None => "no export (starting draft)".to_string(),
        };
        let _ = writeln!(out, "{revision}  ← {export}");
        let evaluation = &step["evaluation"];
        if !evaluation.is_object() {
            let _ = writeln!(out, "  not evaluated on this dataset yet");
            continue;
        }
        let overall = evaluation["overall"]
            .as_object()
            .map_or_else(|| "—".to_string(), |_| pooled(&evaluation["overall"]));
        let step_change = &step["change"];
        let overall_change = if step_change["overall"].is_object() {
            format!(
                "  {} vs {}",
                change(&step_change["overall"]),
                step_change["from_revision"].as_str().unwrap_or("?")
            )
        } else {
            String::new()
        };
        let _ = writeln!(out, "  run {} overall {overall}{overall_change}", evaluation["run_id"]);
        for (k, category) in categories.iter().enumerate() {
            let figure = &evaluation["by_category"][k];
            let figure = if figure.is_object() { pooled(figure) } else { "—".to_string() };
            let difference = &step_change["by_category"][k];
            let difference =
                if difference.is_object() { format!("  {}", change(difference)) } else { String::new() };
            let _ = writeln!(out, "    {category:<20} {figure}{difference}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_report_and_a_comparison_read_as_lines() {
        let report = json!({
            "run_id": 4, "run_name": "eval", "draft": {"name": "eagle3", "revision": "s400"}, "finished": 10,
            "overall": {"samples": 10, "steps": 100, "accepted": 150, "length": 2.5, "interval": {"low": 2.4, "high": 2.6}},
            "breakdowns": [["category", [{"group": "math", "samples": 4, "pooled": {"length": 1.5, "interval": null}}]]]
        });
        let text = report_text(&report);
        assert!(text.contains("run 4 eval (draft eagle3@s400)"), "{text}");
        assert!(
            text.contains("acceptance 2.500 (95% 2.400–2.600) over 10 samples, 100 verify steps"),
            "{text}"
        );
        assert!(text.contains("math") && text.contains("1.500"), "{text}");
        let comparison = json!({
            "a": {"run_id": 1, "name": "a", "draft": null}, "b": {"run_id": 2, "name": "b", "draft": {"name": "d", "revision": ""}},
            "shared_prompts": 40,
            "overall": {"pairs": 40, "difference": -0.5, "interval": {"low": -0.6, "high": -0.4},
                        "a": {"length": 3.0}, "b": {"length": 2.5}},
            "by_category": [["even", {"pairs": 20, "difference": -1.0, "interval": null, "a": {"length": 3.0}, "b": {"length": 2.0}}], ["odd", null]]
        });
        let text = comparison_text(&comparison);
        assert!(text.contains("B: run 2 b (draft d)"), "{text}");
        assert!(text.contains("B − A -0.500 (95% -0.600 to -0.400) over 40 prompts"), "{text}");
        assert!(text.contains("even: A 3.000 · B 2.000 · B − A -1.000 over 20 prompts"), "{text}");
        assert!(!text.contains("odd"), "{text}");
    }

    #[test]
    fn the_loop_reads_as_a_chain() {
        let step = |revision: &str, export: Option<i64>, length: f64, change: Option<f64>| {
            json!({
                "revision": revision,
                "trained_on": export.map(|id| json!({"export_id": id, "selection": "run 3 · ok", "train_rows": 70})),
                "evaluation": {"run_id": 9, "name": "e", "overall": {"length": length, "interval": null},
                               "by_category": [{"length": length, "interval": null}, null]},
                "change": change.map(|d| json!({"from_revision": "v0", "shared_prompts": 40,
                    "overall": {"difference": d, "interval": {"low": d - 0.1, "high": d + 0.1}},
                    "by_category": [{"difference": d, "interval": null}, null]})),
            })
        };
        let table = json!({"draft": "tiny", "dataset_id": 2, "dataset": "held-out", "categories": ["math", "chat"],
            "steps": [step("v0", None, 1.5, None), step("v1", Some(4), 2.0, Some(0.5))]});
        let text = loop_text(&table);
        assert!(text.contains("v0  ← no export (starting draft)"), "{text}");
        assert!(text.contains("v1  ← export 4: run 3 · ok"), "{text}");
        assert!(text.contains("overall 2.000  +0.500 (95% +0.400 to +0.600) vs v0"), "{text}");
        assert!(text.contains("math                 2.000  +0.500"), "{text}");
        assert!(text.contains("chat                 —"), "{text}");
    }
}
