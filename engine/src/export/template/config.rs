//! What a tokenizer folder gives the chat template, read as transformers 5 reads it: the
//! template source (`chat_template.jinja`, else `chat_template` in `tokenizer_config.json`) and
//! the special tokens it exposes to the template (`special_tokens_map`).
//!
//! Exposed: `bos_token`, `eos_token`, `unk_token`, `sep_token`, `pad_token`, `cls_token`,
//! `mask_token`; any other `*_token` key with a token value (model-specific tokens such as
//! `image_token`); the names in an `extra_special_tokens` object. Not exposed (transformers 5
//! does not either): `additional_special_tokens` and an `extra_special_tokens` list. A null token
//! is left undefined, not set to an empty string, so `bos_token is defined` answers as it does in
//! transformers.

use crate::{Error, Result};
use serde_json::{Map, Value};
use std::path::Path;

const NAMED: [&str; 7] =
    ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

pub struct TemplateConfig {
    pub source: String,
    /// `(variable, token text)` in the order transformers lists them.
    pub special_tokens: Vec<(String, String)>,
}

pub fn read(dir: &Path) -> Result<TemplateConfig> {
    let config_path = dir.join("tokenizer_config.json");
    let mut config = match std::fs::read_to_string(&config_path) {
        Ok(text) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(Error::invalid(format!("{} is not a JSON object", config_path.display()))),
            Err(e) => {
                return Err(Error::invalid(format!("{} is not valid JSON: {e}", config_path.display())))
            }
        },
        Err(_) => Map::new(),
    };
    merge_special_tokens_map(dir, &mut config)?;
    let source = match std::fs::read_to_string(dir.join("chat_template.jinja")) {
        Ok(source) => source,
        Err(_) => template_of(&config, dir)?,
    };
    Ok(TemplateConfig { source, special_tokens: special_tokens(&config)? })
}

/// The legacy `special_tokens_map.json` counts only when the config has no
/// `added_tokens_decoder` (transformers' `_from_pretrained`); its object values are tokens.
fn merge_special_tokens_map(dir: &Path, config: &mut Map<String, Value>) -> Result<()> {
    if config.contains_key("added_tokens_decoder") {
        return Ok(());
    }
    let path = dir.join("special_tokens_map.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&text) else {
        return Err(Error::invalid(format!("{} is not a JSON object", path.display())));
    };
    for (key, mut value) in map {
        if let Value::Object(token) = &mut value {
            if key != "extra_special_tokens" {
                token.insert("__type".into(), "AddedToken".into());
            }
        }
        config.insert(key, value);
    }
    Ok(())
}

/// A string template, or the entry named "default" of a list of named templates (transformers
/// refuses a list without one).
fn template_of(config: &Map<String, Value>, dir: &Path) -> Result<String> {
    match config.get("chat_template") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(entries)) => entries
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some("default"))
            .and_then(|e| e.get("template")?.as_str().map(str::to_string))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{} has several chat templates and none named \"default\"; transformers needs one",
                    dir.display()
                ))
            }),
        _ => Err(Error::invalid(format!(
            "{} has no chat template: add chat_template to tokenizer_config.json or a chat_template.jinja",
            dir.display()
        ))),
    }
}

fn special_tokens(config: &Map<String, Value>) -> Result<Vec<(String, String)>> {
    let mut tokens = Vec::new();
    for name in NAMED {
        match config.get(name) {
            None | Some(Value::Null) => {}
            Some(value) => match token_text(value) {
                Some(text) => tokens.push((name.to_string(), text)),
                None => {
                    return Err(Error::invalid(format!(
                        "tokenizer_config.json: {name} must be a string or an object with \"__type\": \
                         \"AddedToken\" and \"content\" (transformers refuses {value})"
                    )))
                }
            },
        }
    }
    for (name, value) in config {
        if name.ends_with("_token") && !NAMED.contains(&name.as_str()) {
            if let Some(text) = token_text(value) {
                tokens.push((name.clone(), text));
            }
        }
    }
    if let Some(Value::Object(extra)) = config.get("extra_special_tokens") {
        for (name, value) in extra {
            if let Some(text) = token_text(value) {
                tokens.push((name.clone(), text));
            }
        }
    }
    Ok(tokens)
}

/// A token as a string or a serialized `AddedToken`; anything else is not a token.
fn token_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) if o.get("__type").and_then(Value::as_str) == Some("AddedToken") => {
            o.get("content")?.as_str().map(str::to_string)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exposes_the_tokens_transformers_exposes() {
        let config = json!({
            "bos_token": {"__type": "AddedToken", "content": "<s>", "normalized": true},
            "eos_token": "</s>",
            "pad_token": null,
            "image_token": "<image>",
            "add_bos_token": true,
            "not_a_token": {"content": "x"},
            "additional_special_tokens": ["<extra>"],
            "extra_special_tokens": {"audio_token": "<audio>"}
        });
        let tokens = special_tokens(config.as_object().unwrap()).unwrap();
        let names: Vec<_> = tokens.iter().map(|(n, t)| format!("{n}={t}")).collect();
        assert_eq!(names, ["bos_token=<s>", "eos_token=</s>", "image_token=<image>", "audio_token=<audio>"]);

        let plain = json!({"bos_token": {"content": "<s>"}});
        let error = special_tokens(plain.as_object().unwrap()).unwrap_err().to_string();
        assert!(error.contains("AddedToken"), "{error}");
    }
}
