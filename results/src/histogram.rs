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

    /// (value_ns, count) for every recorded bucket, for plotting distributions.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.inner
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
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
    fn out_of_range_values_are_clamped() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.len(), 2);
    }
}
