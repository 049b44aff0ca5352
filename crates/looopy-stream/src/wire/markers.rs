//! The protocol's markers and incremental matching of a marker that may span chunks.

/// Every marker the parser reacts to. All are ASCII, so a held partial marker never splits
/// a UTF-8 character and slicing the input around one is always on a char boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    ThinkOpen,
    ThinkClose,
    ExecuteOpen,
    ExecuteClose,
    ResultsOpen,
    ResultsClose,
    RespondOpen,
    RespondClose,
    End,
}

impl Marker {
    pub(super) const ALL: [Marker; 9] = [
        Marker::ThinkOpen,
        Marker::ThinkClose,
        Marker::ExecuteOpen,
        Marker::ExecuteClose,
        Marker::ResultsOpen,
        Marker::ResultsClose,
        Marker::RespondOpen,
        Marker::RespondClose,
        Marker::End,
    ];

    pub(super) const fn text(self) -> &'static str {
        match self {
            Marker::ThinkOpen => "<think>",
            Marker::ThinkClose => "</think>",
            Marker::ExecuteOpen => "<execute>",
            Marker::ExecuteClose => "</execute>",
            Marker::ResultsOpen => "<results>",
            Marker::ResultsClose => "</results>",
            Marker::RespondOpen => "<respond>",
            Marker::RespondClose => "</respond>",
            Marker::End => "<end>",
        }
    }
}

/// Longest marker, which bounds what the parser ever holds back.
pub(super) const MAX_MARKER_LEN: usize = 10;

/// Outside any block every marker is recognised (closing ones are stray and dropped).
pub(super) const OUTSIDE: &[Marker] = &Marker::ALL;
/// Inside `<think>` only its closing marker counts: reasoning may mention anything.
pub(super) const IN_THINK: &[Marker] = &[Marker::ThinkClose];
/// Inside `<respond>` the action markers also end the block (see the module docs).
pub(super) const IN_RESPOND: &[Marker] = &[Marker::RespondClose, Marker::ExecuteOpen, Marker::End];
/// Inside `<execute>` (outside JSON strings) only the closing marker counts.
pub(super) const IN_EXECUTE: &[Marker] = &[Marker::ExecuteClose];
/// Inside a model-written `<results>` only its closing marker counts.
pub(super) const IN_RESULTS: &[Marker] = &[Marker::ResultsClose];

/// Outcome of extending a held partial marker by one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The held bytes plus this byte are exactly this marker.
    Complete(Marker),
    /// Still a strict prefix of some candidate: keep holding.
    Partial,
    /// No candidate starts this way: the held bytes are literal text.
    NoMatch,
}

/// Matches `held + [byte]` against `candidates` (no marker is a prefix of another, so a
/// complete match is unambiguous).
pub(super) fn step(candidates: &[Marker], held: &[u8], byte: u8) -> Step {
    let len = held.len() + 1;
    let mut partial = false;
    for &marker in candidates {
        let text = marker.text().as_bytes();
        if text.len() >= len && text[len - 1] == byte && text.starts_with(held) {
            if text.len() == len {
                return Step::Complete(marker);
            }
            partial = true;
        }
    }
    if partial {
        Step::Partial
    } else {
        Step::NoMatch
    }
}

/// A partial marker held across chunks (at most `MAX_MARKER_LEN - 1` ASCII bytes).
#[derive(Debug, Clone, Default)]
pub(super) struct Held {
    bytes: [u8; MAX_MARKER_LEN],
    len: usize,
}

impl Held {
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The held bytes as text; they are ASCII by construction.
    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// Appends a byte that `step` reported as a partial match, so it is ASCII and the
    /// total stays below `MAX_MARKER_LEN`.
    pub(super) fn push(&mut self, byte: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
    }

    pub(super) fn clear(&mut self) {
        self.len = 0;
    }
}

/// Whether `text` contains any protocol marker.
pub(super) fn contains_marker(text: &str) -> bool {
    memchr::memchr(b'<', text.as_bytes()).is_some()
        && Marker::ALL
            .iter()
            .any(|marker| text.contains(marker.text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_marker_is_a_prefix_of_another_and_max_len_is_right() {
        for a in Marker::ALL {
            assert!(a.text().len() <= MAX_MARKER_LEN);
            for b in Marker::ALL {
                if a != b {
                    assert!(!b.text().starts_with(a.text()), "{a:?} prefixes {b:?}");
                }
            }
        }
        assert!(Marker::ALL.iter().any(|m| m.text().len() == MAX_MARKER_LEN));
    }

    #[test]
    fn step_walks_a_marker() {
        let mut held = Held::default();
        for &byte in &b"</think"[..] {
            assert_eq!(step(IN_THINK, held.as_bytes(), byte), Step::Partial);
            held.push(byte);
        }
        assert_eq!(
            step(IN_THINK, held.as_bytes(), b'>'),
            Step::Complete(Marker::ThinkClose)
        );
        assert_eq!(step(IN_THINK, held.as_bytes(), b'x'), Step::NoMatch);
        assert_eq!(held.as_str(), "</think");
    }
}
