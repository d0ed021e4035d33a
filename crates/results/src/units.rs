//! Units and sizes. Bandwidth is decimal, as the field quotes it: 1 Gb/s = 10^9 bit/s
//! (perftest's `Gb/sec`), 1 GB/s = 10^9 byte/s (nccl-tests' `algbw`/`busbw`).

/// 10^9 bit/s for `bytes` moved in `seconds`.
pub fn gbit_s(bytes: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / seconds / 1e9
}

/// 10^9 byte/s for `bytes` moved in `seconds`.
pub fn gbyte_s(bytes: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes as f64 / seconds / 1e9
}

/// Millions of messages per second.
pub fn mpps(messages: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    messages as f64 / seconds / 1e6
}

/// Parses a size the way perftest and nccl-tests users type it: `64`, `4K`, `1M`, `2G`
/// (binary multiples, case-insensitive, optional trailing `B`/`iB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| t.strip_suffix('B'))
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a size (examples: 64, 4K, 1M, 2G)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// Short human form of a byte count for tables and logs: `8`, `4K`, `1M`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (div, suffix) in UNITS {
        if bytes >= div && bytes.is_multiple_of(div) {
            return format!("{}{suffix}", bytes / div);
        }
    }
    bytes.to_string()
}

/// Powers of two from `min` to `max` inclusive (perftest `-a`: 2 B .. 8 MiB).
pub fn power_of_two_sizes(min: u64, max: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut s = min.max(1).next_power_of_two();
    while s <= max {
        sizes.push(s);
        s *= 2;
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("8MB").unwrap(), 8 << 20);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn sizes_format_round_trip() {
        for s in [1u64, 3, 1024, 4096, 1 << 20, 3 << 20, 1 << 30] {
            assert_eq!(parse_size(&format_size(s)).unwrap(), s);
        }
    }

    #[test]
    fn perftest_all_sizes_are_2_to_8m() {
        let s = power_of_two_sizes(2, 8 << 20);
        assert_eq!(s.first(), Some(&2));
        assert_eq!(s.last(), Some(&(8 << 20)));
        assert_eq!(s.len(), 23);
    }

    #[test]
    fn bandwidth_is_decimal() {
        assert_eq!(gbit_s(125_000_000, 1.0), 1.0);
        assert_eq!(gbyte_s(2_000_000_000, 2.0), 1.0);
        assert_eq!(mpps(3_000_000, 1.5), 2.0);
        assert_eq!(gbit_s(1, 0.0), 0.0);
    }
}
