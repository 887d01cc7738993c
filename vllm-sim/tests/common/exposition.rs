//! A strict reader of the Prometheus text exposition format 0.0.4, enough to check what
//! the simulator serves. (`prometheus-parse` 0.2 cannot be used: it silently skips every
//! metric whose name contains a colon, which is all of vLLM's.)

use std::collections::BTreeMap;

#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses every line, panicking on anything malformed or on a sample outside the family
/// its `# TYPE` line announced.
pub fn parse(text: &str) -> Vec<Sample> {
    let mut family: Option<(String, String)> = None;
    let mut samples = Vec::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        if let Some(help) = line.strip_prefix("# HELP ") {
            metric_name(help.split(' ').next().unwrap(), line);
        } else if let Some(declaration) = line.strip_prefix("# TYPE ") {
            let (name, kind) = declaration.split_once(' ').unwrap_or_else(|| panic!("bad TYPE: {line}"));
            metric_name(name, line);
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "bad type: {line}"
            );
            family = Some((name.to_owned(), kind.to_owned()));
        } else {
            let sample = sample(line);
            let (family_name, kind) = family.as_ref().unwrap_or_else(|| panic!("sample before TYPE: {line}"));
            let suffix = sample
                .name
                .strip_prefix(family_name.as_str())
                .unwrap_or_else(|| panic!("{line} outside {family_name}"));
            let allowed: &[&str] = if kind == "histogram" { &["_bucket", "_sum", "_count"] } else { &[""] };
            assert!(allowed.contains(&suffix), "{line} outside {kind} {family_name}");
            samples.push(sample);
        }
    }
    samples
}

fn metric_name<'a>(name: &'a str, line: &str) -> &'a str {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    assert!(
        first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
        "bad name in {line}"
    );
    name
}

fn sample(line: &str) -> Sample {
    let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value: {line}"));
    let name = metric_name(&line[..name_end], line).to_owned();
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let close = inner.find("} ").unwrap_or_else(|| panic!("unclosed labels: {line}"));
        for pair in inner[..close].split("\",").filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once("=\"").unwrap_or_else(|| panic!("bad label in {line}"));
            labels.insert(metric_name(key, line).to_owned(), value.trim_end_matches('"').to_owned());
        }
        rest = &inner[close + 1..];
    }
    let value = rest.trim().parse().unwrap_or_else(|_| panic!("bad value: {line}"));
    Sample { name, labels, value }
}
