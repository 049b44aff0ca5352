//! Incremental decoding of XML character references in attribute values, so an entity split
//! across chunks (`&qu` + `ot;`) decodes the same as a whole one.

/// Longest reference kept pending: `&#x10FFFF;` is 10 bytes; a little slack for leading zeros.
const MAX_PENDING: usize = 12;

/// Decodes `&quot; &apos; &amp; &lt; &gt;`, `&#NNN;` and `&#xHHH;`; anything else that starts
/// with `&` is passed through literally.
#[derive(Debug, Clone, Default)]
pub(crate) struct EntityDecoder {
    pending: [u8; MAX_PENDING],
    len: usize,
}

impl EntityDecoder {
    /// Decodes `s` onto `out`, keeping an unfinished reference pending for the next call.
    pub(crate) fn feed(&mut self, s: &str, out: &mut String) {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if self.len > 0 {
                let b = bytes[i];
                if b == b';' {
                    self.resolve(out);
                    i += 1;
                } else if (b.is_ascii_alphanumeric() || b == b'#') && self.len < MAX_PENDING - 1 {
                    self.pending[self.len] = b;
                    self.len += 1;
                    i += 1;
                } else {
                    // Not a reference after all: the pending bytes are literal text, and `b`
                    // (possibly another `&`) is looked at again.
                    self.flush(out);
                }
                continue;
            }
            match super::bytes::find_byte(b'&', &bytes[i..]) {
                Some(off) => {
                    out.push_str(&s[i..i + off]);
                    self.pending[0] = b'&';
                    self.len = 1;
                    i += off + 1;
                }
                None => {
                    out.push_str(&s[i..]);
                    break;
                }
            }
        }
    }

    /// True when no partial reference is pending.
    pub(crate) fn is_idle(&self) -> bool {
        self.len == 0
    }

    /// Writes a pending partial reference out literally (end of the value).
    pub(crate) fn flush(&mut self, out: &mut String) {
        // Pending bytes are ASCII by construction.
        out.extend(self.pending[..self.len].iter().map(|b| char::from(*b)));
        self.len = 0;
    }

    /// Forgets any pending bytes.
    pub(crate) fn reset(&mut self) {
        self.len = 0;
    }

    fn resolve(&mut self, out: &mut String) {
        match decode(&self.pending[1..self.len]) {
            Some(c) => {
                out.push(c);
                self.len = 0;
            }
            None => {
                self.flush(out);
                out.push(';');
            }
        }
    }
}

fn decode(name: &[u8]) -> Option<char> {
    let code = match name {
        b"quot" => return Some('"'),
        b"apos" => return Some('\''),
        b"amp" => return Some('&'),
        b"lt" => return Some('<'),
        b"gt" => return Some('>'),
        [b'#', b'x' | b'X', hex @ ..] => parse_radix(hex, 16)?,
        [b'#', dec @ ..] => parse_radix(dec, 10)?,
        _ => return None,
    };
    char::from_u32(code).filter(|c| *c != '\0')
}

fn parse_radix(digits: &[u8], radix: u32) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |acc, b| {
        let d = char::from(*b).to_digit(radix)?;
        acc.checked_mul(radix)?.checked_add(d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_chunks(chunks: &[&str]) -> String {
        let mut d = EntityDecoder::default();
        let mut out = String::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        d.flush(&mut out);
        out
    }

    #[test]
    fn named_and_numeric_references() {
        assert_eq!(
            decode_chunks(&["&quot;a&apos;&amp;&lt;b&gt; &#65;&#x42;&#X43;"]),
            "\"a'&<b> ABC"
        );
    }

    #[test]
    fn references_split_across_chunks() {
        assert_eq!(decode_chunks(&["x &qu", "ot", ";y"]), "x \"y");
        assert_eq!(decode_chunks(&["&", "#x1F600;"]), "\u{1F600}");
    }

    #[test]
    fn unknown_or_broken_references_stay_literal() {
        assert_eq!(decode_chunks(&["a & b"]), "a & b");
        assert_eq!(decode_chunks(&["&nbsp;"]), "&nbsp;");
        assert_eq!(decode_chunks(&["&;"]), "&;");
        assert_eq!(
            decode_chunks(&["&#0;&#xD800;&#99999999999;"]),
            "&#0;&#xD800;&#99999999999;"
        );
        assert_eq!(decode_chunks(&["&&amp;"]), "&&");
        assert_eq!(decode_chunks(&["&am"]), "&am");
        assert_eq!(decode_chunks(&["&ampé"]), "&ampé");
        assert_eq!(
            decode_chunks(&["&aaaaaaaaaaaaaaaaaaaa;"]),
            "&aaaaaaaaaaaaaaaaaaaa;"
        );
    }
}
