//! Guessing the schema mapping from a file's columns.

use domain::dataset::{Mapping, Schema};

/// Columns that commonly hold a stable id, in order of preference.
const ID_COLUMNS: &[&str] = &["id", "uuid", "prompt_id", "conversation_id", "sample_id"];
/// Columns that commonly name a row's category (open-perfectblend's `source`).
const CATEGORY_COLUMNS: &[&str] = &["category", "source", "task", "subset"];
/// Columns that list the functions a conversation offers (glaive's `tools`, some sets' `functions`).
const TOOLS_COLUMNS: &[&str] = &["tools", "functions"];
/// Plain prompt columns, in order of preference.
const PROMPT_COLUMNS: &[&str] = &["prompt", "question", "instruction", "input", "query"];

/// The mapping the columns suggest, or `None` when none of the schemas fits.
pub fn mapping_for(columns: &[String]) -> Option<Mapping> {
    let has = |name: &str| columns.iter().any(|c| c == name);
    let mut mapping = if has("conversations") {
        Mapping::new(Schema::Sharegpt)
    } else if has("conversation") {
        Mapping { column: "conversation".into(), ..Mapping::new(Schema::Sharegpt) }
    } else if has("messages") {
        Mapping::new(Schema::Openai)
    } else if has("instruction") && (has("output") || has("input")) {
        Mapping::new(Schema::Alpaca)
    } else {
        let column = PROMPT_COLUMNS.iter().find(|c| has(c))?;
        Mapping { column: column.to_string(), ..Mapping::new(Schema::Prompt) }
    };
    mapping.id_column = ID_COLUMNS.iter().find(|c| has(c)).map(|c| c.to_string());
    mapping.category_column = CATEGORY_COLUMNS.iter().find(|c| has(c)).map(|c| c.to_string());
    if matches!(mapping.schema, Schema::Sharegpt | Schema::Openai) {
        mapping.tools_column = TOOLS_COLUMNS.iter().find(|c| has(c)).map(|c| c.to_string());
    }
    Some(mapping)
}

/// The mapping is usable with these columns; otherwise says what to change.
pub fn check(mapping: &Mapping, columns: &[String]) -> Result<(), String> {
    let has = |name: &str| columns.iter().any(|c| c == name);
    let listed = || {
        if columns.is_empty() {
            "the file shows no columns".to_string()
        } else {
            format!("the file's columns are {}", columns.join(", "))
        }
    };
    if !has(&mapping.column) {
        return Err(format!(
            "the {} schema reads column `{}`, which the file does not have; {}",
            mapping.schema,
            mapping.column,
            listed()
        ));
    }
    let optional = [
        ("id", &mapping.id_column),
        ("category", &mapping.category_column),
        ("tools", &mapping.tools_column),
    ];
    for (what, column) in optional {
        if let Some(column) = column {
            if !has(column) {
                return Err(format!("the {what} column `{column}` is not in the file; {}", listed()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn known_datasets_are_recognised() {
        let sharegpt = mapping_for(&cols(&["id", "conversations"])).unwrap();
        assert_eq!((sharegpt.schema, sharegpt.id_column.as_deref()), (Schema::Sharegpt, Some("id")));
        let ultrachat = mapping_for(&cols(&["prompt", "prompt_id", "messages"])).unwrap();
        assert_eq!((ultrachat.schema, ultrachat.id_column.as_deref()), (Schema::Openai, Some("prompt_id")));
        let blend = mapping_for(&cols(&["conversations", "source"])).unwrap();
        assert_eq!(blend.category_column.as_deref(), Some("source"));
        let alpaca = mapping_for(&cols(&["instruction", "input", "output"])).unwrap();
        assert_eq!(alpaca.schema, Schema::Alpaca);
        let gsm8k = mapping_for(&cols(&["question", "answer"])).unwrap();
        assert_eq!((gsm8k.schema, gsm8k.column.as_str()), (Schema::Prompt, "question"));
        assert_eq!(mapping_for(&cols(&["a", "b"])), None);
    }
}
