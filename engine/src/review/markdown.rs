//! The answer as HTML: markdown rendered on the server by pulldown-cmark, then sanitized by
//! ammonia, so whatever a model wrote (`<script>`, `onerror=`, `javascript:` links, iframes)
//! reaches the browser inert. LaTeX is kept verbatim as code, readable without a math engine.

use domain::review::RenderedText;
use pulldown_cmark::{html, CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};
use std::sync::OnceLock;

/// Longer texts are shown as plain text: rendering them would freeze the page.
pub const MAX_MARKDOWN_CHARS: usize = 100_000;

/// Renders `text` for the sample page.
pub fn render(text: &str) -> RenderedText {
    if text.chars().count() > MAX_MARKDOWN_CHARS {
        return RenderedText::Plain(text.to_string());
    }
    RenderedText::Html(sanitize(&to_html(text)))
}

fn to_html(text: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_MATH
        | Options::ENABLE_FOOTNOTES;
    // Math becomes code so its TeX stays exactly as written (no `_` or `*` read as emphasis).
    let events = Parser::new_ext(text, options).flat_map(|event| match event {
        Event::InlineMath(tex) => vec![Event::Code(CowStr::from(format!("${tex}$")))],
        Event::DisplayMath(tex) => vec![
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(CowStr::from("math")))),
            Event::Text(CowStr::from(format!("$${tex}$$"))),
            Event::End(TagEnd::CodeBlock),
        ],
        other => vec![other],
    });
    let mut out = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

fn sanitizer() -> &'static ammonia::Builder<'static> {
    static SANITIZER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    SANITIZER.get_or_init(|| {
        let mut builder = ammonia::Builder::default();
        builder
            // Model output must not load anything: images would leak that a reviewer opened
            // the sample, and relative URLs would hit this app with the reviewer's cookie.
            .rm_tags(["img"])
            .url_relative(ammonia::UrlRelative::Deny)
            .url_schemes(["http", "https", "mailto"].into_iter().collect())
            .link_rel(Some("noopener noreferrer nofollow"))
            .add_tag_attributes("code", ["class"])
            .add_tag_attributes("input", ["type", "checked", "disabled"])
            .add_tags(["input"])
            .attribute_filter(|element, attribute, value| match (element, attribute) {
                // Only the language classes pulldown-cmark writes, and only disabled checkboxes.
                ("code", "class") if !value.starts_with("language-") => None,
                ("input", "type") if value != "checkbox" => None,
                _ => Some(value.into()),
            });
        builder
    })
}

fn sanitize(html: &str) -> String {
    sanitizer().clean(html).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(text: &str) -> String {
        match render(text) {
            RenderedText::Html(h) => h,
            RenderedText::Plain(_) => panic!("expected html"),
        }
    }

    #[test]
    fn markdown_renders() {
        let h = html(
            "# Title\n\nSome **bold** and a [link](https://example.com).\n\n```rust\nfn main() {}\n```\n",
        );
        assert!(h.contains("<h1>Title</h1>"), "{h}");
        assert!(h.contains("<strong>bold</strong>"));
        assert!(
            h.contains(r#"<a href="https://example.com" rel="noopener noreferrer nofollow">link</a>"#),
            "{h}"
        );
        assert!(h.contains(r#"<pre><code class="language-rust">fn main() {}"#), "{h}");
    }

    #[test]
    fn script_tags_are_removed() {
        let h = html("before <script>window.__pwned=1</script> after");
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("__pwned"), "{h}");
        let h = html("<script>\nalert(1)\n</script>\n\nnext");
        assert!(!h.to_lowercase().contains("<script"), "{h}");
    }

    #[test]
    fn event_handlers_are_stripped() {
        let h = html(
            r#"<img src=x onerror="window.__pwned=1"> and <b onclick="alert(1)">bold</b> <svg onload=alert(1)>"#,
        );
        assert!(!h.contains("onerror"), "{h}");
        assert!(!h.contains("onclick"), "{h}");
        assert!(!h.contains("onload"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(!h.contains("<svg"), "{h}");
    }

    #[test]
    fn javascript_links_lose_their_target() {
        for text in [
            "[x](javascript:alert(1))",
            "<a href=\"javascript:window.__pwned=1\">x</a>",
            "<a href=\"JaVaScRiPt:alert(1)\">x</a>",
            "[x](data:text/html,<script>alert(1)</script>)",
        ] {
            let h = html(text);
            assert!(!h.to_lowercase().contains("javascript:"), "{text} → {h}");
            assert!(!h.contains("data:"), "{text} → {h}");
        }
    }

    #[test]
    fn iframes_objects_and_styles_are_removed() {
        let h = html(
            r#"<iframe src="https://evil.example"></iframe><object data="x"></object><embed src="x"><style>body{display:none}</style><form action="/x"><input type="text" name="a"></form>"#,
        );
        for tag in ["<iframe", "<object", "<embed", "<style", "<form", "type=\"text\""] {
            assert!(!h.contains(tag), "{tag} in {h}");
        }
    }

    #[test]
    fn latex_stays_readable() {
        let h = html(
            "Euler: $e^{i\\pi} + 1 = 0$ and $a_1 * b_2 * c$\n\n$$\\sum_{k=1}^n k = \\frac{n(n+1)}{2}$$\n",
        );
        assert!(h.contains("<code>$e^{i\\pi} + 1 = 0$</code>"), "{h}");
        assert!(h.contains("<code>$a_1 * b_2 * c$</code>"), "{h}");
        assert!(h.contains("$$\\sum_{k=1}^n k = \\frac{n(n+1)}{2}$$"), "{h}");
        assert!(!h.contains("<em>"), "{h}");
    }

    #[test]
    fn code_blocks_keep_their_text_escaped() {
        let h = html("```html\n<script>alert(1)</script>\n```\n");
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{h}");
    }

    #[test]
    fn very_long_texts_fall_back_to_plain_text() {
        let long = "word ".repeat(MAX_MARKDOWN_CHARS / 5 + 1);
        assert_eq!(render(&long), RenderedText::Plain(long.clone()));
        assert!(matches!(render("short"), RenderedText::Html(_)));
    }
}
