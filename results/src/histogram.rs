//! HDR latency histograms: recorded in the measurement loop, summarised for tables, carried
//! inside JSON as base64 HDR V2+deflate so `aggregate` can merge ranks, pairs and runs and
//! recompute percentiles from the merge instead of averaging percentiles (which is wrong).
//!
//! Values are nanoseconds. Three significant digits: 1 ns resolution below 1 us,
//! 1 us resolution near 1 ms, which is finer than any fabric jitter worth reporting.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest value tracked: one hour in ns. Anything above is clamped (saturating record).
const MAX_NS: u64 = 3_600_000_000_000;

/// Percentile summary in microseconds, the shape every latency result carries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct LatencySummary {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub mean: f64,
    pub stdev: f64,
}

/// Error decoding a histogram carried in JSON.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not a valid HDR V2 (deflate) blob: {0}")]
    Hdr(String),
}

/// A latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let inner = Histogram::new_with_bounds(1, MAX_NS, 3).expect("static histogram bounds");
        Self { inner }
    }

    /// Records one sample. Values beyond the range are clamped, never dropped: the
    /// measurement loop must not branch on errors.
    #[inline(always)]
    pub fn record(&mut self, ns: u64) {
        self.inner.saturating_record(ns.max(1));
    }

    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so adding cannot fail; saturate just in case a foreign
        // histogram has a wider range.
        if self.inner.add(&other.inner).is_err() {
            for v in other.inner.iter_recorded() {
                self.inner
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// Value at quantile `q` (0..=1) in nanoseconds.
    pub fn value_at_quantile_ns(&self, q: f64) -> u64 {
        self.inner.value_at_quantile(q)
    }

    /// Percentiles, mean and standard deviation in microseconds.
    pub fn summary_us(&self) -> LatencySummary {
        if self.inner.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let h = &self.inner;
        LatencySummary {
            min: us(h.min()),
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            p9999: us(h.value_at_quantile(0.9999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
            stdev: h.stdev() / 1000.0,
        }
    }

    /// Base64 of the HDR V2+deflate encoding (the JSON `histogram` field).
    pub fn encode(&self) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.inner, &mut bytes)
            .expect("serializing into a Vec cannot fail");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Inverse of [`encode`](Self::encode).
    pub fn decode(text: &str) -> Result<Self, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
        let inner: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| HistogramError::Hdr(format!("{e:?}")))?;
        Ok(Self { inner })
    }

    /// Adds every sample of an encoded histogram (the JSON `histogram` field) without
    /// building it first. Merging thousands of ranks' histograms is what `aggregate` does
    /// most: decoding each into a full counts array (about 260 KB for this range) and adding
    /// all of it costs seconds at 1024 ranks, while the encoding lists only the non-zero
    /// buckets. Returns the number of samples added. Histograms with other bounds than the
    /// ones [`new`](Self::new) uses take the general path, so any valid blob merges.
    pub fn merge_encoded(&mut self, text: &str) -> Result<u64, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
        match fast::parse(&bytes, MAX_NS) {
            Ok(fast::Parsed::Counts(counts)) => {
                let len = self.inner.distinct_values();
                let mut total = 0u64;
                for &(index, _) in &counts {
                    if index >= len {
                        return Err(HistogramError::Hdr(format!(
                            "bucket index {index} beyond the histogram's {len} buckets"
                        )));
                    }
                }
                for (index, count) in counts {
                    self.inner
                        .saturating_record_n(fast::value_from_index(index), count);
                    total = total.saturating_add(count);
                }
                Ok(total)
            }
            Ok(fast::Parsed::OtherBounds) => {
                let h = Self::decode(text)?;
                let n = h.len();
                self.merge(&h);
                Ok(n)
            }
            Err(e) => Err(HistogramError::Hdr(e)),
        }
    }

    /// (value_ns, count) for every recorded bucket, for plotting distributions.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.inner
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }
}

/// A reader of the HDR V2 deflate encoding that yields (bucket index, count) pairs, for
/// histograms laid out exactly like [`LatencyHistogram::new`] (lowest 1, 3 significant
/// digits): there, bucket index i holds the values that `value_from_index(i)` stands for.
mod fast {
    use std::io::Read;

    const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
    const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
    /// Three significant digits give 2048 sub-buckets; half of them start each bucket.
    const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 10;
    const SUB_BUCKET_HALF_COUNT: usize = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE;

    pub enum Parsed {
        /// Non-zero buckets.
        Counts(Vec<(usize, u64)>),
        /// Valid header, other layout: use the general decoder.
        OtherBounds,
    }

    fn be_u32(b: &[u8], at: usize) -> Result<u32, String> {
        b.get(at..at + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
            .ok_or_else(|| "blob ends inside its header".to_string())
    }

    fn be_u64(b: &[u8], at: usize) -> Result<u64, String> {
        b.get(at..at + 8)
            .map(|s| u64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
            .ok_or_else(|| "blob ends inside its header".to_string())
    }

    /// Lowest value of bucket index `i` (hdrhistogram's `value_for` with unit magnitude 0).
    pub fn value_from_index(i: usize) -> u64 {
        let bucket = (i >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) as i64 - 1;
        let mut sub = (i & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
        let bucket = if bucket < 0 {
            sub -= SUB_BUCKET_HALF_COUNT;
            0
        } else {
            bucket as u32
        };
        (sub as u64).checked_shl(bucket).unwrap_or(u64::MAX)
    }

    pub fn parse(bytes: &[u8], max_ns: u64) -> Result<Parsed, String> {
        if be_u32(bytes, 0)? != V2_COMPRESSED_COOKIE {
            return Err("not an HDR V2 deflate blob (wrong cookie)".into());
        }
        let len = be_u32(bytes, 4)? as usize;
        let compressed = bytes
            .get(8..8 + len)
            .ok_or("blob shorter than its declared length")?;
        let mut inner = Vec::new();
        flate2::read::ZlibDecoder::new(compressed)
            .read_to_end(&mut inner)
            .map_err(|e| format!("deflate: {e}"))?;
        if be_u32(&inner, 0)? != V2_COOKIE {
            return Err("not an HDR V2 payload (wrong inner cookie)".into());
        }
        let payload_len = be_u32(&inner, 4)? as usize;
        let normalizing_offset = be_u32(&inner, 8)?;
        let digits = be_u32(&inner, 12)?;
        let low = be_u64(&inner, 16)?;
        let high = be_u64(&inner, 24)?;
        let ratio = f64::from_bits(be_u64(&inner, 32)?);
        if normalizing_offset != 0 || ratio != 1.0 {
            return Err("unsupported HDR feature (normalizing offset or double ratio)".into());
        }
        let payload = inner
            .get(40..40 + payload_len)
            .ok_or("payload shorter than its declared length")?;
        if (low, high, digits) != (1, max_ns, 3) {
            return Ok(Parsed::OtherBounds);
        }
        let mut counts = Vec::new();
        let mut index = 0usize;
        let mut at = 0usize;
        while at < payload.len() {
            let mut v: u64 = 0;
            let mut shift = 0;
            loop {
                let b = *payload.get(at).ok_or("payload ends inside a number")?;
                at += 1;
                if shift == 56 {
                    v |= u64::from(b) << 56;
                    break;
                }
                v |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    break;
                }
                shift += 7;
            }
            let n = ((v >> 1) as i64) ^ -((v & 1) as i64);
            if n < 0 {
                index = index
                    .checked_add(n.unsigned_abs() as usize)
                    .ok_or("bucket index overflow")?;
            } else {
                if n > 0 {
                    counts.push((index, n as u64));
                }
                index = index.checked_add(1).ok_or("bucket index overflow")?;
            }
        }
        Ok(Parsed::Counts(counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_keeps_every_sample() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 3);
        }
        let back = LatencyHistogram::decode(&h.encode()).unwrap();
        assert_eq!(back.len(), 10_000);
        assert_eq!(back.summary_us(), h.summary_us());
    }

    #[test]
    fn merge_recomputes_percentiles_from_all_samples() {
        let mut fast = LatencyHistogram::new();
        let mut slow = LatencyHistogram::new();
        for _ in 0..900 {
            fast.record(1_000);
        }
        for _ in 0..100 {
            slow.record(100_000);
        }
        fast.merge(&slow);
        let s = fast.summary_us();
        assert_eq!(fast.len(), 1000);
        assert!((s.p50 - 1.0).abs() < 0.01, "p50 {}", s.p50);
        assert!((s.p99 - 100.0).abs() < 0.1, "p99 {}", s.p99);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(LatencyHistogram::decode("not base64 !!!").is_err());
        assert!(LatencyHistogram::decode("AAAA").is_err());
        let good = LatencyHistogram::new().encode();
        assert!(LatencyHistogram::decode(&good[..good.len() / 2]).is_err());
    }

    #[test]
    fn merge_encoded_equals_decode_then_merge() {
        let mut a = LatencyHistogram::new();
        let mut x: u64 = 12345;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            a.record(x % 5_000_000_000 + 1);
        }
        a.record(1);
        a.record(MAX_NS);
        let text = a.encode();
        let mut fast = LatencyHistogram::new();
        fast.record(777);
        let mut slow = fast.clone();
        assert_eq!(fast.merge_encoded(&text).unwrap(), a.len());
        slow.merge(&LatencyHistogram::decode(&text).unwrap());
        assert_eq!(fast.buckets(), slow.buckets());
        assert_eq!(fast.summary_us(), slow.summary_us());
        // Garbage and truncations are errors on the fast path too.
        assert!(fast.merge_encoded("AAAA").is_err());
        assert!(fast.merge_encoded(&text[..text.len() / 2]).is_err());
        // Other bounds take the general path and still merge.
        let mut other = Histogram::<u64>::new_with_bounds(1, 1_000_000, 2).unwrap();
        other.record(500).unwrap();
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&other, &mut bytes)
            .unwrap();
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(fast.merge_encoded(&text).unwrap(), 1);
    }

    #[test]
    fn out_of_range_values_are_clamped() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.len(), 2);
    }
}
