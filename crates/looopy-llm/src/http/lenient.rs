//! Forgiving JSON field types for "compatible" servers that bend the wire format: strings
//! borrowed from the input when possible, numbers that arrive as floats or strings, and
//! tool arguments that arrive as objects instead of JSON text.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A JSON string, borrowed when it has no escapes. Numbers and booleans become their text;
/// objects and arrays (a shape we do not know) are skipped as empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Text<'a>(pub Cow<'a, str>);

impl Text<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text::default())
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

/// Tool-call arguments as sent: JSON text (the standard) or a JSON value (some gateways),
/// kept as text so every call is parsed once, when complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arguments<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ArgumentsVisitor;
        impl<'de> Visitor<'de> for ArgumentsVisitor {
            type Value = Arguments<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON text or a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Borrowed("")))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(
                    serde_json::Value::from(v).to_string(),
                )))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Arguments(Cow::Owned(value.to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Arguments(Cow::Owned(value.to_string())))
            }
        }
        deserializer.deserialize_any(ArgumentsVisitor)
    }
}

/// A token count from a server that may send it as an integer, a float, a numeric string
/// or null. Anything unusable counts as absent rather than failing the stream.
pub(crate) fn lenient_u64<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    struct CountVisitor;
    impl<'de> Visitor<'de> for CountVisitor {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a non-negative number")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(u64::try_from(v).ok())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok((v.is_finite() && v >= 0.0).then_some(v as u64))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(v.trim().parse().ok())
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    deserializer.deserialize_any(CountVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Probe<'a> {
        #[serde(borrow)]
        text: Option<Text<'a>>,
        #[serde(borrow)]
        args: Option<Arguments<'a>>,
        #[serde(deserialize_with = "lenient_u64")]
        count: Option<u64>,
    }

    fn probe(json: &str) -> Probe<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn text_borrows_plain_strings_and_tolerates_other_shapes() {
        let p = probe(r#"{"text":"plain"}"#);
        assert!(matches!(p.text.unwrap().0, Cow::Borrowed("plain")));
        assert_eq!(probe(r#"{"text":"a\nb"}"#).text.unwrap().as_str(), "a\nb");
        assert_eq!(probe(r#"{"text":12}"#).text.unwrap().as_str(), "12");
        assert_eq!(probe(r#"{"text":{"x":[1]}}"#).text.unwrap().as_str(), "");
        assert!(probe(r#"{"text":null}"#).text.is_none());
    }

    #[test]
    fn arguments_accept_text_objects_and_null() {
        assert_eq!(
            probe(r#"{"args":"{\"a\":1}"}"#).args.unwrap().0,
            r#"{"a":1}"#
        );
        assert_eq!(probe(r#"{"args":{"a":1}}"#).args.unwrap().0, r#"{"a":1}"#);
        assert_eq!(probe(r#"{"args":""}"#).args.unwrap().0, "");
        assert!(probe(r#"{"args":null}"#).args.is_none());
    }

    #[test]
    fn counts_are_lenient() {
        for (json, want) in [
            (r#"{"count":7}"#, Some(7)),
            (r#"{"count":7.0}"#, Some(7)),
            (r#"{"count":"7"}"#, Some(7)),
            (r#"{"count":-1}"#, None),
            (r#"{"count":null}"#, None),
            (r#"{"count":{"a":1}}"#, None),
            (r#"{}"#, None),
        ] {
            assert_eq!(probe(json).count, want, "{json}");
        }
    }
}
