//! Tag-name scanning: decides byte by byte whether the text after a `<` can still become a
//! configured tag name, so text that cannot is released at once instead of waiting for a `>`.

use super::bytes::byte_set;

/// Bytes allowed in tag and attribute names (an ASCII subset of XML name characters).
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.')
}

/// XML whitespace.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0C)
}

/// The configured tag names, sorted so that the names sharing a prefix form a contiguous range
/// that narrows as bytes arrive. Matching is exact (case-sensitive): capitalised type names in
/// code (`Vec<Thought>`, `Box<Strategy>`) must stay text, and models write these tags lowercase.
#[derive(Debug, Clone)]
pub(crate) struct TagNames {
    names: Vec<String>,
    longest: usize,
    /// First bytes of the names: after `<`, any other byte means text, decided at once.
    leads: u128,
}

/// Progress of a name match: the candidates are `lo..hi`, all sharing the first `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NameMatch {
    lo: usize,
    hi: usize,
    len: usize,
}

impl NameMatch {
    /// Bytes matched so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl TagNames {
    /// Normalises `tags`: drops names that could never match (warning about them) and
    /// duplicates.
    pub(crate) fn new(tags: &[String]) -> Self {
        let mut names: Vec<String> = Vec::with_capacity(tags.len());
        for tag in tags {
            let bytes = tag.as_bytes();
            let valid = bytes
                .first()
                .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
                && bytes.iter().all(|b| is_name_byte(*b));
            if !valid {
                tracing::warn!(tag = %tag, "thought tag name can never match; ignored");
            } else if !names.contains(tag) {
                names.push(tag.clone());
            }
        }
        names.sort();
        let longest = names.iter().map(String::len).max().unwrap_or(0);
        let leads = names
            .iter()
            .fold(0, |set, n| set | n.bytes().next().map_or(0, byte_set));
        Self {
            names,
            longest,
            leads,
        }
    }

    /// Length of the longest name, in bytes.
    pub(crate) fn longest(&self) -> usize {
        self.longest
    }

    /// Bytes that can follow `<` in a configured opening tag.
    pub(crate) fn leads(&self) -> u128 {
        self.leads
    }

    /// Bytes that can follow `<` inside a thought of name `index`: its own first byte (a
    /// nested tag) or `/` (a closing tag).
    pub(crate) fn leads_in(&self, index: usize) -> u128 {
        self.name(index).bytes().next().map_or(0, byte_set) | byte_set(b'/')
    }

    /// A match against every configured name.
    pub(crate) fn all(&self) -> NameMatch {
        NameMatch {
            lo: 0,
            hi: self.names.len(),
            len: 0,
        }
    }

    /// A match against the single name `index` (nested tags inside a thought).
    pub(crate) fn only(&self, index: usize) -> NameMatch {
        NameMatch {
            lo: index,
            hi: (index + 1).min(self.names.len()),
            len: 0,
        }
    }

    /// Extends the match by the name byte `b`; false when no candidate continues with it.
    pub(crate) fn advance(&self, m: &mut NameMatch, b: u8) -> bool {
        let at = |i: usize| {
            self.names
                .get(i)
                .and_then(|n| n.as_bytes().get(m.len))
                .copied()
        };
        let mut lo = m.lo;
        while lo < m.hi && at(lo) != Some(b) {
            lo += 1;
        }
        if lo == m.hi {
            return false;
        }
        let mut hi = lo + 1;
        while hi < m.hi && at(hi) == Some(b) {
            hi += 1;
        }
        *m = NameMatch {
            lo,
            hi,
            len: m.len + 1,
        };
        true
    }

    /// The name matched exactly, if any. A name sorts before its extensions, so it is first.
    pub(crate) fn exact(&self, m: &NameMatch) -> Option<usize> {
        (m.lo < m.hi && m.len > 0 && self.names.get(m.lo).is_some_and(|n| n.len() == m.len))
            .then_some(m.lo)
    }

    /// The name `index`.
    pub(crate) fn name(&self, index: usize) -> &str {
        self.names.get(index).map_or("", |n| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(tags: &[&str]) -> TagNames {
        TagNames::new(&tags.iter().map(|t| t.to_string()).collect::<Vec<_>>())
    }

    fn matches(n: &TagNames, text: &str) -> Option<usize> {
        let mut m = n.all();
        for b in text.bytes() {
            if !n.advance(&mut m, b) {
                return None;
            }
        }
        n.exact(&m)
    }

    #[test]
    fn prefixes_and_exact_names() {
        let n = names(&["thinking", "think", "thought"]);
        for name in ["think", "thinking", "thought"] {
            assert_eq!(matches(&n, name).map(|i| n.name(i)), Some(name));
        }
        assert_eq!(matches(&n, "THINKING"), None);
        assert_eq!(matches(&n, "Thought"), None);
        assert_eq!(matches(&n, "thin"), None);
        assert_eq!(matches(&n, "thinkingcap"), None);
        assert_eq!(n.leads(), byte_set(b't'));
        let mut m = n.all();
        assert!(!n.advance(&mut m, b'v'));
    }

    #[test]
    fn invalid_and_duplicate_names_are_dropped() {
        let n = names(&["", "my tag", "9lives", "think", "think"]);
        assert_eq!(n.all().hi, 1);
        assert_eq!(n.name(0), "think");
        assert_eq!(n.longest(), 5);
    }

    #[test]
    fn only_restricts_to_one_name() {
        let n = names(&["think", "thinking"]);
        let Some(idx) = matches(&n, "thinking") else {
            panic!("thinking is configured");
        };
        let mut m = n.only(idx);
        for b in b"think" {
            assert!(n.advance(&mut m, *b));
        }
        assert_eq!(n.exact(&m), None);
        assert_eq!(n.name(idx), "thinking");
    }

    #[test]
    fn no_names_never_match() {
        let n = names(&[]);
        let mut m = n.all();
        assert!(!n.advance(&mut m, b't'));
        assert_eq!(n.exact(&m), None);
    }
}
