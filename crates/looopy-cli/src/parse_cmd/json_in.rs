//! JSON input for `looopy parse`: each line is one JSON string, decoded without allocating.
//!
//! A line that is `"…"` with nothing special inside is its own text (the common case, found
//! with the same vectorised scan the output uses). A line with the usual escapes (`\n`, `\"`,
//! `\uXXXX`, …) is unescaped into one reused buffer. Anything else — other whitespace around
//! the string, a malformed escape, a lone surrogate, a raw control character, not a string at
//! all — goes to serde_json, which decodes it the same way or says precisely what is wrong.
//! The tests hold this module to serde_json's results.

use serde::de::{DeserializeSeed, Deserializer, Visitor};

use super::json_out::find_special;

/// Decodes a line that must be one JSON string: borrowed from the line when it has no
/// escapes, otherwise unescaped into `scratch` (cleared first, never reallocated once large
/// enough). `Ok(None)` for a blank line, which is skipped. The line is already known to be
/// UTF-8, so nothing checks that again.
pub(super) fn decode_line<'a>(
    line: &'a str,
    scratch: &'a mut String,
) -> Result<Option<&'a str>, serde_json::Error> {
    if let Some(body) = line.strip_prefix('"').and_then(|l| l.strip_suffix('"')) {
        match find_special(body.as_bytes()) {
            None => return Ok(Some(body)),
            Some(first) => {
                if unescape(body, first, scratch) {
                    return Ok(Some(scratch));
                }
            }
        }
    }
    if line.bytes().all(|b| b.is_ascii_whitespace()) {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_str(line);
    let decoded = Chunk(&mut *scratch).deserialize(&mut de)?;
    de.end()?;
    Ok(Some(match decoded {
        Decoded::Borrowed(text) => text,
        Decoded::Scratch => scratch,
    }))
}

/// Unescapes a string body whose first special byte is at `first` into `out`. False when the
/// body is not a plain valid JSON string body (serde_json then decides, and explains).
fn unescape(body: &str, first: usize, out: &mut String) -> bool {
    out.clear();
    let bytes = body.as_bytes();
    let mut at = first;
    let mut clean = 0; // start of the text not yet copied
    loop {
        // `clean` follows an escape and `at` is an ASCII byte: both are char boundaries.
        out.push_str(body.get(clean..at).unwrap_or_default());
        if bytes.get(at) != Some(&b'\\') {
            return false; // a raw control character or a quote inside the string
        }
        let Some(next) = unescape_one(bytes, at, out) else {
            return false;
        };
        clean = next;
        match bytes.get(next..).and_then(find_special) {
            Some(offset) => at = next + offset,
            None => {
                out.push_str(body.get(next..).unwrap_or_default());
                return true;
            }
        }
    }
}

/// Decodes the escape at `at` (a backslash) into `out`; returns the position after it, or
/// `None` for anything serde_json should judge (unknown escape, bad hex, lone surrogate).
fn unescape_one(bytes: &[u8], at: usize, out: &mut String) -> Option<usize> {
    let c = match bytes.get(at + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(bytes, at + 2)?;
            if (0xD800..0xDC00).contains(&high) {
                // A surrogate pair: `\uD83D\uDE00`.
                if bytes.get(at + 6..at + 8)? != b"\\u" {
                    return None;
                }
                let low = hex4(bytes, at + 8)?;
                if !(0xDC00..0xE000).contains(&low) {
                    return None;
                }
                out.push(char::from_u32(
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00),
                )?);
                return Some(at + 12);
            }
            out.push(char::from_u32(high)?); // `None` for a lone low surrogate
            return Some(at + 6);
        }
        _ => return None,
    };
    out.push(c);
    Some(at + 2)
}

/// The four hex digits at `at`, as a number.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)?
        .iter()
        .try_fold(0u32, |n, &b| Some(n * 16 + char::from(b).to_digit(16)?))
}

/// Where a chunk decoded by serde_json is.
enum Decoded<'de> {
    /// In the input line itself (no escapes).
    Borrowed(&'de str),
    /// In the scratch buffer.
    Scratch,
}

/// Deserializes a JSON string without allocating: borrowed, or into a caller's buffer.
struct Chunk<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for Chunk<'_> {
    type Value = Decoded<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Decoded<'de>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Chunk<'_> {
    type Value = Decoded<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON string")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Decoded<'de>, E> {
        Ok(Decoded::Borrowed(text))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Decoded<'de>, E> {
        self.0.clear();
        self.0.push_str(text);
        Ok(Decoded::Scratch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// serde_json's verdict on a line: the string, or that it is an error.
    fn reference(line: &str) -> Option<String> {
        if line
            .trim_matches(|c: char| c.is_ascii_whitespace())
            .is_empty()
        {
            return Some("<blank>".into());
        }
        serde_json::from_str::<String>(line).ok()
    }

    fn decoded(line: &str) -> Option<String> {
        let mut scratch = String::new();
        match decode_line(line, &mut scratch) {
            Ok(Some(text)) => Some(text.to_owned()),
            Ok(None) => Some("<blank>".into()),
            Err(_) => None,
        }
    }

    #[test]
    fn decoding_borrows_or_reuses_the_buffer_and_skips_blank_lines() {
        let mut s = String::with_capacity(64);
        let capacity = s.capacity();
        let line = r#""a\"b\n\u00e9""#;
        assert_eq!(decode_line(line, &mut s).unwrap(), Some("a\"b\né"));
        let line = " \"plain\" \r";
        let plain = decode_line(line, &mut s).unwrap().unwrap();
        assert_eq!(plain, "plain");
        assert!(std::ptr::eq(plain.as_ptr(), line[2..].as_ptr()), "borrowed");
        assert_eq!(s.capacity(), capacity);
        assert_eq!(decode_line(" \t\r", &mut s).unwrap(), None);
        assert!(decode_line("42", &mut s).is_err());
        assert!(decode_line("\"a\" \"b\"", &mut s).is_err());
        assert!(decode_line("\"\\ud800\"", &mut s).is_err());
        assert!(
            decode_line("\"\u{1}\"", &mut s).is_err(),
            "raw control character"
        );
        // The fast path takes exactly the lines serde_json would borrow, no more.
        assert_eq!(decode_line(r#""""#, &mut s).unwrap(), Some(""));
        assert_eq!(decode_line("\"é 🦀\"", &mut s).unwrap(), Some("é 🦀"));
        for bad in [
            r#"""#,
            r#""a\""#,
            r#""a"b""#,
            "\"tab\t\"",
            "\"a\n\"",
            r#"x"a""#,
        ] {
            assert!(decode_line(bad, &mut s).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn escapes_decode_as_serde_json_decodes_them() {
        for line in [
            r#""\"\\\/\b\f\n\r\t""#,
            r#""\u0041\u00e9\u4E16\uD83D\uDE00 \ud83d\ude00""#,
            r#""a\nb\nc""#,
            r#""\uD83D""#,
            r#""\uDE00""#,
            r#""\uD83Dx""#,
            r#""\uD83D\u0041""#,
            r#""\u00G0""#,
            r#""\u00e""#,
            r#""\x41""#,
            r#""\""#,
            r#""a\"#,
            r#""a\"b""#,
            " \"a\\n\" ",
            "\"a\\n\"\r",
        ] {
            assert_eq!(decoded(line), reference(line), "{line:?}");
        }
    }

    /// Pieces of JSON string bodies: text, every escape form, broken escapes and raw
    /// characters that are not allowed.
    fn body() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => "[a-z é🦀]{0,6}",
            1 => prop::sample::select(&[
                "\\n", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\r", "\\t", "\\u00e9",
                "\\u0000", "\\uD83D\\uDE00", "\\uDBFF\\uDFFF", "\\uD800", "\\uDC00", "\\u12",
                "\\uZZZZ", "\\q", "\\", "\"", "\n", "\t", "\u{1}", "\u{7f}",
            ][..])
            .prop_map(str::to_owned),
        ];
        prop::collection::vec(piece, 0..8).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn any_line_decodes_exactly_as_serde_json_decodes_it(
            body in body(),
            before in prop::sample::select(&["", " ", "\t"][..]),
            after in prop::sample::select(&["", " ", "\r"][..]),
        ) {
            let line = format!("{before}\"{body}\"{after}");
            prop_assert_eq!(decoded(&line), reference(&line), "{:?}", line);
        }

        #[test]
        fn any_string_round_trips(text in any::<String>()) {
            let line = serde_json::to_string(&text).unwrap();
            prop_assert_eq!(decoded(&line), Some(text));
        }
    }
}
