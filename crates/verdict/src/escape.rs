//! One escaping layer per output format. Every string that comes from an input (host
//! names, devices, command lines, warnings, test names, labels, profile texts, file names)
//! reaches an output only through the function of that output's format:
//!
//! | format | where | function |
//! |---|---|---|
//! | HTML, JUnit XML | every `{{ }}` of `*.html` / `*.xml` templates (tera autoescape) | [`markup`] |
//! | Markdown | every `{{ }}` of `*.md` templates (tera autoescape) | [`markdown`] |
//! | SVG text | every label of a plot (plotters escapes `<>&"'` itself) | [`svg_label`] |
//! | Prometheus | every label value | [`prometheus_label`] |
//! | file names | `inputs/NNNN-NAME.json` in a report bundle | [`file_name`] |
//! | terminal | messages and tables printed by the commands | [`terminal`] |
//!
//! tests/tests/aggregate_escaping.rs runs one hostile corpus through every format and
//! reads the results back with real parsers (a GFM renderer, an XML parser, promtool).

/// Characters XML 1.0 cannot carry at all, not even as a character reference: C0
/// controls other than tab, line feed and carriage return, and U+FFFE/U+FFFF.
fn xml_forbidden(c: char) -> bool {
    matches!(c, '\0'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// HTML and XML text and attribute values: `& < > " '` as references, characters XML
/// cannot carry replaced by U+FFFD (so JUnit files stay well-formed).
pub fn markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c if xml_forbidden(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Markdown (CommonMark and GitHub's GFM) inline text, safe in a table cell, a list item
/// or a paragraph: it can start no block (heading, list, quote, code, table row), open no
/// inline construct (link, image, emphasis, code span, strikethrough, math, raw HTML,
/// entity, autolink) and end no table cell. Every character that could is
/// backslash-escaped (CommonMark renders `\X` as `X` for any ASCII punctuation); line
/// breaks and tabs become spaces, other control characters U+FFFD. Punctuation that is
/// inert where it stands (`-` or `.` inside a word, `_` between letters) stays as it is,
/// so `node-01.example` reads as it did. GFM still renders a bare e-mail address as a
/// `mailto:` link (it does so after escapes are resolved); it can point nowhere else.
pub fn markdown(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + s.len() / 4);
    let lead_digits = chars.iter().take_while(|c| c.is_ascii_digit()).count();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        let escape = match c {
            '\n' | '\r' | '\t' => {
                out.push(' ');
                continue;
            }
            c if c.is_control() => {
                out.push('\u{fffd}');
                continue;
            }
            // Always meaningful somewhere inline.
            '\\' | '`' | '*' | '[' | ']' | '<' | '>' | '&' | '|' | '~' | '$' | '#' | '!' | '{'
            | '}' | '^' => true,
            // Emphasis unless between two letters or digits.
            '_' => {
                !(prev.is_some_and(|p| p.is_ascii_alphanumeric())
                    && next.is_some_and(|n| n.is_ascii_alphanumeric()))
            }
            // A URL autolink starts at `scheme://`.
            ':' => next == Some('/') && chars.get(i + 2) == Some(&'/'),
            // `www.` starts an autolink; `1. ` or `1) ` at the start an ordered list.
            '.' | ')' if i > 0 && i == lead_digits => next.is_none_or(|n| n == ' ' || n == '\t'),
            '.' => {
                i >= 3
                    && chars[i - 3..i].iter().all(|w| w.eq_ignore_ascii_case(&'w'))
                    && (i == 3 || !chars[i - 4].is_alphanumeric())
            }
            // At the very start, any punctuation may begin a block (`-`, `+`, `=`, `(`..).
            c if i == 0 && c.is_ascii_punctuation() => true,
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Text of an SVG plot label. plotters' SVG backend escapes `< > & " '`; this keeps
/// only characters that can never be markup or break an SVG file (`+` for a signed
/// change, `drift +7.8%`), and at most 60.
pub fn svg_label(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || " _-.:/()%=,+".contains(*c))
        .take(60)
        .collect()
}

/// A Prometheus text-format label value (between the double quotes): backslash, double
/// quote and line feed escaped as the format defines; other control characters, which a
/// line-based reader could trip on, replaced by U+FFFD.
pub fn prometheus_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A file name derived from an input's name: ASCII letters, digits, `.`, `_` and `-`
/// only (anything else becomes `_`), never empty, never starting with a dot, at most 100
/// bytes. Such a name needs no quoting in a shell, in `sha256sum` manifests (which
/// escape names holding a backslash or a line break), in Markdown or in HTML.
pub fn file_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if out.is_empty() || out.starts_with('.') {
        out.insert(0, '_');
    }
    out
}

/// Text printed to a terminal: control characters (escape sequences that could rewrite
/// the screen or the title) shown as `\u{..}`; line breaks and tabs kept.
pub fn terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `s` for display, the rest counted (`... (1234 more
/// bytes)`): a report shows names and messages, the bundle keeps the whole input.
pub fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((at, _)) => format!("{}... ({} more bytes)", &s[..at], s.len() - at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_escapes_and_drops_what_xml_cannot_hold() {
        assert_eq!(
            markup("<img src=x onerror='a&b'>\"\u{1}\u{1b}"),
            "&lt;img src=x onerror=&#x27;a&amp;b&#x27;&gt;&quot;\u{fffd}\u{fffd}"
        );
        assert_eq!(markup("tab\tnl\n"), "tab\tnl\n");
    }

    #[test]
    fn markdown_keeps_plain_names_and_escapes_syntax() {
        assert_eq!(markdown("node-01.example.com"), "node-01.example.com");
        assert_eq!(markdown("mlx5_0"), "mlx5_0");
        assert_eq!(markdown("6.1.0-18-amd64"), "6.1.0-18-amd64");
        assert_eq!(markdown("# h"), "\\# h");
        assert_eq!(markdown("- x"), "\\- x");
        assert_eq!(markdown("12. x"), "12\\. x");
        assert_eq!(markdown("a | b\nc"), "a \\| b c");
        assert_eq!(
            markdown("[x](javascript:alert(1))"),
            "\\[x\\](javascript:alert(1))"
        );
        assert_eq!(markdown("<script>"), "\\<script\\>");
        assert_eq!(markdown("_a_ *b*"), "\\_a\\_ \\*b\\*");
        assert_eq!(markdown("see https://x.org"), "see https\\://x.org");
        assert_eq!(markdown("www.x.org awww.y"), "www\\.x.org awww.y");
        assert_eq!(
            markdown("`x` $y$ ~z~ &amp;"),
            "\\`x\\` \\$y\\$ \\~z\\~ \\&amp;"
        );
        assert_eq!(markdown("\u{1b}[31m"), "\u{fffd}\\[31m");
    }

    #[test]
    fn prometheus_label_escapes_as_the_format_defines() {
        assert_eq!(
            prometheus_label("a\"b\\c\nd\re"),
            "a\\\"b\\\\c\\nd\u{fffd}e"
        );
    }

    #[test]
    fn file_names_are_plain() {
        assert_eq!(file_name("rank-1.json"), "rank-1.json");
        assert_eq!(file_name("../x\n<y>.json"), "_.._x__y_.json");
        assert_eq!(file_name(".hidden"), "_.hidden");
        assert_eq!(file_name(""), "_");
        assert_eq!(file_name(&"a".repeat(300)).len(), 100);
    }

    #[test]
    fn shorten_counts_what_it_leaves_out() {
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("abcdé", 3), "abc... (3 more bytes)");
    }

    #[test]
    fn terminal_shows_control_characters() {
        assert_eq!(
            terminal("a\u{1b}]0;pwned\u{7}b\n"),
            "a\\u{1b}]0;pwned\\u{7}b\n"
        );
    }
}
