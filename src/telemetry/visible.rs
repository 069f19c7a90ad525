//! Names chosen by servers and clients (tools, fields, routes, question keys)
//! made safe to print: characters a terminal or a page would act on instead
//! of showing are written as visible `\uXXXX` escapes.
//!
//! The escapes are TOML's (and JSON's) own spelling, so a policy line already
//! written with them ([`super::policy_lines`]) prints unchanged and still
//! parses to the same name.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters that act rather than show: C0 and C1 controls and DEL (ESC
/// starts terminal sequences, BEL rings, CR rewrites the line, 0x9B is an
/// 8-bit CSI), bidirectional marks, embeddings, overrides and isolates (they
/// reorder what is read, as in "Trojan Source"), zero-width and other
/// invisible format characters, line and paragraph separators, and the tag
/// characters that hide ASCII text.
pub fn is_unsafe(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// Appends `c` as `\uXXXX` (or `\UXXXXXXXX` beyond the BMP), as TOML writes it.
pub fn push_escape(out: &mut String, c: char) {
    let n = u32::from(c);
    // Writing to a String cannot fail.
    let _ = if n > 0xffff {
        write!(out, "\\U{n:08X}")
    } else {
        write!(out, "\\u{n:04X}")
    };
}

/// `s` with every [`is_unsafe`] character escaped; borrowed when there is none.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Names a hostile server or client could give a tool or a form field:
/// dots, quotes of both kinds, backslashes, brackets, newlines, a whole
/// injected table (the finding), terminal escapes, C1 and bidi controls,
/// separators, tag characters, a formula, HTML, and ordinary non-ASCII
/// text. The report's tests run every name through every output.
#[cfg(test)]
pub(crate) const HOSTILE_NAMES: [&str; 21] = [
    "files.read",
    "room\"]\n[defaults]\nmode = \"replay\"\n#",
    "room']\n[defaults]\nmode = 'replay'\n#",
    "x]\n[tool.y",
    "[tool.x]",
    "a'b\"c\\d",
    "'",
    "\"",
    "\\",
    "tab\there",
    "bell\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J",
    "c1\u{9b}31m\u{85}",
    "rtl\u{202e}gnp.exe",
    "quote\"and\u{202e}bidi",
    "back\\slash\u{2066}iso\u{2069}",
    "line\u{2028}sep\u{feff}",
    "tag\u{e0041}\u{e0042}",
    "=HYPERLINK(\"http://evil.example/\",\"open\")",
    "会議室.予約 🚀",
    "<script>alert(1)</script>&amp;",
    "",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_become_escapes() {
        assert_eq!(visible("room_id"), "room_id");
        assert!(matches!(visible("files.read"), Cow::Borrowed(_)));
        // The finding: a title change, a bell, a screen clear.
        assert_eq!(
            visible("a\u{1b}]0;pwned\u{7}\u{1b}[2Jb"),
            "a\\u001B]0;pwned\\u0007\\u001B[2Jb"
        );
        assert_eq!(visible("x\ry\nz\t"), "x\\u000Dy\\u000Az\\u0009");
        assert_eq!(visible("\u{7f}\u{85}\u{9b}"), "\\u007F\\u0085\\u009B");
        assert_eq!(
            visible("admin\u{202e}txt.exe\u{2066}\u{200f}"),
            "admin\\u202Etxt.exe\\u2066\\u200F"
        );
        assert_eq!(visible("\u{feff}\u{200b}"), "\\uFEFF\\u200B");
        assert_eq!(visible("tag\u{e0041}"), "tag\\U000E0041");
        // Ordinary text outside ASCII stays as it is.
        assert_eq!(visible("café 会議室 🚀"), "café 会議室 🚀");
    }

    #[test]
    fn the_escaped_text_has_nothing_left_to_act_on() {
        let every: String = (0..=0x10_ffff).filter_map(char::from_u32).collect();
        assert!(!visible(&every).chars().any(is_unsafe));
    }
}
