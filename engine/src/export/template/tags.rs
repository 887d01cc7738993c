//! The block tags of a template source (`{% name args %}`), found by a small lexer that skips
//! comments, `raw` blocks and the inside of expressions, and knows which blocks enclose each tag.
//! It serves two checks before minijinja parses the template: that every tag is one transformers'
//! sandbox knows, and where `{% generation %}` blocks stand.

use std::ops::Range;

pub struct Tag<'a> {
    pub span: Range<usize>,
    pub name: &'a str,
    pub args: &'a str,
    /// The whitespace-control signs just inside `{%` and `%}`.
    pub start_ws: Option<char>,
    pub end_ws: Option<char>,
    /// The blocks this tag stands in, outermost first (`for recursive` and a capturing `set`
    /// named as such).
    pub enclosing: Vec<String>,
}

/// Jinja2's own tags, loop controls and `generation`: what transformers' sandbox parses
/// (`ImmutableSandboxedEnvironment` with `loopcontrols` and its `AssistantTracker`). minijinja
/// also knows `do`, which would load here and fail there.
const KNOWN: [&str; 30] = [
    "for",
    "endfor",
    "if",
    "elif",
    "else",
    "endif",
    "macro",
    "endmacro",
    "call",
    "endcall",
    "filter",
    "endfilter",
    "set",
    "endset",
    "with",
    "endwith",
    "block",
    "endblock",
    "extends",
    "include",
    "import",
    "from",
    "autoescape",
    "endautoescape",
    "raw",
    "endraw",
    "break",
    "continue",
    "generation",
    "endgeneration",
];

/// The first tag transformers would not parse, if any.
pub fn unknown(tags: &[Tag]) -> Option<String> {
    tags.iter().find(|t| !KNOWN.contains(&t.name)).map(|t| t.name.to_string())
}

pub fn scan(source: &str) -> Result<Vec<Tag<'_>>, String> {
    let bytes = source.as_bytes();
    let mut tags = Vec::new();
    let mut open_blocks: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(found) = source[i..].find('{') {
        let start = i + found;
        match bytes.get(start + 1) {
            Some(b'#') => {
                i = match source[start + 2..].find("#}") {
                    Some(end) => start + 2 + end + 2,
                    None => return Err("the template has a comment that is never closed".into()),
                };
            }
            Some(b'{') => i = expression_end(source, start + 2, "}}")?,
            Some(b'%') => {
                let end = expression_end(source, start + 2, "%}")?;
                let inner = &source[start + 2..end - 2];
                let start_ws = inner.chars().next().filter(|c| matches!(c, '-' | '+'));
                let end_ws = inner.chars().last().filter(|c| matches!(c, '-' | '+'));
                let body = inner.trim_start_matches(['-', '+']).trim_end_matches(['-', '+']).trim();
                let name = body.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("");
                let args = body[name.len()..].trim();
                tags.push(Tag {
                    span: start..end,
                    name,
                    args,
                    start_ws,
                    end_ws,
                    enclosing: open_blocks.clone(),
                });
                i = end;
                match name {
                    "raw" => i = raw_end(source, end)?,
                    "for" if args.split_whitespace().last() == Some("recursive") => {
                        open_blocks.push("for recursive".into())
                    }
                    // `{% set x %}…{% endset %}` captures; `{% set x = … %}` does not.
                    "set" if !has_top_level_assign(args) => open_blocks.push("set".into()),
                    "for" | "if" | "macro" | "call" | "filter" | "with" | "block" | "autoescape"
                    | "generation" => open_blocks.push(name.into()),
                    n if n.starts_with("end") => {
                        let opener = &n[3..];
                        if let Some(at) =
                            open_blocks.iter().rposition(|b| b.split(' ').next() == Some(opener))
                        {
                            open_blocks.truncate(at);
                        }
                    }
                    _ => {}
                }
            }
            _ => i = start + 1,
        }
    }
    Ok(tags)
}

/// The index just past `close`, from `from` inside a tag, outside string literals and brackets.
fn expression_end(source: &str, from: usize, close: &str) -> Result<usize, String> {
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' if depth > 0 => depth -= 1,
            _ if depth == 0 && source[i..].starts_with(close) => return Ok(i + close.len()),
            _ => {}
        }
        i += 1;
    }
    Err(format!("the template has a tag that is never closed (no `{close}`)"))
}

/// The index just past the `{% endraw %}` that closes a raw block.
fn raw_end(source: &str, from: usize) -> Result<usize, String> {
    let mut i = from;
    while let Some(found) = source[i..].find("{%") {
        let start = i + found;
        let end = expression_end(source, start + 2, "%}")?;
        let inner = source[start + 2..end - 2].trim_matches(['-', '+']).trim();
        if inner == "endraw" {
            return Ok(end);
        }
        i = end;
    }
    Err("the template has a {% raw %} block that is never closed".into())
}

/// Whether a `set` tag's arguments assign (`x = …`, `ns.x = …`) rather than open a block.
fn has_top_level_assign(args: &str) -> bool {
    let bytes = args.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'=' if depth == 0 && bytes.get(i + 1) != Some(&b'=') => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tags_and_what_encloses_them() {
        let source = "{# {% no %} #}{{ '{% no %}' }}{% raw %}{% no %}{% endraw %}\
                      {% for m in xs recursive %}{% set y %}{% if a %}{%- break -%}{% endif %}{% endset %}{% endfor %}";
        let tags = scan(source).unwrap();
        let names: Vec<&str> = tags.iter().map(|t| t.name).collect();
        assert_eq!(names, ["raw", "for", "set", "if", "break", "endif", "endset", "endfor"]);
        let brk = &tags[4];
        assert_eq!(brk.enclosing, ["for recursive", "set", "if"]);
        assert_eq!((brk.start_ws, brk.end_ws), (Some('-'), Some('-')));
        assert_eq!(unknown(&tags), None);
        assert_eq!(unknown(&scan("{% do x %}").unwrap()).as_deref(), Some("do"));
    }
}
