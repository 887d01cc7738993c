//! The target model's chat template, rendered as transformers 5's `apply_chat_template` renders
//! it (`render_jinja_template` in `transformers/utils/chat_template_utils.py`):
//!
//! - the sandbox: `trim_blocks` and `lstrip_blocks`, Jinja2's tags and no others (minijinja's
//!   `{% do %}` is refused, see `tags`), loop controls (`{% break %}`, `{% continue %}`),
//!   `{% generation %}` blocks (see `generation`), `raise_exception`, `strftime_now` (at a fixed
//!   date, see `strftime`) and transformers' own `tojson`;
//! - the variables: `messages` (with `thinking` copied from `reasoning_content`, as transformers 5
//!   does for templates that read it, and each call's `arguments` as the object they spell, as
//!   vLLM hands them to the template), the conversation's `tools` (none without), `documents` as
//!   none, `add_generation_prompt`,
//!   the special tokens of `tokenizer_config.json` (see `config`) and the sample's
//!   `enable_thinking`/`thinking`, sent at generation as `chat_template_kwargs`;
//! - Python's spelling where minijinja's differs: printed values, `|string`, `|join`, `|trim`,
//!   and the string methods `strip`, `split`, `splitlines`, `find`, `count`, `join` (see
//!   `python` and `methods`).
//!
//! Known gaps, which the parity test's templates do not use: the `~` operator joins `none` and
//! booleans as minijinja spells them (`none`, `true`), and unassigned code points inside a printed
//! list or dict are not escaped as Python's `repr` escapes them.

mod config;
mod generation;
mod methods;
mod python;
mod strftime;
mod tags;

use crate::generation::conversation::Turn;
use crate::{Error, Result};
use minijinja::{value::ValueKind, Environment, ErrorKind, Value};
use serde::Serialize;
use std::ops::Range;
use std::path::Path;
use time::Date;

const NAME: &str = "chat";

pub struct ChatTemplate {
    env: Environment<'static>,
    /// The variables every render gets: special tokens, `tools` and `documents`.
    base: Vec<(String, Value)>,
    generation_blocks: bool,
    date: Date,
}

/// One render: the text and, for a template with `{% generation %}` blocks, the byte ranges of
/// what they rendered, in order.
pub struct Rendered {
    pub text: String,
    pub generation: Option<Vec<Range<usize>>>,
}

/// A message as transformers 5 hands it to the template: `thinking` first when there is
/// reasoning (`{"thinking": r, **message, "reasoning_content": r}`), then the message's keys.
#[derive(Serialize)]
struct Message<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    role: &'a str,
    content: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<Call<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
}

/// A call as templates read it (`tool_call.function.arguments | tojson`, `arguments.items()`):
/// vLLM parses the API's JSON-string arguments into an object before rendering (`json.loads`,
/// keys in the order the call wrote them), and so does the exporter, into the template's own
/// ordered map; arguments that are not a JSON object stay the text they are.
#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: Value,
}

impl<'a> Call<'a> {
    fn of(call: &'a domain::conversation::ToolCall) -> Self {
        let text = &call.function.arguments;
        let arguments = match call
            .parsed_arguments()
            .and_then(|_| serde_json::from_str::<Value>(text).map_err(|e| e.to_string()))
        {
            Ok(object) => object,
            Err(_) => Value::from(text.clone()),
        };
        Call {
            id: &call.id,
            kind: "function",
            function: CallFunction { name: &call.function.name, arguments },
        }
    }
}

/// The tools as vLLM hands them to the template (`domain::conversation::served_tools`).
fn served_tools(tools: &serde_json::Value) -> Value {
    Value::from_serialize(domain::conversation::served_tools(tools))
}

/// The chat template's source text in a tokenizer folder, as `ChatTemplate::from_dir` reads it.
pub fn source_in(dir: &Path) -> Result<String> {
    Ok(config::read(dir)?.source)
}

impl ChatTemplate {
    /// Reads the template and special tokens from a tokenizer folder; `strftime_now` returns `date`.
    pub fn from_dir(dir: &Path, date: Date) -> Result<Self> {
        let config = config::read(dir)?;
        Self::new(config.source, config.special_tokens, date)
    }

    pub fn new(source: String, special_tokens: Vec<(String, String)>, date: Date) -> Result<Self> {
        let refused = |reason: String| {
            Error::invalid(format!("the chat template cannot be rendered exactly: {reason}"))
        };
        if let Some(tag) = tags::unknown(&tags::scan(&source).map_err(refused)?) {
            return Err(refused(format!(
                "it uses {{% {tag} %}}, a tag transformers' template sandbox does not know (it would fail to load there)"
            )));
        }
        let rewritten = generation::rewrite(&source).map_err(refused)?;
        let generation_blocks = rewritten.is_some();
        if special_tokens.iter().any(|(_, t)| generation::contains_marker(t)) {
            return Err(refused("a special token contains U+FDD0 or U+FDD1".into()));
        }

        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(methods::call);
        env.set_formatter(|out, _state, value| {
            let text = python::py_str(value)?;
            out.write_str(&text).map_err(|_| minijinja::Error::new(ErrorKind::WriteFailure, "writing failed"))
        });
        // Python's `x is iterable` (`iter(x)` works): not none, a number or a boolean; undefined
        // is (jinja2's iterates as empty). minijinja's own test says yes to none, which broke
        // Hermes' `tools is iterable and tools | length > 0` for a conversation without tools.
        env.add_test("iterable", |value: &Value| {
            !matches!(value.kind(), ValueKind::None | ValueKind::Number | ValueKind::Bool)
        });
        env.add_filter("tojson", python::tojson_filter);
        env.add_filter("string", |value: &Value| python::py_str(value));
        env.add_filter("trim", methods::trim_filter);
        env.add_filter("join", methods::join_filter);
        env.add_function("raise_exception", |message: &Value| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, python::py_str(message)?))
        });
        env.add_function("strftime_now", move |format: String| {
            strftime::format(date, &format)
                .map(Value::from)
                .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, e))
        });
        env.add_template_owned(NAME, rewritten.unwrap_or(source))
            .map_err(|e| Error::invalid(format!("the chat template does not parse: {e}")))?;

        let mut base: Vec<(String, Value)> =
            special_tokens.into_iter().map(|(name, text)| (name, Value::from(text))).collect();
        base.push(("tools".into(), Value::from(())));
        base.push(("documents".into(), Value::from(())));
        Ok(Self { env, base, generation_blocks, date })
    }

    /// Whether the template marks assistant output with `{% generation %}` blocks.
    pub fn has_generation_blocks(&self) -> bool {
        self.generation_blocks
    }

    /// The date `strftime_now` renders.
    pub fn date(&self) -> Date {
        self.date
    }

    /// Renders `turns` offering `tools`; `thinking` is passed as `enable_thinking` and
    /// `thinking`, as the generation request's `chat_template_kwargs` sent it.
    pub fn render(
        &self,
        turns: &[Turn],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        thinking: Option<bool>,
    ) -> Result<Rendered> {
        if self.generation_blocks {
            let reserved = turns.iter().any(|t| {
                generation::contains_marker(&t.content)
                    || t.reasoning_content.as_deref().is_some_and(generation::contains_marker)
            });
            if reserved {
                return Err(Error::invalid(
                    "a conversation contains U+FDD0 or U+FDD1, characters the exporter reserves to find \
                     the template's {% generation %} blocks",
                ));
            }
        }
        let messages: Vec<Message> = turns
            .iter()
            .map(|t| Message {
                thinking: t.reasoning_content.as_deref(),
                role: &t.role,
                content: &t.content,
                tool_calls: t.tool_calls.iter().map(Call::of).collect(),
                tool_call_id: t.tool_call_id.as_deref(),
                reasoning_content: t.reasoning_content.as_deref(),
            })
            .collect();
        let mut ctx = self.base.clone();
        if let Some(tools) = tools {
            ctx.push(("tools".into(), served_tools(tools)));
        }
        if let Some(on) = thinking {
            ctx.push(("enable_thinking".into(), Value::from(on)));
            ctx.push(("thinking".into(), Value::from(on)));
        }
        ctx.push(("messages".into(), Value::from_serialize(&messages)));
        ctx.push(("add_generation_prompt".into(), Value::from(add_generation_prompt)));
        let template = self.env.get_template(NAME).expect("added in new");
        let text = template.render(Value::from_iter(ctx)).map_err(|e| {
            Error::invalid(format!("the chat template failed to render a conversation: {e:#}"))
        })?;
        if !self.generation_blocks {
            return Ok(Rendered { text, generation: None });
        }
        let (text, spans) = generation::extract(&text).map_err(|reason| {
            Error::invalid(format!("the chat template cannot be rendered exactly: {reason}"))
        })?;
        Ok(Rendered { text, generation: Some(spans) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    fn turn(role: &str, content: &str, reasoning: Option<&str>) -> Turn {
        Turn {
            role: role.into(),
            content: content.into(),
            reasoning_content: reasoning.map(str::to_string),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    fn render(source: &str, turns: &[Turn]) -> Result<Rendered> {
        let tokens = vec![("bos_token".to_string(), "<s>".to_string())];
        ChatTemplate::new(source.into(), tokens, date!(2026 - 02 - 03))?.render(
            turns,
            None,
            false,
            Some(true),
        )
    }

    #[test]
    fn passes_what_transformers_passes() {
        let out = render(
            "{{ bos_token }}|{{ eos_token is defined }}|{{ tools is none }}|{{ documents is none }}|\
             {{ enable_thinking }}|{{ strftime_now('%d %b %Y') }}|{{ messages[0] | tojson }}",
            &[turn("assistant", "a", Some("r"))],
        )
        .unwrap();
        assert_eq!(
            out.text,
            "<s>|False|True|True|True|03 Feb 2026|\
             {\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"a\", \"reasoning_content\": \"r\"}"
        );
        assert!(out.generation.is_none());
    }

    #[test]
    fn generation_blocks_give_spans() {
        let source = "{% for m in messages %}<{{ m.role }}>{% generation %}{{ m.content }}.{% endgeneration %}\n{% endfor %}";
        let out = render(source, &[turn("user", "q", None), turn("assistant", "é", None)]).unwrap();
        // trim_blocks takes the newline after `{% endgeneration %}`, as in Jinja2.
        assert_eq!(out.text, "<user>q.<assistant>é.");
        let spans = out.generation.unwrap();
        assert_eq!(spans.iter().map(|s| &out.text[s.clone()]).collect::<Vec<_>>(), ["q.", "é."]);
        let reserved = render(source, &[turn("user", "\u{FDD0}", None)]).err().unwrap().to_string();
        assert!(reserved.contains("reserves"), "{reserved}");
    }

    #[test]
    fn raise_exception_says_why() {
        let error = render("{{ raise_exception('roles must alternate') }}", &[]).err().unwrap().to_string();
        assert!(error.contains("roles must alternate"), "{error}");
    }
}
