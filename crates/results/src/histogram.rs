//! HDR latency histograms: recorded in the measurement loop, summarised for tables, carried
//! inside JSON as base64 HDR V2+deflate so `aggregate` can merge ranks, pairs and runs and
//! recompute percentiles from the merge instead of averaging percentiles (which is wrong).
//!
//! Values are nanoseconds. Three significant digits: 1 ns resolution below 1 us,
//! 1 us resolution near 1 ms, which is finer than any fabric jitter worth reporting.

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
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

/// A latency row's figures as perftest's `ib_*_lat` prints them (perftest 26.04,
/// `print_report_lat`), in microseconds: the samples sorted and the two largest dropped
/// (`LAT_MEASURE_TAIL`) before the median, the average and the standard deviation; the
/// percentiles are the samples at index ceil(m x 0.99) and ceil(m x 0.999) of the sorted
/// list, m being the number kept; `t_max` is the sample at index m, the second largest.
/// A table of bench-lat then reads as perftest's would over the same samples, where
/// [`LatencySummary`] counts every sample (one stray millisecond moves its mean).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct PerftestLatency {
    pub t_max: f64,
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p999: f64,
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

    /// [`PerftestLatency`] of the samples (each value its bucket's, 3 significant digits);
    /// `None` under three samples, where perftest's method has nothing left to report.
    pub fn perftest_us(&self) -> Option<PerftestLatency> {
        let h = &self.inner;
        let n = h.len();
        if n < 3 {
            return None;
        }
        let kept = n - 2;
        // Ascending (bucket value, samples at or below it).
        let mut cum = Vec::new();
        let mut seen = 0u64;
        for v in h.iter_recorded() {
            seen += v.count_at_value();
            cum.push((v.value_iterated_to(), seen));
        }
        let at = |k: u64| -> f64 {
            let i = cum.partition_point(|&(_, c)| c <= k);
            cum.get(i)
                .or(cum.last())
                .map_or(0.0, |&(v, _)| v as f64 / 1000.0)
        };
        // Sums over the kept samples, each at its bucket's middle (as the mean of
        // `summary_us`).
        let (mut sum, mut left) = (0.0f64, kept);
        let mut kept_values: Vec<(f64, u64)> = Vec::new();
        for v in h.iter_recorded() {
            if left == 0 {
                break;
            }
            let take = v.count_at_value().min(left);
            let x = h.median_equivalent(v.value_iterated_to()) as f64 / 1000.0;
            sum += x * take as f64;
            kept_values.push((x, take));
            left -= take;
        }
        let avg = sum / kept as f64;
        let var = kept_values
            .iter()
            .map(|&(x, c)| (x - avg) * (x - avg) * c as f64)
            .sum::<f64>()
            / kept as f64;
        // perftest's median of the kept: the middle one, or the mean of the two middle.
        let typical = if kept.is_multiple_of(2) {
            (at(kept / 2) + at(kept / 2 - 1)) / 2.0
        } else {
            at(kept / 2)
        };
        let index = |q: f64| ((kept as f64) * q).ceil() as u64;
        Some(PerftestLatency {
            t_max: at(kept),
            t_typical: typical,
            t_avg: avg,
            t_stdev: var.sqrt(),
            p99: at(index(0.99)),
            p999: at(index(0.999)),
        })
    }

    /// Base64 of the HDR V2+deflate encoding (the JSON `histogram` field).
    pub fn encode(&self) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.inner, &mut bytes)
            .expect("serializing into a Vec cannot fail");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Inverse of [`encode`](Self::encode), for any valid HDR V2 deflate blob no bigger
    /// than fabcheck's own (see [`merge_encoded`](Self::merge_encoded) for the bounds):
    /// the samples land in a histogram of this crate's layout, values beyond its range
    /// clamped.
    pub fn decode(text: &str) -> Result<Self, HistogramError> {
        let mut h = Self::new();
        h.merge_encoded(text)?;
        Ok(h)
    }

    /// Adds every sample of an encoded histogram (the JSON `histogram` field) and returns
    /// the number of samples added. The blob is inflated only as far as its declared
    /// payload, which may not exceed what the counts array of its declared range and
    /// precision can take, and that array may not exceed this crate's own ([`MAX_COUNTS`]
    /// buckets): memory and work per blob are bounded (about 300 KB) whatever it
    /// declares, and no counts array is allocated for it. A blob that declares more,
    /// declares a payload longer than such an array can take, inflates beyond its declared
    /// payload, or counts past its last bucket is refused, so a few hundred bytes of JSON
    /// cannot make a reader inflate gigabytes (a "deflate bomb").
    pub fn merge_encoded(&mut self, text: &str) -> Result<u64, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
        let mut total = 0u64;
        let ours = wire::Layout::of(1, MAX_NS, 3).expect("own layout is valid");
        wire::read(&bytes, |layout, index, count| {
            total = add_samples(total, count)?;
            if self.inner.len() > MAX_MERGED_SAMPLES - count {
                return Err(format!(
                    "merged histograms would hold more than {MAX_MERGED_SAMPLES} samples"
                ));
            }
            let value = if *layout == ours {
                wire::value_from_index(&ours, index)
            } else {
                // Another layout: re-record the bucket's lowest value (clamped to range).
                wire::value_from_index(layout, index).max(1)
            };
            self.inner.saturating_record_n(value, count);
            Ok(())
        })
        .map_err(HistogramError::Hdr)?;
        Ok(total)
    }

    /// Checks an encoded histogram as [`merge_encoded`](Self::merge_encoded) would read it,
    /// without keeping anything: the sample count, or why it is refused.
    pub fn validate_encoded(text: &str) -> Result<u64, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
        let mut total = 0u64;
        wire::read(&bytes, |_, _, count| {
            total = add_samples(total, count)?;
            Ok(())
        })
        .map_err(HistogramError::Hdr)?;
        Ok(total)
    }

    /// (value_ns, count) for every recorded bucket, for plotting distributions.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.inner
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }
}

/// Most samples one encoded histogram may claim: 2^40, a million million, twelve days of
/// one-microsecond round trips. A count beyond it is corruption or an attack; refusing it
/// keeps every sum of counts far from overflowing `u64` (hdrhistogram's percentile scan
/// adds bucket counts without saturating).
pub const MAX_SAMPLES: u64 = 1 << 40;

/// Most samples a merged histogram may hold (2^62): merging stops with an error there.
pub const MAX_MERGED_SAMPLES: u64 = 1 << 62;

fn add_samples(total: u64, count: u64) -> Result<u64, String> {
    total
        .checked_add(count)
        .filter(|&t| t <= MAX_SAMPLES)
        .ok_or_else(|| format!("claims more than {MAX_SAMPLES} samples (2^40): a corrupt count"))
}

/// Buckets of this crate's layout (lowest 1 ns, highest one hour, 3 significant digits):
/// the largest counts array a decoded histogram may declare. About 270 KB of `u64`s.
pub const MAX_COUNTS: usize = 33_792;

/// A bounded reader of the HDR V2 deflate encoding (`V2DeflateSerializer`): an 8-byte
/// frame (cookie, compressed length) around a zlib stream holding a 40-byte header
/// (cookie, payload length, normalizing offset, significant digits, lowest and highest
/// trackable value, integer-to-double ratio) and the counts as zig-zag LEB128 varints,
/// a run of N empty buckets written as -N.
mod wire {
    const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
    const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
    /// A varint of this encoding is at most 9 bytes (the 9th carries a full byte).
    const MAX_VARINT_BYTES: usize = 9;
    const HEADER_BYTES: usize = 40;

    /// The counts array a header declares, as hdrhistogram lays it out.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Layout {
        unit_magnitude: u32,
        sub_bucket_half_count_magnitude: u32,
        /// Length of the counts array.
        pub counts_len: usize,
    }

    impl Layout {
        /// hdrhistogram's `new_with_bounds(low, high, digits)` arithmetic, checked.
        pub fn of(low: u64, high: u64, digits: u32) -> Result<Layout, String> {
            if low < 1 || digits > 5 || high < low.saturating_mul(2) {
                return Err(format!(
                    "impossible bounds (lowest {low}, highest {high}, {digits} significant digits)"
                ));
            }
            let unit_magnitude = 63 - low.leading_zeros();
            let single_unit = 2 * 10u64.pow(digits);
            let sub_bucket_count_magnitude = 64 - (single_unit - 1).leading_zeros();
            let sub_bucket_half_count_magnitude = sub_bucket_count_magnitude.max(1) - 1;
            if unit_magnitude + sub_bucket_half_count_magnitude + 1 > 63 {
                return Err("lowest value too large for its precision".into());
            }
            let sub_bucket_count = 1u64 << (sub_bucket_half_count_magnitude + 1);
            let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
            let mut buckets = 1usize;
            while smallest_untrackable <= high {
                if smallest_untrackable > u64::MAX / 2 {
                    buckets += 1;
                    break;
                }
                smallest_untrackable <<= 1;
                buckets += 1;
            }
            Ok(Layout {
                unit_magnitude,
                sub_bucket_half_count_magnitude,
                counts_len: (buckets + 1) * (sub_bucket_count as usize / 2),
            })
        }
    }

    /// Lowest value of bucket `index` (hdrhistogram's `value_for`).
    pub fn value_from_index(l: &Layout, index: usize) -> u64 {
        let half = 1usize << l.sub_bucket_half_count_magnitude;
        let bucket = (index >> l.sub_bucket_half_count_magnitude) as i64 - 1;
        let mut sub = (index & (half - 1)) + half;
        let bucket = if bucket < 0 {
            sub -= half;
            0
        } else {
            bucket as u32
        };
        (sub as u64)
            .checked_shl(bucket + l.unit_magnitude)
            .filter(|v| v >> (bucket + l.unit_magnitude) == sub as u64)
            .unwrap_or(u64::MAX)
    }

    fn be_u32(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    fn be_u64(b: &[u8], at: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[at..at + 8]);
        u64::from_be_bytes(x)
    }

    /// Reads one blob, calling `bucket(layout, index, count)` for every non-empty bucket.
    pub fn read(
        bytes: &[u8],
        mut bucket: impl FnMut(&Layout, usize, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        if bytes.len() < 8 {
            return Err("blob ends inside its header".into());
        }
        if be_u32(bytes, 0) != V2_COMPRESSED_COOKIE {
            return Err("not an HDR V2 deflate blob (wrong cookie)".into());
        }
        let len = be_u32(bytes, 4) as usize;
        let compressed = bytes
            .get(8..8usize.saturating_add(len))
            .ok_or("blob shorter than its declared length")?;
        INFLATE.with(|cell| {
            let (z, payload) = &mut *cell.borrow_mut();
            z.reset(true);
            let mut at = 0usize;
            let mut header = [0u8; HEADER_BYTES];
            if inflate_into(z, compressed, &mut at, &mut header)? < HEADER_BYTES {
                return Err("blob ends inside its header".to_string());
            }
            let layout = check_header(&header)?;
            // Never inflate more than the declared payload (at most 9 bytes a bucket of a
            // layout no larger than ours: about 300 KB), then one byte more to see whether
            // the stream holds more than it declared.
            let payload_len = be_u32(&header, 4) as usize;
            payload.clear();
            payload.resize(payload_len + 1, 0);
            let got = inflate_into(z, compressed, &mut at, payload)?;
            if got < payload_len {
                return Err("payload shorter than its declared length".into());
            }
            if got > payload_len {
                return Err("inflates to more than its declared payload".into());
            }
            counts(&layout, &payload[..payload_len], &mut bucket)
        })
    }

    thread_local! {
        /// One inflater and payload buffer per thread, reset between blobs: a report
        /// reads tens of thousands of histograms, and a fresh inflater per blob (tens of
        /// KB allocated and cleared) was a tenth of the time spent decoding them.
        static INFLATE: std::cell::RefCell<(flate2::Decompress, Vec<u8>)> =
            std::cell::RefCell::new((flate2::Decompress::new(true), Vec::new()));
    }

    /// Inflates from `input[*at..]` into `out` until `out` is full or the stream ends;
    /// returns how many bytes were written and advances `at` past what was consumed.
    fn inflate_into(
        z: &mut flate2::Decompress,
        input: &[u8],
        at: &mut usize,
        out: &mut [u8],
    ) -> Result<usize, String> {
        let mut filled = 0;
        while filled < out.len() {
            let (in0, out0) = (z.total_in(), z.total_out());
            let status = z
                .decompress(
                    &input[*at..],
                    &mut out[filled..],
                    flate2::FlushDecompress::None,
                )
                .map_err(|e| format!("deflate: {e}"))?;
            *at += (z.total_in() - in0) as usize;
            let wrote = (z.total_out() - out0) as usize;
            filled += wrote;
            if status == flate2::Status::StreamEnd || (wrote == 0 && z.total_in() == in0) {
                break;
            }
        }
        Ok(filled)
    }

    /// The layout the 40-byte payload header declares, refused when it is one this
    /// reader does not take or larger than fabcheck's own.
    fn check_header(header: &[u8; HEADER_BYTES]) -> Result<Layout, String> {
        if be_u32(header, 0) != V2_COOKIE {
            return Err("not an HDR V2 payload (wrong inner cookie)".into());
        }
        let payload_len = be_u32(header, 4) as usize;
        let normalizing_offset = be_u32(header, 8);
        let digits = be_u32(header, 12);
        let (low, high) = (be_u64(header, 16), be_u64(header, 24));
        let ratio = f64::from_bits(be_u64(header, 32));
        if normalizing_offset != 0 || ratio != 1.0 {
            return Err("unsupported HDR feature (normalizing offset or double ratio)".into());
        }
        let layout = Layout::of(low, high, digits)?;
        if layout.counts_len > super::MAX_COUNTS {
            return Err(format!(
                "declares {} buckets (lowest {low}, highest {high}, {digits} digits); at most {} \
                 are read (fabcheck's own layout)",
                layout.counts_len,
                super::MAX_COUNTS
            ));
        }
        let max_payload = layout.counts_len * MAX_VARINT_BYTES;
        if payload_len > max_payload {
            return Err(format!(
                "declares a payload of {payload_len} bytes; its {} buckets take at most \
                 {max_payload}",
                layout.counts_len
            ));
        }
        Ok(layout)
    }

    /// Walks the zig-zag varint counts, calling `bucket` for every non-empty bucket.
    fn counts(
        layout: &Layout,
        payload: &[u8],
        bucket: &mut impl FnMut(&Layout, usize, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        let past = || {
            format!(
                "counts run past the histogram's {} buckets",
                layout.counts_len
            )
        };
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
            let step = if n < 0 { n.unsigned_abs() } else { 1 };
            if n > 0 {
                if index >= layout.counts_len {
                    return Err(past());
                }
                bucket(layout, index, n as u64)?;
            }
            index = usize::try_from(step)
                .ok()
                .and_then(|s| index.checked_add(s))
                .filter(|&i| i <= layout.counts_len)
                .ok_or_else(past)?;
        }
        Ok(())
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
        // The reference: hdrhistogram's own deserializer.
        slow.merge(&reference_decode(&text));
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

    fn reference_decode(text: &str) -> LatencyHistogram {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap();
        let inner: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        LatencyHistogram { inner }
    }

    /// An HDR V2 deflate blob with this header and payload, compressed as written.
    fn blob(payload_len: u32, digits: u32, low: u64, high: u64, payload: &[u8]) -> String {
        use std::io::Write;
        let mut inner = Vec::new();
        inner.extend((0x1c84_9303u32 | 0x10).to_be_bytes());
        inner.extend(payload_len.to_be_bytes());
        inner.extend(0u32.to_be_bytes());
        inner.extend(digits.to_be_bytes());
        inner.extend(low.to_be_bytes());
        inner.extend(high.to_be_bytes());
        inner.extend(1.0f64.to_bits().to_be_bytes());
        inner.extend(payload);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&inner).unwrap();
        let compressed = z.finish().unwrap();
        let mut out = Vec::new();
        out.extend((0x1c84_9304u32 | 0x10).to_be_bytes());
        out.extend((compressed.len() as u32).to_be_bytes());
        out.extend(compressed);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    #[test]
    fn own_layout_size_is_what_hdrhistogram_allocates() {
        let h = LatencyHistogram::new();
        assert_eq!(h.inner.distinct_values(), MAX_COUNTS);
        assert_eq!(
            wire::Layout::of(1, MAX_NS, 3).unwrap().counts_len,
            MAX_COUNTS
        );
        for (low, high, digits) in [
            (1, 1_000_000, 2),
            (1000, 1 << 40, 3),
            (1, 2, 0),
            (7, 100, 1),
        ] {
            let reference = Histogram::<u64>::new_with_bounds(low, high, digits as u8).unwrap();
            assert_eq!(
                wire::Layout::of(low, high, digits).unwrap().counts_len,
                reference.distinct_values(),
                "{low} {high} {digits}"
            );
        }
    }

    #[test]
    fn bombs_are_refused_without_inflating_them() {
        // 400 MB of zero counts declared and present: the blob is a few hundred KB.
        let zeros = vec![0u8; 4 << 20];
        let e = LatencyHistogram::decode(&blob(400 << 20, 3, 1, MAX_NS, &zeros)).unwrap_err();
        assert!(e.to_string().contains("declares a payload of"), "{e}");
        assert!(!e.to_string().contains("  "), "{e}");
        // A payload within the bound that counts past the last bucket.
        let e =
            LatencyHistogram::decode(&blob(300_000, 3, 1, MAX_NS, &zeros[..300_000])).unwrap_err();
        assert!(e.to_string().contains("run past"), "{e}");
        // More inflated data than declared.
        let e = LatencyHistogram::decode(&blob(2, 3, 1, MAX_NS, &[2, 2, 2, 2])).unwrap_err();
        assert!(e.to_string().contains("more than its declared"), "{e}");
        // A range and precision whose counts array is bigger than ours.
        let e = LatencyHistogram::decode(&blob(2, 5, 1, u64::MAX / 2, &[2, 2])).unwrap_err();
        assert!(e.to_string().contains("buckets"), "{e}");
        assert!(!e.to_string().contains("  "), "{e}");
        // A negative run of 2^62 buckets.
        let run = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        let e = LatencyHistogram::decode(&blob(9, 3, 1, MAX_NS, &run)).unwrap_err();
        assert!(e.to_string().contains("run past"), "{e}");
        // Impossible bounds.
        assert!(LatencyHistogram::decode(&blob(0, 3, 0, MAX_NS, &[])).is_err());
        assert!(LatencyHistogram::decode(&blob(0, 9, 1, MAX_NS, &[])).is_err());
        assert!(LatencyHistogram::decode(&blob(0, 3, 100, 150, &[])).is_err());
        // Declared longer than present.
        let e = LatencyHistogram::decode(&blob(10, 3, 1, MAX_NS, &[2, 2])).unwrap_err();
        assert!(e.to_string().contains("shorter"), "{e}");
    }

    #[test]
    fn huge_counts_are_refused_and_sums_never_overflow() {
        // Every bucket near u64::MAX: refused, as is one count over 2^40.
        let big = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let payload: Vec<u8> = big.iter().copied().cycle().take(9 * 100).collect();
        let text = blob(900, 3, 1, MAX_NS, &payload);
        let e = LatencyHistogram::validate_encoded(&text).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        assert!(LatencyHistogram::new().merge_encoded(&text).is_err());
        // Exactly 2^40 samples is fine, and merging many such keeps percentiles working.
        let mut one = LatencyHistogram::new();
        one.inner.saturating_record_n(1000, MAX_SAMPLES);
        let text = one.encode();
        assert_eq!(
            LatencyHistogram::validate_encoded(&text).unwrap(),
            MAX_SAMPLES
        );
        let mut h = LatencyHistogram::new();
        for _ in 0..64 {
            h.merge_encoded(&text).unwrap();
        }
        assert_eq!(h.len(), 64 * MAX_SAMPLES);
        let s = h.summary_us();
        assert!((s.p99 - 1.0).abs() < 0.01, "{s:?}");
    }

    #[test]
    fn perftest_figures_drop_the_two_largest_samples_as_perftest_does() {
        // 1..100 us, then two stray milliseconds.
        let mut h = LatencyHistogram::new();
        for us in 1..=100u64 {
            h.record(us * 1000);
        }
        h.record(10_000_000);
        h.record(20_000_000);
        let p = h.perftest_us().unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.002;
        assert!(close(p.t_avg, 50.5), "{p:?}");
        assert!(close(p.t_stdev, (9999.0f64 / 12.0).sqrt()), "{p:?}");
        assert!(close(p.t_typical, 50.5), "{p:?}");
        assert!(close(p.p99, 100.0), "{p:?}");
        // The second largest sample, as perftest's delta[measure_cnt].
        assert!(close(p.t_max, 10_000.0), "{p:?}");
        assert!(close(p.p999, 10_000.0), "{p:?}");
        // Every sample counted: the strays move the mean by 0.3 ms.
        let all = h.summary_us();
        assert!(all.mean > 340.0 && close(all.max, 20_000.0), "{all:?}");
        // An odd count kept: the middle sample.
        let mut odd = LatencyHistogram::new();
        for us in [5u64, 1, 3, 9, 9] {
            odd.record(us * 1000);
        }
        let p = odd.perftest_us().unwrap();
        assert!(close(p.t_typical, 3.0) && close(p.t_avg, 3.0), "{p:?}");
        assert!(close(p.t_max, 9.0), "{p:?}");
        assert_eq!(LatencyHistogram::new().perftest_us(), None);
    }

    #[test]
    fn out_of_range_values_are_clamped() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.len(), 2);
    }
}
