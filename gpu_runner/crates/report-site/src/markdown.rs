//! Markdown: what a finding is written as (ready to paste into a
//! gateway's issue tracker), and its rendering into a page with
//! pulldown-cmark.
//!
//! The texts come from reports, which quote what gateways answered: raw
//! HTML in them is shown as text, never passed through.

use pulldown_cmark::{Event, Options, Parser};

/// Markdown rendered as HTML, raw HTML shown as text.
pub fn to_html(markdown: &str) -> String {
    let parser = Parser::new_ext(markdown, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(s) | Event::InlineHtml(s) => Event::Text(s),
        e => e,
    });
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut out, parser);
    out
}

/// A code span holding `s` (longer backtick fences when `s` has backticks).
pub fn code(s: &str) -> String {
    let s = s.replace('\n', " ");
    let mut fence = "`".to_string();
    while s.contains(fence.as_str()) {
        fence.push('`');
    }
    if s.starts_with('`') || s.ends_with('`') {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

/// Text for a table cell: no line breaks, `|` escaped (the scoreboard's).
pub use gateway_scoring::scoreboard::cell;

/// A fenced code block with its language.
pub fn block(lang: &str, s: &str) -> String {
    let mut fence = "```".to_string();
    while s.contains(fence.as_str()) {
        fence.push('`');
    }
    format!("{fence}{lang}\n{}\n{fence}\n", s.trim_end())
}

/// At most `max` characters of `s`, with `...` where it was cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}...")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_in_a_quoted_answer_is_shown_as_text_not_run() {
        let h = to_html("the gateway answered <script>alert(1)</script> and <|im_end|>");
        assert!(!h.contains("<script>"), "{h}");
        assert!(h.contains("&lt;script&gt;"), "{h}");
        assert!(h.contains("&lt;|im_end|&gt;"), "{h}");
    }

    #[test]
    fn tables_render_and_a_pipe_in_a_cell_stays_in_its_cell() {
        let h = to_html(&format!("| a | b |\n| --- | --- |\n| {} | 2 |\n", cell("x|y")));
        assert!(h.contains("<td>x|y</td>"), "{h}");
    }

    #[test]
    fn a_code_span_of_text_with_backticks_uses_a_longer_fence() {
        assert_eq!(code("a`b"), "``a`b``");
        assert!(to_html(&code("a`b")).contains("<code>a`b</code>"));
    }
}
