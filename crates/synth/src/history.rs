//! A synthetic nightly history, in the layout `deploy/nightly.sbatch` writes, for the
//! trend tests and the trend scale benchmark (`synth history`; every document says it is
//! synthetic). One night per directory, `HISTORY/2026-01-01T0200Z-1000/results/`:
//!
//! - `lat-{send,write,read}-cross.json`: one task per node (the cross-node pass), node
//!   2k with 2k+1, every latency size, histograms included;
//! - `bw-{send,write,read}-{64K,1M}-cross.json`: the same pairs at 64 KiB and 1 MiB;
//! - `bw-1M-all.json`: every rank at once (pairs within nodes), write at 1 MiB;
//! - `collectives.json`: AllReduce, AllGather, ReduceScatter, AlltoAll on every rank.
//!
//! Each document carries a measurement-quality record. Latency histograms are drawn by
//! stratified sampling of a fixed shape, so a night's percentiles move only by what the
//! history builds in (night noise, a drift, a bad night), not by sampling luck.

use std::path::Path;

use results::quality::HostQuality;
use results::{Document, HostInfo, LatencyHistogram, Pair, TestResult};

use results::collective::{ALLTOALL, ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER};

use crate::{self as synth, Rng};

/// What the history holds.
#[derive(Debug, Clone)]
pub struct Shape {
    pub nights: u32,
    /// GPUs (ranks), 8 to a node.
    pub ranks: u32,
    /// First night, `YYYY-MM-DD`; one night a day from there.
    pub start: String,
    /// Latency sizes (`bench-lat -a`: 2 B .. 8 MiB).
    pub lat_sizes: Vec<u64>,
    /// Collective sizes (`-b 8 -e 256M -f 2`).
    pub coll_sizes: Vec<u64>,
    /// Samples per latency row.
    pub samples: u32,
    /// Night-to-night noise of every figure, fraction (0.005 = +-0.5%).
    pub noise: f64,
    /// Latency growth per night from `drift_from` on, fraction (0.004 = 0.4%/night).
    pub latency_drift: f64,
    pub drift_from: u32,
    /// Nights on which the whole fabric's bandwidth drops by `bad_drop` (a fraction).
    pub bad_nights: Vec<u32>,
    pub bad_drop: f64,
    /// Nights on which node 0 is busy with another job (its quality record says so).
    pub busy_nights: Vec<u32>,
    /// From this night on, the links of node 2 lose this fraction of their bandwidth.
    pub weak_node_from: Option<u32>,
    pub weak_node_drop: f64,
    pub seed: u64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            nights: 14,
            ranks: 32,
            start: "2026-01-01".into(),
            lat_sizes: vec![2, 64, 4096],
            coll_sizes: vec![1 << 20, 1 << 26],
            samples: 1000,
            noise: 0.003,
            latency_drift: 0.0,
            drift_from: 0,
            bad_nights: vec![],
            bad_drop: 0.3,
            busy_nights: vec![],
            weak_node_from: None,
            weak_node_drop: 0.0,
            seed: 1,
        }
    }
}

const PER_NODE: u32 = 8;

fn node(n: u32) -> String {
    format!("node{n:04}")
}

fn host(name: &str, rank: Option<u32>) -> HostInfo {
    HostInfo {
        rank,
        hostname: name.into(),
        kernel: "6.1.0-synthetic".into(),
        cpu_model: "Synthetic CPU".into(),
        cores: 64,
        numa_nodes: 2,
        ..HostInfo::default()
    }
}

/// A latency histogram of a fixed shape around `base_us` (5% tail up to 2x), drawn by
/// stratified sampling so that its percentiles are stable.
fn histogram(rng: &mut Rng, base_us: f64, n: u32) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for i in 0..n {
        let u = (f64::from(i) + rng.unit()) / f64::from(n);
        let f = if u < 0.95 {
            1.0 + 0.1 * u / 0.95
        } else {
            let t = (u - 0.95) / 0.05;
            1.1 + 0.9 * t * t
        };
        h.record((base_us * f * 1000.0) as u64);
    }
    h
}

fn latency_row(rng: &mut Rng, test: &str, size: u64, base_us: f64, p: Pair, n: u32) -> TestResult {
    synth::latency_row_of(histogram(rng, base_us, n), test, "verbs", size, base_us, p)
}

fn quality(hosts: &[HostInfo], busy: Option<&str>) -> Vec<HostQuality> {
    hosts
        .iter()
        .map(|h| {
            let load = if Some(h.hostname.as_str()) == busy {
                90.0
            } else {
                0.3
            };
            HostQuality {
                rank: h.rank,
                hostname: h.hostname.clone(),
                cores: 64,
                load_avg_before: load,
                load_avg_after: load + 1.0,
                cpu_steal_pct_before: Some(0.0),
                cpu_steal_pct: Some(0.0),
                involuntary_context_switches: Some(1),
                voluntary_context_switches: Some(20),
                duration_s: 30.0,
            }
        })
        .collect()
}

fn document(
    tool: &str,
    hosts: Vec<HostInfo>,
    results: Vec<TestResult>,
    at: &str,
    busy: Option<&str>,
) -> Document {
    let ranks = hosts.len() as u32;
    let mut d = Document::new(tool, "mpi", ranks, at.to_string());
    d.tool_version = synth::SYNTH_VERSION.into();
    d.git_commit = "synthetic".into();
    d.command_line = vec![tool.into(), "--synthetic".into()];
    d.finished_at = at.to_string();
    d.loop_overhead_ns = Some(25.0);
    d.clock = Some("tsc".into());
    d.warnings = vec![synth::SYNTH_WARNING.into()];
    let q = quality(&hosts, busy);
    d.hosts = hosts;
    d.results = results;
    d.attach_quality(q);
    d
}

/// The documents of night `night` (file name, document).
pub fn night(shape: &Shape, night: u32) -> Vec<(String, Document)> {
    let mut rng = Rng::new(shape.seed.wrapping_mul(1000) + u64::from(night));
    let jitter = |rng: &mut Rng| 1.0 + shape.noise * (2.0 * rng.unit() - 1.0);
    let day = days_from(&shape.start) + i64::from(night);
    let at = format!("{}T02:00:00Z", date_of(day));
    let nodes = (shape.ranks / PER_NODE).max(2);
    let busy = shape.busy_nights.contains(&night).then(|| node(0));
    let drift = 1.0 + shape.latency_drift * f64::from(night.saturating_sub(shape.drift_from));
    let bad = if shape.bad_nights.contains(&night) {
        1.0 - shape.bad_drop
    } else {
        1.0
    };
    let weak = |n: u32| {
        if n == 2 && shape.weak_node_from.is_some_and(|f| night >= f) {
            1.0 - shape.weak_node_drop
        } else {
            1.0
        }
    };
    // The cross-node pass: one task per node, rank r on node r.
    let cross_hosts: Vec<HostInfo> = (0..nodes).map(|n| host(&node(n), Some(n))).collect();
    let cross_pairs: Vec<(Pair, u32, u32)> = (0..nodes / 2)
        .map(|k| {
            let (a, b) = (2 * k, 2 * k + 1);
            (synth::pair(&node(a), Some(a), &node(b), Some(b)), a, b)
        })
        .collect();
    let mut out = Vec::new();
    let night_lat = jitter(&mut rng) * drift;
    for test in ["send_lat", "write_lat", "read_lat"] {
        let mut results = Vec::new();
        for (p, _, _) in &cross_pairs {
            for &s in &shape.lat_sizes {
                let base = (1.6 + s as f64 / 12_000.0) * night_lat;
                results.push(latency_row(
                    &mut rng,
                    test,
                    s,
                    base,
                    p.clone(),
                    shape.samples,
                ));
            }
        }
        out.push((
            format!("lat-{}-cross.json", &test[..test.len() - 4]),
            document(
                "bench-lat",
                cross_hosts.clone(),
                results,
                &at,
                busy.as_deref(),
            ),
        ));
    }
    let night_bw = jitter(&mut rng) * bad;
    for test in ["send_bw", "write_bw", "read_bw"] {
        for (size, label) in [(65536u64, "64K"), (1 << 20, "1M")] {
            let results = cross_pairs
                .iter()
                .map(|(p, a, b)| {
                    let g = 97.0
                        * (size as f64 / (size as f64 + 1024.0))
                        * night_bw
                        * weak(*a).min(weak(*b));
                    synth::bandwidth_row(
                        &mut rng,
                        test,
                        "verbs",
                        size,
                        g,
                        0.01,
                        0.3,
                        p.clone(),
                        Some(synth::counters(10_000_000, 5)),
                    )
                })
                .collect();
            out.push((
                format!("bw-{}-{label}-cross.json", &test[..test.len() - 3]),
                document(
                    "bench-bw",
                    cross_hosts.clone(),
                    results,
                    &at,
                    busy.as_deref(),
                ),
            ));
        }
    }
    // Every rank at once: pairs within nodes.
    let all_hosts: Vec<HostInfo> = (0..nodes * PER_NODE)
        .map(|r| host(&node(r / PER_NODE), Some(r)))
        .collect();
    let results = (0..nodes * PER_NODE / 2)
        .map(|k| {
            let (a, b) = (2 * k, 2 * k + 1);
            let n = a / PER_NODE;
            let p = synth::pair(&node(n), Some(a), &node(n), Some(b));
            synth::bandwidth_row(
                &mut rng,
                "write_bw",
                "verbs",
                1 << 20,
                95.0 * night_bw,
                0.01,
                0.3,
                p,
                Some(synth::counters(10_000_000, 5)),
            )
        })
        .collect();
    out.push((
        "bw-1M-all.json".into(),
        document("bench-bw", all_hosts.clone(), results, &at, busy.as_deref()),
    ));
    let night_coll = jitter(&mut rng) * bad;
    let mut results = Vec::new();
    for c in [&ALL_REDUCE, &ALL_GATHER, &REDUCE_SCATTER, &ALLTOALL] {
        for &s in &shape.coll_sizes {
            let b = 11.9 * (s as f64 / (s as f64 + 65536.0)) * night_coll;
            results.push(synth::collective_row(
                &mut rng,
                c,
                nodes * PER_NODE,
                s,
                b,
                100.0,
            ));
        }
    }
    out.push((
        "collectives.json".into(),
        document("bench-collective", all_hosts, results, &at, busy.as_deref()),
    ));
    out
}

/// The directory name nightly.sbatch gives night `n`.
pub fn night_dir(shape: &Shape, n: u32) -> String {
    let day = days_from(&shape.start) + i64::from(n);
    format!("{}T0200Z-{}", date_of(day), 1000 + n)
}

/// Writes the whole history under `dir`. Returns the night directories written.
pub fn write(dir: &Path, shape: &Shape) -> std::io::Result<Vec<String>> {
    let mut written = Vec::new();
    for n in 0..shape.nights {
        let name = night_dir(shape, n);
        let results = dir.join(&name).join("results");
        std::fs::create_dir_all(&results)?;
        for (file, doc) in night(shape, n) {
            results::write::write_json_atomic(&results.join(file), &doc)?;
        }
        written.push(name);
    }
    Ok(written)
}

/// (year, month, day) of `YYYY-MM-DD`, when it is one.
pub fn parse_date(date: &str) -> Option<(i64, i64, i64)> {
    let p: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    match p[..] {
        [y, m, d]
            if (1970..10000).contains(&y) && (1..=12).contains(&m) && (1..=31).contains(&d) =>
        {
            Some((y, m, d))
        }
        _ => None,
    }
}

/// Days since 1970-01-01 of `YYYY-MM-DD` (proleptic Gregorian); 0 when not a date.
fn days_from(date: &str) -> i64 {
    let Some((y, m, d)) = parse_date(date) else {
        return 0;
    };
    let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m - 3) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD` of a day count since 1970-01-01.
fn date_of(days: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs((days * 86400) as u64);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_nights_are_deterministic() {
        assert_eq!(days_from("1970-01-01"), 0);
        assert_eq!(date_of(days_from("2026-02-28") + 1), "2026-03-01");
        assert_eq!(date_of(days_from("2024-02-28") + 1), "2024-02-29");
        let s = Shape::default();
        assert_eq!(night_dir(&s, 31), "2026-02-01T0200Z-1031");
        let a = night(&s, 3);
        let b = night(&s, 3);
        assert_eq!(a.len(), 11);
        assert_eq!(
            serde_json::to_string(&a[0].1).unwrap(),
            serde_json::to_string(&b[0].1).unwrap()
        );
        assert!(a.iter().all(|(_, d)| d.quality.is_some()));
    }
}
