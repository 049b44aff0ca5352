//! The cause behind an [`LlmError`](crate::LlmError) (reqwest → hyper → io), kept as error
//! values so a program can walk [`source()`](std::error::Error::source) and downcast —
//! `std::io::Error` with its `ErrorKind`, hyper's errors — instead of parsing a message.
//!
//! Causes travel as far as error messages do (logs print chains), so they obey the same
//! rule: no credential leaves the provider layer. reqwest quotes the request URL in its
//! errors, and a gateway key may sit in that URL's query. Every level of the chain is
//! checked (its `Display` and its `Debug`) with the provider's [`Redactor`]; each level
//! down to the deepest one that showed a credential is replaced by a stand-in holding only
//! its redacted text, and the levels below it — which showed nothing — stay the original
//! values. A level that is an original value therefore never leads to one that leaked.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::Redactor;

type DynError = dyn Error + Send + Sync + 'static;

/// Causes deeper than this are not looked at (a chain is a handful of levels; this only
/// bounds a pathological or cyclic one).
const MAX_DEPTH: usize = 32;

/// The cause of an I/O failure ([`LlmError::Connect`](crate::LlmError::Connect),
/// [`LlmError::Interrupted`](crate::LlmError::Interrupted)): the first level of the original
/// error chain, with credentials redacted as the module docs describe.
///
/// Cheap to clone (shared). Two sources are equal when their chains read the same.
#[derive(Clone)]
pub struct ErrorSource(Arc<Level>);

enum Level {
    /// A cause whose text showed a credential: only its redacted text is kept.
    Masked {
        text: String,
        next: Option<Box<Level>>,
    },
    /// The causes of `root` from `depth` down, as they are: none showed a credential.
    Original { root: Arc<DynError>, depth: usize },
}

impl ErrorSource {
    /// `error` (and its causes) checked against `redactor`.
    pub fn new(error: impl Error + Send + Sync + 'static, redactor: &Redactor) -> Self {
        Self(Arc::new(mask(Arc::new(error), 0, redactor)))
    }

    /// `error` as it is, for the driver to hand to [`Redactor::error`] right away (which
    /// is where every provider error is redacted, see [`crate::redact`]).
    pub(crate) fn unchecked(error: impl Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(Level::Original {
            root: Arc::new(error),
            depth: 0,
        }))
    }

    /// The same causes, also redacted with `redactor` (what was redacted stays redacted).
    pub(crate) fn redacted(&self, redactor: &Redactor) -> Self {
        Self(Arc::new(remask(&self.0, redactor)))
    }

    /// The text of every level, this one first.
    fn texts(&self) -> Vec<String> {
        let mut texts = Vec::new();
        let mut level: Option<&(dyn Error + 'static)> = Some(self);
        while let Some(error) = level {
            if texts.len() == MAX_DEPTH {
                break;
            }
            texts.push(error.to_string());
            level = error.source();
        }
        texts
    }
}

impl fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// The chain's texts, never the original values' `Debug` (which for reqwest includes the
/// URL even when its `Display` was not asked for).
impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ErrorSource").field(&self.texts()).finish()
    }
}

impl Error for ErrorSource {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.texts() == other.texts()
    }
}

impl Level {
    /// The error value that stands for this level.
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Masked { .. } => Some(self),
            Self::Original { root, depth } => nth(root, *depth),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Masked { text, .. } => f.write_str(text),
            Self::Original { root, depth } => match nth(root, *depth) {
                Some(error) => fmt::Display::fmt(error, f),
                None => Ok(()),
            },
        }
    }
}

impl fmt::Debug for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Masked { text, .. } => f.debug_tuple("Redacted").field(text).finish(),
            Self::Original { .. } => write!(f, "{self}"),
        }
    }
}

impl Error for Level {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Masked { next, .. } => next.as_deref().and_then(Level::as_error),
            Self::Original { root, depth } => nth(root, *depth).and_then(Error::source),
        }
    }
}

/// Level `depth` of `root`'s chain (0 is `root` itself).
fn nth(root: &Arc<DynError>, depth: usize) -> Option<&(dyn Error + 'static)> {
    let mut error: &(dyn Error + 'static) = &**root;
    for _ in 0..depth {
        error = error.source()?;
    }
    Some(error)
}

/// The chain of `root` from `depth` down, with every level down to the deepest one that
/// shows a credential (in `Display` or `Debug`) replaced by its redacted text.
fn mask(root: Arc<DynError>, depth: usize, redactor: &Redactor) -> Level {
    let shows_secret = |text: String| redactor.redact(&text) != text;
    let (texts, deepest_leak) = {
        let mut texts = Vec::new();
        let mut deepest_leak = None;
        let mut level = nth(&root, depth);
        while let Some(error) = level {
            if texts.len() == MAX_DEPTH {
                // Too deep to check: nothing below is shown at all.
                deepest_leak = Some(texts.len() - 1);
                break;
            }
            if shows_secret(error.to_string()) || shows_secret(format!("{error:?}")) {
                deepest_leak = Some(texts.len());
            }
            texts.push(error.to_string());
            level = error.source();
        }
        (texts, deepest_leak)
    };
    let Some(deepest_leak) = deepest_leak else {
        return Level::Original { root, depth };
    };
    let mut next = (deepest_leak + 1 < texts.len()).then(|| {
        Box::new(Level::Original {
            root,
            depth: depth + deepest_leak + 1,
        })
    });
    let mut masked = texts;
    masked.truncate(deepest_leak + 1);
    let mut top = None;
    for (i, text) in masked.iter().enumerate().rev() {
        let level = Level::Masked {
            text: redactor.message(text),
            next: next.take(),
        };
        if i == 0 {
            top = Some(level);
        } else {
            next = Some(Box::new(level));
        }
    }
    // `masked` holds at least one text (the level that leaked), so `top` is set.
    top.unwrap_or(Level::Masked {
        text: String::new(),
        next: None,
    })
}

/// `level` redacted again with `redactor`: masked texts are redacted once more, original
/// causes are checked.
fn remask(level: &Level, redactor: &Redactor) -> Level {
    match level {
        Level::Masked { text, next } => Level::Masked {
            text: redactor.message(text),
            next: next.as_deref().map(|next| Box::new(remask(next, redactor))),
        },
        Level::Original { root, depth } => mask(Arc::clone(root), *depth, redactor),
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    /// An error that quotes a URL, with a cause.
    #[derive(Debug)]
    struct Outer {
        url: String,
        cause: Middle,
    }

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "error sending request for url ({})", self.url)
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.cause)
        }
    }

    #[derive(Debug)]
    struct Middle(io::Error);

    impl fmt::Display for Middle {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tcp connect error")
        }
    }

    impl Error for Middle {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    fn chain(url: &str) -> Outer {
        Outer {
            url: url.into(),
            cause: Middle(io::Error::from(io::ErrorKind::ConnectionRefused)),
        }
    }

    fn levels(source: &ErrorSource) -> Vec<&(dyn Error + 'static)> {
        let mut levels = Vec::new();
        let mut level: Option<&(dyn Error + 'static)> = Some(source);
        while let Some(error) = level {
            levels.push(error);
            level = error.source();
        }
        levels
    }

    #[test]
    fn a_clean_chain_is_kept_as_it_is() {
        let source = ErrorSource::new(chain("http://h/v1"), &Redactor::new());
        let levels = levels(&source);
        assert_eq!(levels.len(), 3);
        assert_eq!(
            levels[0].to_string(),
            "error sending request for url (http://h/v1)"
        );
        assert!(levels[1].downcast_ref::<Middle>().is_some());
        let io = levels[2].downcast_ref::<io::Error>().unwrap();
        assert_eq!(io.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn levels_that_show_a_secret_are_masked_and_the_rest_kept() {
        let redactor = Redactor::new().with_secret("gw-secret-123");
        let source = ErrorSource::new(chain("http://h/v1?key=gw-secret-123"), &redactor);
        let levels = levels(&source);
        assert_eq!(levels.len(), 3);
        // The query shape takes the rest of the URL with it (`)` included): more is fine.
        assert!(
            levels[0]
                .to_string()
                .starts_with("error sending request for url (http://h/v1?key=***"),
            "{}",
            levels[0]
        );
        assert!(levels[1].downcast_ref::<Middle>().is_some());
        assert!(levels[2].downcast_ref::<io::Error>().is_some());
        let shown = format!("{source} {source:?} {:?}", levels[0]);
        assert!(!shown.contains("gw-secret-123"), "{shown}");
    }

    #[test]
    fn redacting_again_keeps_what_was_redacted_and_masks_more() {
        let first = ErrorSource::new(chain("http://h/?key=one-secret"), &Redactor::new());
        assert!(!first.to_string().contains("one-secret"));
        // A secret only the second redactor knows, deep in the chain.
        let deep = Outer {
            url: "http://h/".into(),
            cause: Middle(io::Error::other("refused by proxy-pass-999")),
        };
        let source = ErrorSource::unchecked(deep);
        let redacted = source.redacted(&Redactor::new().with_secret("proxy-pass-999"));
        let texts = redacted.texts();
        assert_eq!(texts.len(), 3);
        assert!(
            texts.iter().all(|t| !t.contains("proxy-pass-999")),
            "{texts:?}"
        );
        // Every level down to the leaking one is a stand-in, none an original value.
        assert!(
            levels(&redacted)
                .iter()
                .all(|l| l.downcast_ref::<io::Error>().is_none())
        );
        assert_eq!(redacted, redacted.clone());
        assert_ne!(redacted, first);
    }
}
