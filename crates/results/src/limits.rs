//! Bounds on decoding JSON that came from elsewhere (result documents read by
//! `aggregate`, control messages between bench processes): what a document may hold, and
//! what it will take in memory once parsed, known before it is parsed.

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

/// A string longer than any field of a result document holds: refused before anything
/// is built, a data error rather than a syntax error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a string of {0} bytes: no field of a result document holds more than {MAX_STRING_BYTES}")]
pub struct LongString(pub usize);

/// An upper bound on the memory `text` takes once parsed: [`BYTES_PER_VALUE`] per value
/// and per key, every key's length, and every string's length plus [`BYTES_PER_STRING`].
/// An error when it holds a string longer than [`MAX_STRING_BYTES`].
pub fn decoded_estimate(text: &str) -> Result<u64, LongString> {
    decoded_estimate_of(text.as_bytes())
}

/// The bytes that sit between values outside strings: whitespace, `,`, `:`, `]`, `}`.
static BETWEEN_VALUES: [bool; 256] = {
    let mut t = [false; 256];
    let mut k = 0;
    let between = b" \t\n\r,:]}";
    while k < between.len() {
        t[between[k] as usize] = true;
        k += 1;
    }
    t
};

/// [`decoded_estimate`] of JSON bytes (a control message).
///
/// One pass over the bytes that allocates nothing and builds nothing: it counts where
/// values begin (a string, a number, `true`/`false`/`null`, `[`, `{`; a key is a string
/// followed by `:`) and measures each string between its quotes, an escape counted at
/// no less than what it decodes to (`\n` one byte, `\uXXXX` at most three). For valid
/// JSON that is what a parse would visit, so the figure equals the count of a serde
/// visitor over the same text (tested) at a fraction of its cost; a string with escapes
/// is charged at most two bytes more per `\u`. Text that is not JSON gets some figure
/// and is refused by the parse that follows, which says where and why; nesting too deep
/// is the parse's to refuse as well.
pub fn decoded_estimate_of(bytes: &[u8]) -> Result<u64, LongString> {
    let n = bytes.len();
    let mut values: u64 = 0;
    let mut string_bytes: u64 = 0;
    let mut i = 0;
    while i < n {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                // Bytes the escapes seen save, at least: the decoded length is at most
                // the raw length less this.
                let mut saved = 0usize;
                while let Some(k) = memchr::memchr2(b'"', b'\\', &bytes[j..]) {
                    j += k;
                    if bytes[j] == b'"' {
                        break;
                    }
                    if bytes.get(j + 1) == Some(&b'u') {
                        saved += 3;
                        j += 6;
                    } else {
                        saved += 1;
                        j += 2;
                    }
                    if j >= n {
                        break;
                    }
                }
                let end = j.min(n);
                let len = (end - start).saturating_sub(saved);
                if len > MAX_STRING_BYTES {
                    return Err(LongString(len));
                }
                i = end + 1;
                let mut k = i;
                while k < n && matches!(bytes[k], b' ' | b'\t' | b'\n' | b'\r') {
                    k += 1;
                }
                let key = k < n && bytes[k] == b':';
                let block = if key { 0 } else { BYTES_PER_STRING };
                string_bytes += len as u64 + block;
                values += 1;
                continue;
            }
            b'[' | b'{' => values += 1,
            b'-' | b'0'..=b'9' => {
                values += 1;
                i += 1;
                while i < n && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                continue;
            }
            b't' | b'f' | b'n' => {
                values += 1;
                i += 1;
                while i < n && bytes[i].is_ascii_alphabetic() {
                    i += 1;
                }
                continue;
            }
            // Whitespace and punctuation between values: skipped in a run (pretty JSON is
            // a third spaces).
            _ => {
                i += 1;
                while i < n && BETWEEN_VALUES[bytes[i] as usize] {
                    i += 1;
                }
                continue;
            }
        }
        i += 1;
    }
    Ok(values
        .saturating_mul(BYTES_PER_VALUE)
        .saturating_add(string_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`decoded_estimate`] stands for, counted the slow way: a serde visitor over
    /// every value, charging what the estimate charges. The reference the fast count is
    /// held to.
    fn visited(text: &str) -> Result<u64, serde_json::Error> {
        use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
        use std::fmt;
        #[derive(Default)]
        struct Shape {
            values: u64,
            string_bytes: u64,
        }
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
        impl<'de> Visitor<'de> for Counter<'_> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<(), E> {
                self.shape.values += 1;
                Ok(())
            }
            fn visit_i64<E>(self, _: i64) -> Result<(), E> {
                self.shape.values += 1;
                Ok(())
            }
            fn visit_u64<E>(self, _: u64) -> Result<(), E> {
                self.shape.values += 1;
                Ok(())
            }
            fn visit_f64<E>(self, _: f64) -> Result<(), E> {
                self.shape.values += 1;
                Ok(())
            }
            fn visit_unit<E>(self) -> Result<(), E> {
                self.shape.values += 1;
                Ok(())
            }
            fn visit_str<E>(self, s: &str) -> Result<(), E> {
                let block = if self.key { 0 } else { BYTES_PER_STRING };
                self.shape.string_bytes += s.len() as u64 + block;
                self.shape.values += 1;
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
        let mut de = serde_json::Deserializer::from_str(text);
        Counter {
            shape: &mut shape,
            key: false,
        }
        .deserialize(&mut de)?;
        // As a parse does: text after the value is not JSON.
        de.end()?;
        Ok(shape.values * BYTES_PER_VALUE + shape.string_bytes)
    }

    #[test]
    fn estimate_counts_values_keys_and_strings() {
        // {} = 1 value; "a": key 1 byte + value 80; "xy": string 80 + 32 + 2.
        assert_eq!(decoded_estimate("{}").unwrap(), BYTES_PER_VALUE);
        assert_eq!(
            decoded_estimate(r#"{"a":"xy"}"#).unwrap(),
            BYTES_PER_VALUE + (BYTES_PER_VALUE + 1) + (BYTES_PER_VALUE + BYTES_PER_STRING + 2)
        );
        assert_eq!(decoded_estimate("[0,0,0]").unwrap(), 4 * BYTES_PER_VALUE);
        let long = format!("[\"{}\"]", "x".repeat(MAX_STRING_BYTES + 1));
        assert_eq!(
            decoded_estimate(&long),
            Err(LongString(MAX_STRING_BYTES + 1))
        );
        // Escapes shorten a string: one a byte over the limit raw is under it decoded.
        let escaped = format!("[\"{}\\n\"]", "x".repeat(MAX_STRING_BYTES - 1));
        assert!(decoded_estimate(&escaped).is_ok());
        // Not JSON, or too deep: a figure, and the parse after it refuses the text.
        assert!(decoded_estimate("[0,").is_ok());
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(decoded_estimate(&deep).unwrap(), 100_000 * BYTES_PER_VALUE);
    }

    #[test]
    fn the_fast_count_is_what_a_visitor_counts() {
        for text in [
            r#"{"a": [1, -2.5e-3, true, false, null, "x"], "b" : {"c":"", "d":[]}}"#,
            r#"[ "k", {"k":"v"}, 0, 1E+9, "a:b", ":", "{[,\"]}" ]"#,
            "{\n\t\"key\"\r\n:\n\"value\"\n}",
            r#""just a string""#,
            "12345",
        ] {
            assert_eq!(
                decoded_estimate(text).unwrap(),
                visited(text).unwrap(),
                "{text}"
            );
        }
        // Escapes: never below what they decode to, at most two bytes over per \u.
        let text = r#"["a\"b", "tab\tnew\nline\\", "\u00e9\u20ac\ud83d\ude00", {"\u0041": 1}]"#;
        let fast = decoded_estimate(text).unwrap();
        let slow = visited(text).unwrap();
        assert!(fast >= slow && fast <= slow + 2 * 5, "{fast} vs {slow}");
    }

    #[test]
    fn the_fast_count_is_what_a_visitor_counts_on_the_corpus() {
        // Documents fabcheck wrote and the hostile ones made to break readers: wherever
        // serde reads the text, the fast count is the visitor's, an escape's slack aside.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus");
        let mut compared = 0;
        for dir in ["real", "hostile"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let Ok(slow) = visited(&text) else { continue };
                let fast = decoded_estimate(&text).unwrap();
                let slack = 2 * text.matches("\\u").count() as u64;
                assert!(
                    fast >= slow && fast <= slow + slack,
                    "{}: {fast} vs {slow}",
                    path.display()
                );
                compared += 1;
            }
        }
        assert!(compared >= 20, "only {compared} documents compared");
    }
}
