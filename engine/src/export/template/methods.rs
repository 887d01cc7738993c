//! Python string methods and Jinja2 filters where minijinja (and minijinja-contrib's pycompat,
//! which serves the other methods) differ from CPython: whitespace is Python's (`str.isspace`,
//! which includes U+001C..U+001F), positions count characters rather than bytes, line breaks are
//! all of `str.splitlines`'s, and values join as `str()` spells them.

use super::python::{is_py_space, py_str};
use minijinja::value::{from_args, Kwargs};
use minijinja::{Error, ErrorKind, State, Value};

/// The unknown-method callback: our string methods first, then pycompat's.
pub fn call(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    if let Some(s) = value.as_str() {
        if let Some(result) = string_method(s, method, args)? {
            return Ok(result);
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    let stripped = |left, right| -> Result<Value, Error> {
        let (chars,): (Option<&str>,) = from_args(args)?;
        Ok(Value::from(strip(s, chars, left, right)))
    };
    Ok(Some(match method {
        "strip" => stripped(true, true)?,
        "lstrip" => stripped(true, false)?,
        "rstrip" => stripped(false, true)?,
        "split" => {
            let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
            split(s, sep, maxsplit.unwrap_or(-1))?
        }
        "splitlines" => {
            let (keepends,): (Option<bool>,) = from_args(args)?;
            splitlines(s, keepends.unwrap_or(false))
        }
        "find" | "rfind" | "count" => {
            let (sub, start, end): (&str, Option<i64>, Option<i64>) = from_args(args)?;
            let Some((from, to)) = char_range(s, start, end) else {
                return Ok(Some(Value::from(if method == "count" { 0 } else { -1 })));
            };
            let hay = &s[from.1..to.1];
            match method {
                "count" if sub.is_empty() => Value::from(hay.chars().count() + 1),
                "count" => Value::from(hay.matches(sub).count()),
                _ => {
                    let at = if method == "find" { hay.find(sub) } else { hay.rfind(sub) };
                    Value::from(at.map_or(-1, |b| (from.0 + hay[..b].chars().count()) as i64))
                }
            }
        }
        "join" => {
            let (items,): (&Value,) = from_args(args)?;
            let mut parts = Vec::new();
            for item in items.try_iter()? {
                match item.as_str() {
                    Some(part) => parts.push(part.to_string()),
                    None => {
                        return Err(invalid(format!(
                            "sequence item: expected str instance, {} found",
                            item.kind()
                        )))
                    }
                }
            }
            Value::from(parts.join(s))
        }
        _ => return Ok(None),
    }))
}

/// Jinja2's `trim(value, chars=None)`: `str(value).strip(chars)`.
pub fn trim_filter(value: &Value, chars: Option<String>) -> Result<Value, Error> {
    Ok(Value::from(strip(&py_str(value)?, chars.as_deref(), true, true)))
}

/// Jinja2's `join(value, d="", attribute=None)`: `str(d).join(map(str, items))`.
pub fn join_filter(value: &Value, d: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let attribute: Option<String> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    let joiner = d.as_ref().map(py_str).transpose()?.unwrap_or_default();
    let mut parts = Vec::new();
    for mut item in value.try_iter()? {
        if let Some(path) = &attribute {
            for part in path.split('.') {
                item = match part.parse::<i64>() {
                    Ok(index) => item.get_item(&Value::from(index))?,
                    Err(_) => item.get_attr(part)?,
                };
            }
        }
        parts.push(py_str(&item)?);
    }
    Ok(Value::from(parts.join(&joiner)))
}

fn strip<'a>(s: &'a str, chars: Option<&str>, left: bool, right: bool) -> &'a str {
    let strip_char = |c: char| match chars {
        Some(set) => set.contains(c),
        None => is_py_space(c),
    };
    let mut out = s;
    if left {
        out = out.trim_start_matches(strip_char);
    }
    if right {
        out = out.trim_end_matches(strip_char);
    }
    out
}

/// `str.split(sep=None, maxsplit=-1)`.
fn split(s: &str, sep: Option<&str>, maxsplit: i64) -> Result<Value, Error> {
    let parts: Vec<&str> = match sep {
        Some("") => return Err(invalid("empty separator")),
        Some(sep) if maxsplit < 0 => s.split(sep).collect(),
        Some(sep) => s.splitn(maxsplit as usize + 1, sep).collect(),
        None => {
            let mut parts = Vec::new();
            let mut rest = s.trim_start_matches(is_py_space);
            while !rest.is_empty() {
                if maxsplit >= 0 && parts.len() as i64 == maxsplit {
                    parts.push(rest);
                    break;
                }
                let end = rest.find(is_py_space).unwrap_or(rest.len());
                parts.push(&rest[..end]);
                rest = rest[end..].trim_start_matches(is_py_space);
            }
            parts
        }
    };
    Ok(parts.into_iter().map(Value::from).collect())
}

/// `str.splitlines(keepends=False)`, at every line boundary Python knows.
fn splitlines(s: &str, keepends: bool) -> Value {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().map(|&(_, n)| n) == Some('\n') => {
                chars.next();
                at + 2
            }
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => at + c.len_utf8(),
            _ => continue,
        };
        lines.push(Value::from(if keepends { &s[start..end] } else { &s[start..at] }));
        start = end;
    }
    if start < s.len() {
        lines.push(Value::from(&s[start..]));
    }
    Value::from(lines)
}

/// Python's `start`/`end` arguments as (char index, byte offset) pairs, or `None` when `start`
/// lies past the end (where `find` answers -1 even for an empty needle).
fn char_range(s: &str, start: Option<i64>, end: Option<i64>) -> Option<((usize, usize), (usize, usize))> {
    let len = s.chars().count() as i64;
    let clamp = |i: i64| if i < 0 { (i + len).max(0) } else { i.min(len) };
    let from = start.map_or(0, clamp);
    if start.is_some_and(|i| i > len) {
        return None;
    }
    let to = end.map_or(len, clamp).max(from);
    let byte = |char_index: i64| s.char_indices().nth(char_index as usize).map_or(s.len(), |(b, _)| b);
    Some(((from as usize, byte(from)), (to as usize, byte(to))))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(s: &str, name: &str, args: &[Value]) -> Value {
        string_method(s, name, args).unwrap().unwrap()
    }

    #[test]
    fn string_methods_answer_as_python() {
        assert_eq!(method("\x1f a \u{a0}", "strip", &[]).as_str(), Some("a"));
        assert_eq!(method("xxaxx", "lstrip", &[Value::from("x")]).as_str(), Some("axx"));
        assert_eq!(method("  a b  c  ", "split", &[]).to_string(), r#"["a", "b", "c"]"#);
        let limited = method("  a b  c  ", "split", &[Value::from(()), Value::from(1)]);
        assert_eq!(limited.to_string(), r#"["a", "b  c  "]"#);
        assert_eq!(method("a,b,", "split", &[Value::from(",")]).to_string(), r#"["a", "b", ""]"#);
        assert_eq!(method("a\r\nb\u{2028}c\n", "splitlines", &[]).to_string(), r#"["a", "b", "c"]"#);
        assert_eq!(method("héllo", "find", &[Value::from("l")]).as_i64(), Some(2));
        assert_eq!(method("héllo", "rfind", &[Value::from("l")]).as_i64(), Some(3));
        assert_eq!(method("abc", "find", &[Value::from(""), Value::from(5)]).as_i64(), Some(-1));
        assert_eq!(method("abc", "count", &[Value::from("")]).as_i64(), Some(4));
        assert!(string_method("-", "join", &[Value::from(vec![Value::from(1)])]).is_err());
    }
}
