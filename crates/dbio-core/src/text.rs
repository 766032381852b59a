//! Text read from outside (a file, a mark, a tag, the server) made safe for a terminal: the
//! characters that drive one (C0 and C1 controls such as ESC and CSI, DEL) or that reorder or
//! hide what it shows (the bidirectional overrides and isolates such as U+202E, zero-width
//! marks, U+FEFF) are written as `\u{..}`, so a label cannot clear the screen, retitle the
//! window or make `good` read as `doog`.

/// A character a terminal must not receive raw: every control character (Unicode Cc) and the
/// invisible format characters that change what is shown (Unicode Cf: bidi controls, zero
/// width characters, the byte order mark, the Arabic letter mark).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

fn escaped(text: &str, keep: impl Fn(char) -> bool, write: impl Fn(char, &mut String)) -> String {
    let mut o = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            write(c, &mut o);
        } else {
            o.push(c);
        }
    }
    o
}

fn rust_escape(c: char, o: &mut String) {
    o.extend(c.escape_unicode());
}

/// One line: every unsafe character escaped, line breaks too.
pub fn printable(text: &str) -> String {
    escaped(text, |_| false, rust_escape)
}

/// Text of several lines (a report, a table): newlines and tabs kept, the rest escaped.
pub fn printable_lines(text: &str) -> String {
    escaped(text, |c| c == '\n' || c == '\t', rust_escape)
}

/// A JSON document: unsafe characters written as JSON's own `\uXXXX` escapes, which mean the
/// same character to every JSON reader (they can only stand inside strings), so the document
/// is unchanged in meaning. Layout whitespace (newline, tab) is kept.
pub fn printable_json(text: &str) -> String {
    escaped(
        text,
        |c| c == '\n' || c == '\t',
        |c, o| {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                o.push_str(&format!("\\u{u:04x}"));
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped() {
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("good\u{202e}doog"), "good\\u{202e}doog");
        assert_eq!(printable("x\u{9b}y\u{7f}"), "x\\u{9b}y\\u{7f}");
        assert_eq!(printable("l1\nl2"), "l1\\u{a}l2");
        assert_eq!(printable_lines("l1\n\tl2\r"), "l1\n\tl2\\u{d}");
        assert_eq!(printable("µs — ok ✓"), "µs — ok ✓");
    }

    #[test]
    fn json_stays_the_same_document() {
        let doc = serde_json::json!({"label": "a\u{202e}b\u{85}c", "n": 1});
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let safe = printable_json(&text);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, doc);
    }
}
