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
}
