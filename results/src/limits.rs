//! Bounds on decoding JSON that came from elsewhere (result documents read by
//! `aggregate`, control messages between bench processes): what a document may hold, and
//! what it will take in memory once parsed, known before it is parsed.

use std::fmt;

/// Longest string a result document may hold: a histogram is at most about 400 KB of
/// base64, every other field far shorter.
pub const MAX_STRING_BYTES: usize = 1 << 20;

/// Bytes of memory charged per JSON value (number, string, array, object) and per object
/// key: the most one takes decoded, a growing vector's spare capacity, a map's nodes and
/// the allocator's own overhead included. Measured on documents made of nothing but the
/// worst shapes (the costliest: a free-form map of tiny keys, 149 bytes an entry, charged
/// 166 here; README, Limits).
pub const BYTES_PER_VALUE: u64 = 80;
/// Bytes charged per string or key on top of its length: the smallest heap block.
pub const BYTES_PER_STRING: u64 = 32;

/// An upper bound on the memory `text` takes once parsed, from one pass that allocates
/// nothing: [`BYTES_PER_VALUE`] per value and per key, every key's length, and every
/// string's length plus [`BYTES_PER_STRING`]. An error when the text is not JSON, or
/// holds a string longer than [`MAX_STRING_BYTES`] (a data error).
pub fn decoded_estimate(text: &str) -> Result<u64, serde_json::Error> {
    decoded_estimate_of(text.as_bytes())
}

/// [`decoded_estimate`] of JSON bytes (a control message).
pub fn decoded_estimate_of(bytes: &[u8]) -> Result<u64, serde_json::Error> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
    #[derive(Default)]
    struct Shape {
        /// Values and keys.
        values: u64,
        /// Bytes of strings (each with its heap block) and of keys.
        string_bytes: u64,
    }
    /// Counts one value; a key (`key`) is charged its length only, no heap block: a
    /// struct's keys are not stored at all, a map's share its node.
    struct Counter<'a> {
        shape: &'a mut Shape,
        key: bool,
    }
    impl<'de> DeserializeSeed<'de> for Counter<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl Counter<'_> {
        fn one(self) {
            self.shape.values += 1;
        }
    }
    impl<'de> Visitor<'de> for Counter<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            self.one();
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            self.one();
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            self.one();
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            self.one();
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            self.one();
            Ok(())
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<(), E> {
            if s.len() > MAX_STRING_BYTES {
                return Err(E::custom(format!(
                    "a string of {} bytes: no field of a result document holds more than \
                     {MAX_STRING_BYTES}",
                    s.len()
                )));
            }
            let block = if self.key { 0 } else { BYTES_PER_STRING };
            self.shape.string_bytes += s.len() as u64 + block;
            self.one();
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            self.shape.values += 1;
            while seq
                .next_element_seed(Counter {
                    shape: self.shape,
                    key: false,
                })?
                .is_some()
            {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            self.shape.values += 1;
            while map
                .next_key_seed(Counter {
                    shape: self.shape,
                    key: true,
                })?
                .is_some()
            {
                map.next_value_seed(Counter {
                    shape: self.shape,
                    key: false,
                })?;
            }
            Ok(())
        }
    }
    let mut shape = Shape::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Counter {
        shape: &mut shape,
        key: false,
    }
    .deserialize(&mut de)?;
    Ok(shape
        .values
        .saturating_mul(BYTES_PER_VALUE)
        .saturating_add(shape.string_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_counts_values_keys_and_strings() {
        // {} = 1 value; "a": key 1 byte + value 80; "xy": string 80 + 32 + 2.
        assert_eq!(decoded_estimate("{}").unwrap(), BYTES_PER_VALUE);
        assert_eq!(
            decoded_estimate(r#"{"a":"xy"}"#).unwrap(),
            BYTES_PER_VALUE + (BYTES_PER_VALUE + 1) + (BYTES_PER_VALUE + BYTES_PER_STRING + 2)
        );
        assert_eq!(decoded_estimate("[0,0,0]").unwrap(), 4 * BYTES_PER_VALUE);
        assert!(decoded_estimate("[0,").is_err());
        let long = format!("[\"{}\"]", "x".repeat(MAX_STRING_BYTES + 1));
        let e = decoded_estimate(&long).unwrap_err();
        assert_eq!(e.classify(), serde_json::error::Category::Data);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(decoded_estimate(&deep).is_err());
    }
}
