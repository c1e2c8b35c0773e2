//! Making untrusted text safe to show to a person or a model.
//!
//! Server-controlled text (stderr lines, error messages, tool descriptions in the reviewer's view)
//! can carry terminal escape sequences, bidirectional overrides, zero-width characters and
//! Unicode TAG characters that make what is displayed differ from what a model reads. Here ANSI
//! CSI/OSC sequences are removed and every other invisible or control character is replaced by a
//! visible `\u{XXXX}` marker, so nothing is hidden and nothing is silently lost.
//!
//! Pure text in, text out: it knows nothing of where the text came from or where it goes.

use std::fmt::Write as _;

/// Whether `c` is rendered invisibly or changes how surrounding text is displayed.
pub fn is_hidden(c: char) -> bool {
    let u = c as u32;
    matches!(u,
        0x00..=0x1F | 0x7F..=0x9F          // C0 and C1 controls, DEL
        | 0x200B..=0x200F                  // zero-width space/joiners, LRM, RLM
        | 0x202A..=0x202E                  // bidi embeddings and overrides
        | 0x2060..=0x2064                  // word joiner, invisible operators
        | 0x2066..=0x2069                  // bidi isolates
        | 0xFEFF                           // zero-width no-break space (BOM)
        | 0xE0000..=0xE007F                // Unicode TAG block
        | 0x180E                           // Mongolian vowel separator
        | 0xFFF9..=0xFFFB                  // interlinear annotation controls
        | 0x00AD                           // soft hyphen
        | 0x061C                           // Arabic letter mark (bidi)
        | 0x2028 | 0x2029                  // line and paragraph separators
        | 0x206A..=0x206F                  // deprecated format characters
        | 0xFE00..=0xFE0F                  // variation selectors (used to smuggle payloads)
        | 0xE0100..=0xE01EF                // variation selectors supplement
        | 0x1D173..=0x1D17A                // musical formatting controls
        | 0x034F                           // combining grapheme joiner
        | 0x115F | 0x1160 | 0x3164 | 0xFFA0 // Hangul fillers
    )
}

/// Options for [`clean`].
#[derive(Debug, Clone, Copy)]
pub struct Clean {
    /// Keep `\n` and `\t` as they are (for multi-line text shown to a reviewer).
    pub keep_newlines: bool,
    /// Maximum length of the result in bytes; longer text is cut with a marker saying how much.
    pub max_bytes: usize,
}

impl Clean {
    pub const LINE: Clean = Clean {
        keep_newlines: false,
        max_bytes: usize::MAX,
    };
    pub const TEXT: Clean = Clean {
        keep_newlines: true,
        max_bytes: usize::MAX,
    };
}

/// Returns `s` with ANSI CSI/OSC sequences removed and hidden characters made visible.
pub fn clean(s: &str, opts: Clean) -> String {
    let mut out = String::with_capacity(s.len().min(opts.max_bytes) + 16);
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if out.len() >= opts.max_bytes {
            let _ = write!(out, "…[{} more bytes cut]", s.len() - i);
            return out;
        }
        match c {
            '\u{1b}' if matches!(chars.peek(), Some((_, '['))) => {
                // CSI: ESC [ parameters intermediates final-byte (0x40..=0x7E).
                chars.next();
                for (_, c) in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            '\u{1b}' if matches!(chars.peek(), Some((_, ']'))) => {
                // OSC: ESC ] ... terminated by BEL or ESC \ (string terminator).
                chars.next();
                while let Some((_, c)) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && matches!(chars.peek(), Some((_, '\\'))) {
                        chars.next();
                        break;
                    }
                }
            }
            '\u{9b}' => {
                // The 8-bit CSI introducer.
                for (_, c) in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            '\n' | '\t' if opts.keep_newlines => out.push(c),
            c if is_hidden(c) => {
                let _ = write!(out, "\\u{{{:04X}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `s` contains anything [`clean`] would change (other than length).
pub fn needs_cleaning(s: &str) -> bool {
    s.chars().any(is_hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_nothing() {
        let cases = [
            ("plain text", "plain text"),
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("\u{1b}]0;title\u{7}after", "after"),
            ("\u{1b}]8;;http://x\u{1b}\\link", "link"),
            ("a\u{202e}b", "a\\u{202E}b"),
            ("zero\u{200b}width", "zero\\u{200B}width"),
            ("tag\u{e0041}", "tag\\u{E0041}"),
            ("c1\u{85}", "c1\\u{0085}"),
            ("nl\nt\t", "nl\\u{000A}t\\u{0009}"),
            ("\u{9b}2Jcleared", "cleared"),
            ("bom\u{feff}", "bom\\u{FEFF}"),
            ("ünïcode ok", "ünïcode ok"),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input, Clean::LINE), want, "{input:?}");
        }
        assert_eq!(clean("a\nb\tc\u{7}", Clean::TEXT), "a\nb\tc\\u{0007}");
    }

    #[test]
    fn bounds_length_and_says_so() {
        let out = clean(
            &"x".repeat(100),
            Clean {
                keep_newlines: false,
                max_bytes: 10,
            },
        );
        assert_eq!(out, "xxxxxxxxxx…[90 more bytes cut]");
    }
}
