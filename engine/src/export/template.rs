//! The target model's chat template (Jinja, from `tokenizer_config.json`), rendered the way
//! Hugging Face `apply_chat_template` does: trim_blocks and lstrip_blocks, Python string methods
//! (minijinja-contrib's pycompat), `raise_exception`, and the special tokens as variables.
//!
//! `strftime_now` is deliberately not defined: templates that stamp today's date (Llama 3.1) then
//! use their fixed fallback, so the same export renders the same text on any day.

use crate::generation::conversation::Turn;
use crate::{Error, Result};
use minijinja::{Environment, ErrorKind, Value};
use serde::Serialize;
use std::path::Path;

const NAME: &str = "chat";

pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'a str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
}

impl ChatTemplate {
    /// Reads the template from a tokenizer folder: `chat_template.jinja` if present, else the
    /// `chat_template` of `tokenizer_config.json` (a string, or the entry named "default").
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let config_path = dir.join("tokenizer_config.json");
        let config: serde_json::Value = match std::fs::read_to_string(&config_path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| Error::invalid(format!("{} is not valid JSON: {e}", config_path.display())))?,
            Err(_) => serde_json::Value::Null,
        };
        let jinja_path = dir.join("chat_template.jinja");
        let source = match std::fs::read_to_string(&jinja_path) {
            Ok(source) => source,
            Err(_) => template_of(&config).ok_or_else(|| {
                Error::invalid(format!(
                    "{} has no chat template: add chat_template to tokenizer_config.json or a chat_template.jinja",
                    dir.display()
                ))
            })?,
        };
        Self::new(source, token(&config, "bos_token"), token(&config, "eos_token"))
    }

    pub fn new(source: String, bos_token: String, eos_token: String) -> Result<Self> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned(NAME, source)
            .map_err(|e| Error::invalid(format!("the chat template does not parse: {e}")))?;
        Ok(Self { env, bos_token, eos_token })
    }

    /// Renders `turns`; `thinking` is passed as `enable_thinking` (and `thinking`) like the
    /// generation request's `chat_template_kwargs`.
    pub fn render(
        &self,
        turns: &[Turn],
        add_generation_prompt: bool,
        thinking: Option<bool>,
    ) -> Result<String> {
        let messages: Vec<Message> = turns
            .iter()
            .map(|t| Message {
                role: &t.role,
                content: &t.content,
                reasoning_content: t.reasoning_content.as_deref(),
            })
            .collect();
        let template = self.env.get_template(NAME).expect("added in new");
        let mut ctx = vec![
            ("messages", Value::from_serialize(&messages)),
            ("add_generation_prompt", Value::from(add_generation_prompt)),
            ("bos_token", Value::from(self.bos_token.as_str())),
            ("eos_token", Value::from(self.eos_token.as_str())),
        ];
        if let Some(on) = thinking {
            ctx.push(("enable_thinking", Value::from(on)));
            ctx.push(("thinking", Value::from(on)));
        }
        let ctx: std::collections::BTreeMap<&str, Value> = ctx.into_iter().collect();
        template
            .render(ctx)
            .map_err(|e| Error::invalid(format!("the chat template failed to render a conversation: {e}")))
    }
}

fn template_of(config: &serde_json::Value) -> Option<String> {
    match config.get("chat_template")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(entries) => entries
            .iter()
            .find(|e| e.get("name").and_then(|n| n.as_str()) == Some("default"))
            .or_else(|| entries.first())
            .and_then(|e| e.get("template")?.as_str().map(str::to_string)),
        _ => None,
    }
}

/// A special token given as a string or as `{"content": ...}`.
fn token(config: &serde_json::Value, key: &str) -> String {
    match config.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.get("content").and_then(|c| c.as_str()).unwrap_or_default().to_string(),
        None => String::new(),
    }
}
