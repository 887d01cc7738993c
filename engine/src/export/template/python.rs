//! Python's spelling of template values, where transformers' Jinja2 and minijinja differ:
//! `json.dumps` (transformers' own `tojson` filter) and `str()` (what `{{ value }}` prints,
//! what `|string` and `|join` produce).
//!
//! Both follow CPython 3: floats in their shortest round-trip form (`1e+16`, `1.5e-07`, `0.5`),
//! `None`/`True`/`False`, dict keys in insertion order, strings in `repr` inside containers.

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`:
/// `json.dumps` with those arguments, positional or named.
pub fn tojson_filter(value: &Value, positional: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    const NAMES: [&str; 4] = ["ensure_ascii", "indent", "separators", "sort_keys"];
    if positional.len() > NAMES.len() {
        return Err(invalid("tojson takes at most 4 arguments after the value"));
    }
    let mut args: [Option<Value>; 4] = Default::default();
    for (slot, value) in args.iter_mut().zip(positional.iter()) {
        *slot = Some(value.clone());
    }
    for (slot, name) in args.iter_mut().zip(NAMES) {
        if let Some(value) = kwargs.get::<Option<Value>>(name)? {
            if slot.is_some() {
                return Err(invalid(format!("tojson got multiple values for argument '{name}'")));
            }
            *slot = Some(value);
        }
    }
    kwargs.assert_all_used()?;
    let [ensure_ascii, indent, separators, sort_keys] = args;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) if v.is_integer() => Some(" ".repeat(v.as_i64().unwrap_or(0).max(0) as usize)),
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => return Err(invalid("tojson: indent must be an integer or a string")),
        },
    };
    let (item, key) = match separators.filter(|s| !s.is_none()) {
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
        Some(s) => {
            let parts: Vec<Value> = s.try_iter()?.collect();
            match (parts.first().and_then(Value::as_str), parts.get(1).and_then(Value::as_str)) {
                (Some(a), Some(b)) if parts.len() == 2 => (a.to_string(), b.to_string()),
                _ => return Err(invalid("tojson: separators must be two strings")),
            }
        }
    };
    let options = JsonOptions {
        ensure_ascii: ensure_ascii.is_some_and(|v| v.is_true()),
        indent,
        item_separator: item,
        key_separator: key,
        sort_keys: sort_keys.is_some_and(|v| v.is_true()),
    };
    let mut out = String::new();
    dump(value, &options, 0, &mut out)?;
    Ok(Value::from(out))
}

struct JsonOptions {
    ensure_ascii: bool,
    indent: Option<String>,
    item_separator: String,
    key_separator: String,
    sort_keys: bool,
}

fn dump(value: &Value, options: &JsonOptions, level: usize, out: &mut String) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&json_number(value)?),
        ValueKind::String => json_string(value.as_str().unwrap_or_default(), options.ensure_ascii, out),
        ValueKind::Seq => {
            let items: Vec<Value> = value.try_iter()?.collect();
            container(out, options, level, '[', ']', items.len(), |i, level, out| {
                dump(&items[i], options, level, out)
            })?;
        }
        ValueKind::Map => {
            let mut pairs = map_pairs(value)?;
            if options.sort_keys {
                sort_by_key(&mut pairs)?;
            }
            container(out, options, level, '{', '}', pairs.len(), |i, level, out| {
                json_key(&pairs[i].0, options.ensure_ascii, out)?;
                out.push_str(&options.key_separator);
                dump(&pairs[i].1, options, level, out)
            })?;
        }
        kind => return Err(invalid(format!("Object of type {kind} is not JSON serializable"))),
    }
    Ok(())
}

/// `[`/`{`, the items (each on its own line when indenting, as `json.dumps` lays them out), `]`/`}`.
fn container(
    out: &mut String,
    options: &JsonOptions,
    level: usize,
    open: char,
    close: char,
    len: usize,
    mut item: impl FnMut(usize, usize, &mut String) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if len == 0 {
        out.push(close);
        return Ok(());
    }
    let newline = options.indent.as_ref().map(|unit| format!("\n{}", unit.repeat(level + 1)));
    if let Some(nl) = &newline {
        out.push_str(nl);
    }
    for i in 0..len {
        if i > 0 {
            out.push_str(&options.item_separator);
            if let Some(nl) = &newline {
                out.push_str(nl);
            }
        }
        item(i, level + 1, out)?;
    }
    if let Some(unit) = &options.indent {
        out.push('\n');
        out.push_str(&unit.repeat(level));
    }
    out.push(close);
    Ok(())
}

fn map_pairs(value: &Value) -> Result<Vec<(Value, Value)>, Error> {
    let mut pairs = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        pairs.push((key, item));
    }
    Ok(pairs)
}

/// `sort_keys=True` sorts the keys as Python compares them: all strings or all numbers.
fn sort_by_key(pairs: &mut [(Value, Value)]) -> Result<(), Error> {
    if pairs.iter().all(|(k, _)| k.kind() == ValueKind::String) {
        pairs.sort_by(|a, b| a.0.as_str().cmp(&b.0.as_str()));
    } else if pairs.iter().all(|(k, _)| k.kind() == ValueKind::Number) {
        pairs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    } else {
        return Err(invalid("tojson: sort_keys cannot order keys of different types"));
    }
    Ok(())
}

/// Keys become strings the way `json.dumps` converts them.
fn json_key(key: &Value, ensure_ascii: bool, out: &mut String) -> Result<(), Error> {
    let text = match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).to_string(),
        ValueKind::None => "null".to_string(),
        ValueKind::Number => json_number(key)?,
        kind => return Err(invalid(format!("keys must be str, int, float, bool or None, not {kind}"))),
    };
    json_string(&text, ensure_ascii, out);
    Ok(())
}

fn json_number(value: &Value) -> Result<String, Error> {
    if value.is_integer() {
        return Ok(value.to_string());
    }
    let f = f64::try_from(value.clone())?;
    Ok(if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        (if f > 0.0 { "Infinity" } else { "-Infinity" }).to_string()
    } else {
        float_repr(f)
    })
}

/// `json.dumps` string escaping: `"`, `\` and control characters always; with `ensure_ascii`,
/// everything outside printable ASCII as `\uXXXX` (surrogate pairs above U+FFFF).
fn json_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// CPython's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in [-4, 16), else scientific with a signed two-digit exponent.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return (if f > 0.0 { "inf" } else { "-inf" }).into();
    }
    if f == 0.0 {
        return (if f.is_sign_negative() { "-0.0" } else { "0.0" }).into();
    }
    // Rust's `{:e}` also prints the shortest round-trip digits: "-1.2345e-7".
    let formatted = format!("{f:e}");
    let (mantissa, exponent) = formatted.split_once('e').expect("`{:e}` has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let body = if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let point = exponent as usize + 1;
            if digits.len() > point {
                format!("{}.{}", &digits[..point], &digits[point..])
            } else {
                format!("{digits}{}.0", "0".repeat(point - digits.len()))
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exponent - 1) as usize))
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{first}{fraction}e{exp_sign}{:02}", exponent.abs())
    };
    format!("{sign}{body}")
}

/// Python's `str(value)`, as Jinja2 prints a value; undefined prints nothing.
pub fn py_str(value: &Value) -> Result<String, Error> {
    match value.kind() {
        ValueKind::Undefined => Ok(String::new()),
        ValueKind::String => Ok(value.as_str().unwrap_or_default().to_string()),
        _ => py_repr(value),
    }
}

/// Python's `repr(value)` for the JSON-like values templates hold.
fn py_repr(value: &Value) -> Result<String, Error> {
    Ok(match value.kind() {
        ValueKind::None => "None".into(),
        ValueKind::Bool => (if value.is_true() { "True" } else { "False" }).into(),
        ValueKind::Number if value.is_integer() => value.to_string(),
        ValueKind::Number => float_repr(f64::try_from(value.clone())?),
        ValueKind::String => string_repr(value.as_str().unwrap_or_default()),
        ValueKind::Seq => {
            let items: Result<Vec<String>, Error> = value.try_iter()?.map(|v| py_repr(&v)).collect();
            format!("[{}]", items?.join(", "))
        }
        ValueKind::Map => {
            let mut items = Vec::new();
            for (k, v) in map_pairs(value)? {
                items.push(format!("{}: {}", py_repr(&k)?, py_repr(&v)?));
            }
            format!("{{{}}}", items.join(", "))
        }
        kind => {
            return Err(invalid(format!("cannot print a value of type {kind} the way Python would")));
        }
    })
}

/// CPython's `repr(str)`: single quotes unless the text has `'` and no `"`; escapes for the
/// backslash, the quote, `\t\n\r`, and characters Python does not consider printable.
fn string_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            c if c == quote || c == '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_ascii() || is_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// `str.isprintable()` for non-ASCII characters: false for controls, separators other than the
/// space, format characters and private use. Unassigned code points, which Python also escapes,
/// are not known here and print as themselves.
fn is_printable(c: char) -> bool {
    !matches!(c as u32,
        0x80..=0xA0 | 0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2
        | 0x1680 | 0x180E | 0x2000..=0x200F | 0x2028..=0x202F | 0x205F..=0x2064 | 0x2066..=0x206F
        | 0x3000 | 0xD800..=0xF8FF | 0xFDD0..=0xFDEF | 0xFEFF | 0xFFF9..=0xFFFB | 0xFFFE..=0xFFFF
        | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0001 | 0xE0020..=0xE007F | 0xF0000..=0x10FFFF)
}

/// Python's whitespace (`str.isspace`): Unicode White_Space plus the information separators
/// U+001C..U+001F, which `str.strip()` and `str.split()` also treat as whitespace.
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (0.5, "0.5"),
            (100.0, "100.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1e20, "1e+20"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-0.0, "-0.0"),
            (123456789.125, "123456789.125"),
            (1.2345678901234567e300, "1.2345678901234567e+300"),
            (-2.5, "-2.5"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "{f:e}");
        }
    }

    #[test]
    fn strings_repr_like_python() {
        assert_eq!(string_repr("a"), "'a'");
        assert_eq!(string_repr("it's"), "\"it's\"");
        assert_eq!(string_repr("'\""), "'\\'\"'");
        assert_eq!(string_repr("tab\tnl\n\u{1}é😀\u{a0}"), "'tab\\tnl\\n\\x01é😀\\xa0'");
    }
}
