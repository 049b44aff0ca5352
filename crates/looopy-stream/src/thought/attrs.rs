//! Opening-tag attributes: a byte-level tokenizer that knows where a tag ends (a `>` inside a
//! quoted value does not end it) and fails fast on anything that is not attribute syntax, plus
//! the values a thought cares about.

use super::names::{is_name_byte, is_space};

/// Where the tokenizer is inside an opening tag, after the tag name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrState {
    /// Between attributes (after the tag name or a value's delimiter).
    BeforeName,
    /// In an attribute name.
    Name,
    /// After an attribute name and whitespace: `=` gives it a value; another name, `/` or
    /// `>` makes it a boolean attribute.
    AfterName,
    /// After `=`, expecting a value.
    BeforeValue,
    /// In a value quoted with this byte (`"` or `'`).
    Quoted(u8),
    /// In an unquoted value.
    Unquoted,
    /// Right after a closing quote: whitespace, `>` or `/` must follow.
    AfterQuoted,
    /// After `/`: only `>` may follow.
    Slash,
}

impl AttrState {
    /// True while reading a value, whose bytes are consumed in runs, not one by one.
    pub(crate) fn in_value(self) -> bool {
        matches!(self, Self::Quoted(_) | Self::Unquoted)
    }
}

/// The attributes a thought reads; everything else is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrKind {
    Id,
    Content,
    ThoughtType,
    Verbosity,
    Confidence,
    Other,
}

/// What one syntax byte did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Consumed; nothing else to do.
    Continue,
    /// Consumed an opening quote; a value of [`TagScanner::kind`] begins.
    ValueStart,
    /// An unquoted value begins *at* this byte, which is not consumed.
    UnquotedStart,
    /// Consumed the tag's final `>`.
    End { self_closing: bool },
    /// Not attribute syntax: this is not a tag (the byte is not consumed).
    Fail,
}

/// Longest attribute name worth classifying; longer names are [`AttrKind::Other`].
const NAME_CAP: usize = 16;

/// Byte-level tokenizer for the attribute part of an opening tag.
#[derive(Debug, Clone)]
pub(crate) struct TagScanner {
    state: AttrState,
    name: [u8; NAME_CAP],
    name_len: usize,
    kind: AttrKind,
}

impl Default for TagScanner {
    fn default() -> Self {
        Self {
            state: AttrState::BeforeName,
            name: [0; NAME_CAP],
            name_len: 0,
            kind: AttrKind::Other,
        }
    }
}

impl TagScanner {
    /// Starts scanning right after a tag name.
    pub(crate) fn reset(&mut self) {
        self.state = AttrState::BeforeName;
        self.name_len = 0;
        self.kind = AttrKind::Other;
    }

    pub(crate) fn state(&self) -> AttrState {
        self.state
    }

    /// Kind of the attribute whose value is being (or about to be) read.
    pub(crate) fn kind(&self) -> AttrKind {
        self.kind
    }

    /// The current value ended at its delimiter (closing quote consumed, or an unquoted
    /// value's terminator, which is then scanned as syntax).
    pub(crate) fn end_value(&mut self) {
        self.state = match self.state {
            AttrState::Quoted(_) => AttrState::AfterQuoted,
            _ => AttrState::BeforeName,
        };
    }

    /// Advances over one byte outside a value.
    pub(crate) fn syntax(&mut self, b: u8) -> Step {
        use AttrState::*;
        let (next, step) = match (self.state, b) {
            (BeforeName | AfterQuoted, b'>') => (
                BeforeName,
                Step::End {
                    self_closing: false,
                },
            ),
            (BeforeName | AfterQuoted, b'/') => (Slash, Step::Continue),
            (BeforeName | AfterQuoted, b) if is_space(b) => (BeforeName, Step::Continue),
            (BeforeName, b) if is_name_byte(b) => {
                self.name_len = 0;
                self.push_name(b);
                (Name, Step::Continue)
            }
            (Name, b) if is_name_byte(b) => {
                self.push_name(b);
                (Name, Step::Continue)
            }
            (Name, b'=') => {
                self.classify();
                (BeforeValue, Step::Continue)
            }
            (Name, b) if is_space(b) => {
                self.classify();
                (AfterName, Step::Continue)
            }
            // A name without `=` is a boolean attribute (`<thinking verbose>`, `<t b />`):
            // valid markup, so the tag may end or another attribute may follow.
            (Name | AfterName, b'>') => (
                BeforeName,
                Step::End {
                    self_closing: false,
                },
            ),
            (Name | AfterName, b'/') => (Slash, Step::Continue),
            (AfterName, b) if is_name_byte(b) => {
                self.name_len = 0;
                self.push_name(b);
                (Name, Step::Continue)
            }
            (AfterName, b'=') => (BeforeValue, Step::Continue),
            (AfterName | BeforeValue, b) if is_space(b) => (self.state, Step::Continue),
            (BeforeValue, q @ (b'"' | b'\'')) => (Quoted(q), Step::ValueStart),
            (BeforeValue, b) if is_unquoted_value_byte(b) => (Unquoted, Step::UnquotedStart),
            (Slash, b'>') => (BeforeName, Step::End { self_closing: true }),
            _ => return Step::Fail,
        };
        self.state = next;
        step
    }

    fn push_name(&mut self, b: u8) {
        if let Some(slot) = self.name.get_mut(self.name_len) {
            *slot = b.to_ascii_lowercase();
        }
        self.name_len = self.name_len.saturating_add(1);
    }

    fn classify(&mut self) {
        self.kind = match self.name.get(..self.name_len) {
            Some(b"id") => AttrKind::Id,
            Some(b"thought" | b"content") => AttrKind::Content,
            Some(b"thought_type" | b"thoughttype" | b"thought-type") => AttrKind::ThoughtType,
            Some(b"verbosity") => AttrKind::Verbosity,
            Some(b"confidence") => AttrKind::Confidence,
            _ => AttrKind::Other,
        };
    }
}

/// Bytes allowed in an unquoted value. `/` is excluded so `confidence=0.7/>` self-closes.
pub(crate) fn is_unquoted_value_byte(b: u8) -> bool {
    !is_space(b) && !matches!(b, b'"' | b'\'' | b'<' | b'>' | b'=' | b'`' | b'/')
}

/// Length of the run of unquoted-value bytes at the start of `bytes`.
pub(crate) fn unquoted_run(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|b| !is_unquoted_value_byte(*b))
        .unwrap_or(bytes.len())
}

/// Attribute values collected from a thought's opening tag (first occurrence wins).
#[derive(Debug, Clone, Default)]
pub(crate) struct AttrValues {
    pub(crate) id: Option<String>,
    pub(crate) content: Option<String>,
    pub(crate) thought_type: Option<String>,
    pub(crate) verbosity: Option<String>,
    pub(crate) confidence: Option<String>,
}

impl AttrValues {
    fn slot(&mut self, kind: AttrKind) -> Option<&mut Option<String>> {
        match kind {
            AttrKind::Id => Some(&mut self.id),
            AttrKind::Content => Some(&mut self.content),
            AttrKind::ThoughtType => Some(&mut self.thought_type),
            AttrKind::Verbosity => Some(&mut self.verbosity),
            AttrKind::Confidence => Some(&mut self.confidence),
            AttrKind::Other => None,
        }
    }

    /// Whether a value of `kind` should be read: not ignored and not already seen.
    pub(crate) fn wants(&mut self, kind: AttrKind) -> bool {
        self.slot(kind).is_some_and(|s| s.is_none())
    }

    /// Stores a value of `kind` (only the first is kept).
    pub(crate) fn store(&mut self, kind: AttrKind, value: String) {
        if let Some(slot) = self.slot(kind) {
            slot.get_or_insert(value);
        }
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

/// Parses a confidence value; only finite numbers in 0..=1 are meaningful.
pub(crate) fn parse_confidence(raw: &str) -> Option<f64> {
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|c| (0.0..=1.0).contains(c))
}

/// Empty metadata values mean "not given".
pub(crate) fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the tokenizer over `text`, skipping value bytes, and returns the last step.
    fn scan(text: &str) -> (Step, Vec<AttrKind>) {
        let mut s = TagScanner::default();
        let mut kinds = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut last = Step::Continue;
        while i < bytes.len() {
            match s.state() {
                AttrState::Quoted(q) => {
                    i += memchr::memchr(q, &bytes[i..]).map_or(bytes.len() - i, |n| n + 1);
                    s.end_value();
                }
                AttrState::Unquoted => {
                    i += unquoted_run(&bytes[i..]);
                    s.end_value();
                }
                _ => {
                    last = s.syntax(bytes[i]);
                    match last {
                        Step::Fail => return (last, kinds),
                        Step::UnquotedStart => kinds.push(s.kind()),
                        Step::ValueStart => {
                            kinds.push(s.kind());
                            i += 1;
                        }
                        _ => i += 1,
                    }
                }
            }
        }
        (last, kinds)
    }

    #[test]
    fn well_formed_attributes() {
        use AttrKind::*;
        let (step, kinds) =
            scan(r#" thought="a > b" thoughtType='x' confidence=0.7 ID = "i" foo="">"#);
        assert_eq!(
            step,
            Step::End {
                self_closing: false
            }
        );
        assert_eq!(kinds, vec![Content, ThoughtType, Confidence, Id, Other]);
        assert_eq!(
            scan(r#" content="c" verbosity=brief/>"#),
            (Step::End { self_closing: true }, vec![Content, Verbosity])
        );
        assert_eq!(scan("/>").0, Step::End { self_closing: true });
        assert_eq!(
            scan(" >").0,
            Step::End {
                self_closing: false
            }
        );
    }

    #[test]
    fn boolean_and_unquoted_attributes() {
        use AttrKind::*;
        let open = Step::End {
            self_closing: false,
        };
        let closed = Step::End { self_closing: true };
        assert_eq!(scan(" a=1 b />"), (closed, vec![Other]));
        assert_eq!(scan(" a=1 b/>"), (closed, vec![Other]));
        assert_eq!(scan(" id=x verbose>"), (open, vec![Id]));
        assert_eq!(scan(" verbose>"), (open, vec![]));
        assert_eq!(scan(" verbose >"), (open, vec![]));
        assert_eq!(scan(" b c=\"v\" d>"), (open, vec![Other]));
        assert_eq!(scan(" b\tid = 'i'>"), (open, vec![Id]));
        assert_eq!(scan(" about it>"), (open, vec![]));
    }

    #[test]
    fn prose_is_not_attribute_syntax() {
        assert_eq!(scan(" it's>").0, Step::Fail);
        assert_eq!(scan(" it, too>").0, Step::Fail);
        assert_eq!(scan(" a b!>").0, Step::Fail);
        assert_eq!(scan(r#" a="x"b="y">"#).0, Step::Fail);
        assert_eq!(scan(" a=>").0, Step::Fail);
        assert_eq!(scan(" / >").0, Step::Fail);
        assert_eq!(scan(" <x>").0, Step::Fail);
    }

    #[test]
    fn values_keep_the_first_occurrence() {
        let mut v = AttrValues::default();
        assert!(v.wants(AttrKind::Id));
        v.store(AttrKind::Id, "a".into());
        assert!(!v.wants(AttrKind::Id));
        v.store(AttrKind::Id, "b".into());
        assert_eq!(v.id.as_deref(), Some("a"));
        assert!(!v.wants(AttrKind::Other));
    }

    #[test]
    fn confidence_range() {
        assert_eq!(parse_confidence(" 0.7 "), Some(0.7));
        assert_eq!(parse_confidence("1"), Some(1.0));
        assert_eq!(parse_confidence("85"), None);
        assert_eq!(parse_confidence("NaN"), None);
        assert_eq!(parse_confidence("high"), None);
    }
}
