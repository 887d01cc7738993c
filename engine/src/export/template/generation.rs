//! `{% generation %}…{% endgeneration %}` blocks, which transformers' chat-template sandbox
//! defines (its `AssistantTracker` extension) and minijinja does not know.
//!
//! In transformers the block renders its body unchanged and records where that output lies;
//! `return_assistant_tokens_mask` marks the tokens inside. Here each tag is rewritten, before the
//! template is parsed, into a `with` scope (a caller body in Jinja2 is a scope of its own: a
//! `set` inside does not leak) that prints a marker character — U+FDD0 where the block opens,
//! U+FDD1 where it closes. Both are Unicode noncharacters; a template or conversation that
//! contains them is refused, so every marker in the output is one of ours. After rendering, the
//! markers are taken out and their positions are the blocks' spans.
//!
//! The rewrite keeps the tags' whitespace control: the first tag of the replacement carries the
//! original's opening `-`/`+`, the last one its closing `-`/`+`, so `lstrip_blocks`, `trim_blocks`
//! and `{%-`/`-%}` act on the surrounding text exactly as on the original tag.
//!
//! transformers records a block's start as the length of the output yielded so far, which is
//! right only where Jinja2 yields straight to the caller. Inside a macro, a call or filter block,
//! a block `set` or a recursive loop its output is buffered and the recorded spans are wrong;
//! blocks there, and nested blocks, are refused rather than masked differently.

use super::tags::{self, Tag};
use std::ops::Range;

pub const OPEN: char = '\u{FDD0}';
pub const CLOSE: char = '\u{FDD1}';

/// The template with its generation tags rewritten, or `None` if it has none.
pub fn rewrite(source: &str) -> Result<Option<String>, String> {
    let tags = generation_tags(source)?;
    if tags.is_empty() {
        return Ok(None);
    }
    for marker in [OPEN, CLOSE] {
        let escaped = format!("\\u{:x}", marker as u32);
        if source.contains(marker) || source.to_ascii_lowercase().contains(&escaped) {
            return Err(format!(
                "the template contains U+{:X}, which the exporter reserves to find its {{% generation %}} blocks",
                marker as u32
            ));
        }
    }
    let mut out = String::with_capacity(source.len() + tags.len() * 40);
    let mut at = 0;
    for tag in &tags {
        out.push_str(&source[at..tag.span.start]);
        let (scope, marker) = if tag.name == "generation" { ("with", OPEN) } else { ("endwith", CLOSE) };
        out.push_str(&format!(
            "{{%{} {scope} %}}{{{{ \"{marker}\" }}}}{{% {scope} {}%}}",
            tag.start_ws.map(String::from).unwrap_or_default(),
            tag.end_ws.map(String::from).unwrap_or_default(),
        ));
        at = tag.span.end;
    }
    out.push_str(&source[at..]);
    Ok(Some(out))
}

/// Whether a rendered text could be confused with the markers.
pub fn contains_marker(text: &str) -> bool {
    text.contains([OPEN, CLOSE])
}

/// Takes the markers out of a render: the text and the byte ranges of its blocks, in order.
pub fn extract(rendered: &str) -> Result<(String, Vec<Range<usize>>), String> {
    let mut text = String::with_capacity(rendered.len());
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    for c in rendered.chars() {
        match (c, open) {
            (OPEN, None) => open = Some(text.len()),
            (CLOSE, Some(start)) => {
                spans.push(start..text.len());
                open = None;
            }
            (OPEN | CLOSE, _) => {
                return Err("the template's {% generation %} blocks render out of order (a block \
                            inside another, or output captured and moved)"
                    .into())
            }
            (c, _) => text.push(c),
        }
    }
    if open.is_some() {
        return Err("a {% generation %} block was opened and never closed in the render".into());
    }
    Ok((text, spans))
}

/// Block constructs whose output Jinja2 buffers instead of yielding.
const BUFFERING: [&str; 6] = ["macro", "call", "filter", "set", "for recursive", "generation"];

/// The generation tags, checked: no arguments, balanced, and not where Jinja2 buffers output.
fn generation_tags(source: &str) -> Result<Vec<Tag<'_>>, String> {
    let mut found = Vec::new();
    let mut open = false;
    for tag in tags::scan(source)? {
        match tag.name {
            "generation" | "endgeneration" if !tag.args.is_empty() => {
                return Err(format!("{{% {} %}} takes no arguments (found `{}`)", tag.name, tag.args));
            }
            "generation" => {
                if let Some(outer) = tag.enclosing.iter().find(|b| BUFFERING.contains(&b.as_str())) {
                    return Err(format!(
                        "a {{% generation %}} block inside a {outer} block: transformers records wrong \
                         positions for it, so its mask cannot be reproduced"
                    ));
                }
                open = true;
                found.push(tag);
            }
            "endgeneration" if open => {
                open = false;
                found.push(tag);
            }
            "endgeneration" => return Err("{% endgeneration %} without a matching {% generation %}".into()),
            _ => {}
        }
    }
    if open {
        return Err("a {% generation %} block is never closed".into());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_tags_keeping_whitespace_control() {
        let source = "{% for m in messages %}{%- generation -%}\n{{ m }}{%+ endgeneration %}{% endfor %}";
        let out = rewrite(source).unwrap().unwrap();
        assert_eq!(
            out,
            "{% for m in messages %}{%- with %}{{ \"\u{FDD0}\" }}{% with -%}\n{{ m }}\
             {%+ endwith %}{{ \"\u{FDD1}\" }}{% endwith %}{% endfor %}"
        );
        assert_eq!(
            rewrite("{{ 'no generation here' }}{% if add_generation_prompt %}{% endif %}").unwrap(),
            None
        );
        // Not tags: a string, a comment, a raw block.
        let quoted = "{{ '{% generation %}' }}{# {% generation %} #}{% raw %}{% generation %}{% endraw %}";
        assert_eq!(rewrite(quoted).unwrap(), None);
    }

    #[test]
    fn refuses_blocks_transformers_cannot_place() {
        for source in [
            "{% macro m() %}{% generation %}x{% endgeneration %}{% endmacro %}",
            "{% set x %}{% generation %}x{% endgeneration %}{% endset %}",
            "{% filter upper %}{% generation %}x{% endgeneration %}{% endfilter %}",
            "{% generation %}{% generation %}x{% endgeneration %}{% endgeneration %}",
            "{% generation %}never closed",
            "{% generation x %}{% endgeneration %}",
            "{{ '\u{FDD0}' }}{% generation %}{% endgeneration %}",
        ] {
            assert!(rewrite(source).is_err(), "{source}");
        }
        // A plain `set` and a finished macro do not enclose anything.
        let fine = "{% set x = 1 %}{% macro m() %}{% endmacro %}{% generation %}x{% endgeneration %}";
        assert!(rewrite(fine).unwrap().is_some());
    }

    #[test]
    fn markers_become_spans() {
        let (text, spans) = extract("a\u{FDD0}bc\u{FDD1}d\u{FDD0}\u{FDD1}é").unwrap();
        assert_eq!(text, "abcdé");
        assert_eq!(spans, [1..3, 4..4]);
        assert!(extract("\u{FDD0}\u{FDD0}").is_err());
        assert!(extract("\u{FDD1}").is_err());
        assert!(extract("\u{FDD0}").is_err());
    }
}
