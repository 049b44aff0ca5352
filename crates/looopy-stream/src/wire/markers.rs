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

/// A set of markers, one bit per entry of [`Marker::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct MarkerSet(u16);

impl MarkerSet {
    const fn of(markers: &[Marker]) -> Self {
        let mut bits = 0u16;
        let mut i = 0;
        while i < markers.len() {
            bits |= 1 << markers[i] as u16;
            i += 1;
        }
        Self(bits)
    }
}

/// Outside any block every marker is recognised (closing ones are stray and dropped).
pub(super) const OUTSIDE: MarkerSet = MarkerSet::of(&Marker::ALL);
/// Inside `<think>` only its closing marker counts: reasoning may mention anything.
pub(super) const IN_THINK: MarkerSet = MarkerSet::of(&[Marker::ThinkClose]);
/// Inside `<respond>` the action markers also end the block (see the module docs).
pub(super) const IN_RESPOND: MarkerSet =
    MarkerSet::of(&[Marker::RespondClose, Marker::ExecuteOpen, Marker::End]);
/// Inside `<execute>` (outside JSON strings) only the closing marker counts.
pub(super) const IN_EXECUTE: MarkerSet = MarkerSet::of(&[Marker::ExecuteClose]);
/// Inside a model-written `<results>` only its closing marker counts.
pub(super) const IN_RESULTS: MarkerSet = MarkerSet::of(&[Marker::ResultsClose]);

/// Outcome of extending a held partial marker by one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The held bytes plus this byte are exactly this marker (the held bytes are cleared).
    Complete(Marker),
    /// Still a strict prefix of some candidate: the byte is now held too.
    Partial,
    /// No candidate starts this way: the held bytes are literal text (left unchanged).
    NoMatch,
}

/// A partial marker held across chunks (at most `MAX_MARKER_LEN - 1` ASCII bytes), with the
/// set of markers it can still become, so each further byte costs a few comparisons.
#[derive(Debug, Clone, Default)]
pub(super) struct Held {
    bytes: [u8; MAX_MARKER_LEN],
    len: usize,
    candidates: MarkerSet,
}

impl Held {
    /// Starts holding at a `<` that may begin any of `candidates` (all markers start so).
    pub(super) fn start(&mut self, candidates: MarkerSet) {
        self.bytes[0] = b'<';
        self.len = 1;
        self.candidates = candidates;
    }

    /// Extends the held prefix by `byte` (see [`Step`]). No marker is a prefix of another,
    /// so a complete match is unambiguous.
    pub(super) fn step(&mut self, byte: u8) -> Step {
        let mut remaining = self.candidates.0;
        let mut next = 0u16;
        while remaining != 0 {
            let index = remaining.trailing_zeros() as usize;
            remaining &= remaining - 1;
            let marker = Marker::ALL[index];
            let text = marker.text().as_bytes();
            // Every candidate is longer than what is held (held text is a strict prefix).
            if text.get(self.len) == Some(&byte) {
                if text.len() == self.len + 1 {
                    self.clear();
                    return Step::Complete(marker);
                }
                next |= 1 << index;
            }
        }
        if next == 0 {
            return Step::NoMatch;
        }
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
        self.candidates = MarkerSet(next);
        Step::Partial
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The held bytes as text; they are ASCII by construction.
    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.candidates = MarkerSet::default();
    }
}

/// First `<` in `bytes`. Token-sized pushes are a few bytes long, where a plain loop beats
/// `memchr`'s setup cost.
#[inline]
pub(super) fn find_lt(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 16 {
        bytes.iter().position(|&b| b == b'<')
    } else {
        memchr::memchr(b'<', bytes)
    }
}

/// First of two bytes in `bytes` (see [`find_lt`]).
#[inline]
pub(super) fn find_either(a: u8, b: u8, bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 16 {
        bytes.iter().position(|&x| x == a || x == b)
    } else {
        memchr::memchr2(a, b, bytes)
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
        for (index, marker) in Marker::ALL.iter().enumerate() {
            assert_eq!(*marker as usize, index, "ALL must follow declaration order");
        }
    }

    #[test]
    fn held_walks_a_marker_and_reports_no_match() {
        let mut held = Held::default();
        held.start(IN_THINK);
        for &byte in &b"/think"[..] {
            assert_eq!(held.step(byte), Step::Partial);
        }
        assert_eq!(held.as_str(), "</think");
        assert_eq!(held.step(b'x'), Step::NoMatch);
        assert_eq!(held.as_str(), "</think", "unchanged on no match");
        assert_eq!(held.step(b'>'), Step::Complete(Marker::ThinkClose));
        assert!(held.is_empty());
    }

    #[test]
    fn candidates_narrow_as_bytes_arrive() {
        let mut held = Held::default();
        held.start(OUTSIDE);
        assert_eq!(held.step(b'r'), Step::Partial);
        assert_eq!(held.step(b'e'), Step::Partial);
        assert_eq!(held.step(b's'), Step::Partial);
        assert_eq!(held.step(b'u'), Step::Partial, "<resu: results only");
        assert_eq!(held.step(b'p'), Step::NoMatch);
        for &byte in &b"lts"[..] {
            assert_eq!(held.step(byte), Step::Partial);
        }
        assert_eq!(held.step(b'>'), Step::Complete(Marker::ResultsOpen));
        held.start(IN_RESPOND);
        assert_eq!(held.step(b'e'), Step::Partial);
        assert_eq!(held.step(b'n'), Step::Partial);
        assert_eq!(held.step(b'd'), Step::Partial);
        assert_eq!(held.step(b'>'), Step::Complete(Marker::End));
    }
}
