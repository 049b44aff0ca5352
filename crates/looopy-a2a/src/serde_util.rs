//! Small serde helpers shared by the A2A types: lenient readers for what real peers send
//! (`null` for empty lists, ProtoJSON's numbers-as-strings and enum numbers) and the
//! constant markers (`"kind": "task"`, `"jsonrpc": "2.0"`) that tag v0.3 and JSON-RPC objects.

use serde::{Deserialize, Deserializer};

/// Reads a value whose `null` means "not set": ProtoJSON allows `null` for any field, and
/// some peers send `"parts": null` or `"append": null` rather than leaving the field out.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Reads an optional 32-bit integer given as a JSON number or, as ProtoJSON allows, a
/// decimal string (`"10"`).
pub(crate) fn lenient_opt_i32<'de, D>(d: D) -> Result<Option<i32>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrString {
        Num(i64),
        Str(String),
    }
    let raw = Option::<NumOrString>::deserialize(d)?;
    let wide = match raw {
        None => return Ok(None),
        Some(NumOrString::Num(n)) => n,
        Some(NumOrString::Str(s)) => s.trim().parse::<i64>().map_err(|_| {
            serde::de::Error::custom(format_args!("expected an integer, found {s:?}"))
        })?,
    };
    i32::try_from(wide)
        .map(Some)
        .map_err(|_| serde::de::Error::custom(format_args!("integer {wide} out of range")))
}

/// Declares a unit struct that serializes as one constant string and accepts only that
/// string, e.g. the `kind` of a v0.3 object or the `jsonrpc` version.
macro_rules! constant_tag {
    ($(#[$meta:meta])* $name:ident = $tag:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $name {
            /// The constant string on the wire.
            pub const TAG: &'static str = $tag;
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($tag)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                if s == $tag {
                    Ok($name)
                } else {
                    Err(serde::de::Error::custom(format_args!(
                        "expected {:?}, found {:?}",
                        $tag, s
                    )))
                }
            }
        }
    };
}
pub(crate) use constant_tag;

/// Declares a ProtoJSON enum: written as its SCREAMING_SNAKE_CASE name, read from the name
/// or from its number (ProtoJSON parsers must accept both). One variant must be `#[default]`
/// (the zero value, which ProtoJSON writers leave out).
macro_rules! proto_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = ($num:literal, $wire:literal) ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in protobuf number order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The ProtoJSON name, e.g. `TASK_STATE_WORKING`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }

            /// Parses the ProtoJSON name.
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($wire => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Parses the protobuf enum number.
            pub fn from_number(n: i64) -> Option<Self> {
                match n {
                    $($num => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "a {} name or number", stringify!($name))
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        $name::from_name(s).ok_or_else(|| {
                            E::custom(format_args!("unknown {} {:?}", stringify!($name), s))
                        })
                    }
                    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<$name, E> {
                        $name::from_number(n).ok_or_else(|| {
                            E::custom(format_args!("unknown {} number {}", stringify!($name), n))
                        })
                    }
                    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<$name, E> {
                        let n = i64::try_from(n).map_err(|_| {
                            E::custom(format_args!("unknown {} number {}", stringify!($name), n))
                        })?;
                        self.visit_i64(n)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}
pub(crate) use proto_enum;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Probe {
        #[serde(default, deserialize_with = "null_as_default")]
        list: Vec<u8>,
        #[serde(default, deserialize_with = "lenient_opt_i32")]
        n: Option<i32>,
    }

    #[test]
    fn null_and_string_numbers_are_accepted() {
        let p: Probe = serde_json::from_str(r#"{"list": null, "n": "10"}"#).unwrap();
        assert_eq!(
            p,
            Probe {
                list: vec![],
                n: Some(10)
            }
        );
        let p: Probe = serde_json::from_str(r#"{"n": null}"#).unwrap();
        assert_eq!(
            p,
            Probe {
                list: vec![],
                n: None
            }
        );
        let p: Probe = serde_json::from_str(r#"{"n": -3}"#).unwrap();
        assert_eq!(p.n, Some(-3));
    }

    #[test]
    fn bad_numbers_are_errors() {
        for bad in [
            r#"{"n": "ten"}"#,
            r#"{"n": 4294967296}"#,
            r#"{"n": 1.5}"#,
            r#"{"n": true}"#,
        ] {
            assert!(serde_json::from_str::<Probe>(bad).is_err(), "{bad}");
        }
    }

    constant_tag!(Marker = "thing");

    #[test]
    fn constant_tag_accepts_only_its_string() {
        assert_eq!(
            serde_json::to_string(&Marker).unwrap(),
            format!("{:?}", Marker::TAG)
        );
        assert!(serde_json::from_str::<Marker>(r#""thing""#).is_ok());
        let err = serde_json::from_str::<Marker>(r#""other""#).unwrap_err();
        assert!(err.to_string().contains("expected \"thing\""), "{err}");
        assert!(serde_json::from_str::<Marker>("1").is_err());
    }
}
