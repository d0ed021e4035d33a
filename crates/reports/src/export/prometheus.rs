//! node_exporter textfile collector format (`*.prom` in `--collector.textfile.directory`):
//! one gauge family per figure, base units in the names (seconds, bytes per second,
//! ratios: Prometheus wants bytes, so 100 Gb/s exports as 12.5e9), labels for tool, test,
//! transport, size and the host pair, so Grafana can chart every link of the fabric night
//! after night.

use std::collections::BTreeMap;
use std::fmt::Write;

use results::tenants::Tenants;
use results::{LatencyHistogram, LatencySummary, TestResult};

use super::{ExportData, Exporter};
use verdict::error::Result;
use verdict::metric::{fluctuation_pct, link_loss_pct, Metric};

/// The Prometheus exporter.
pub struct Prometheus;

/// Label set, in a fixed order so output is stable.
type Labels = Vec<(&'static str, String)>;

// Label values go through the one escaping layer of this format.
use verdict::escape::prometheus_label as escape;

fn render_labels(l: &Labels) -> String {
    if l.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = l
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A gauge family being filled: HELP text and samples by label set (last write wins, so a
/// label set never appears twice, which Prometheus would reject).
struct Family {
    help: &'static str,
    samples: BTreeMap<String, f64>,
}

#[derive(Default)]
struct Out {
    families: BTreeMap<&'static str, Family>,
}

impl Out {
    fn set(&mut self, name: &'static str, help: &'static str, labels: &Labels, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.families
            .entry(name)
            .or_insert_with(|| Family {
                help,
                samples: BTreeMap::new(),
            })
            .samples
            .insert(render_labels(labels), v);
    }

    /// The sample already set for this label set, else 0 (figures kept as a maximum
    /// over several runs).
    fn current(&self, name: &str, labels: &Labels) -> f64 {
        self.families
            .get(name)
            .and_then(|f| f.samples.get(&render_labels(labels)))
            .copied()
            .unwrap_or(0.0)
    }

    fn text(&self) -> String {
        let mut s = String::new();
        for (name, f) in &self.families {
            let _ = writeln!(s, "# HELP {name} {}", f.help);
            let _ = writeln!(s, "# TYPE {name} gauge");
            for (labels, v) in &f.samples {
                let _ = writeln!(s, "{name}{labels} {v}");
            }
        }
        s
    }
}

/// A pair's labels. With tenants known (`--tenants`, or the plan's), each end's tenant
/// too (`initiator_tenant`, `responder_tenant`; `untenanted` for a node of none), so a
/// provider's Grafana can chart one tenant's links and alert on a pair across tenants;
/// without tenants the label sets stay as they were, so existing series do not break.
fn pair_labels(
    tenants: Option<&Tenants>,
    tool: &str,
    test: &str,
    transport: &str,
    size: u64,
    p: &results::Pair,
) -> Labels {
    let side = |peer: &results::Peer| match peer.rank {
        Some(r) => format!("{}:{r}", peer.host),
        None => peer.host.clone(),
    };
    let mut labels = vec![
        ("tool", tool.to_string()),
        ("test", test.to_string()),
        ("transport", transport.to_string()),
        ("size_bytes", size.to_string()),
        ("initiator", side(&p.initiator)),
        ("responder", side(&p.responder)),
    ];
    if let Some(t) = tenants {
        let of = |peer: &results::Peer| {
            t.of_node(&peer.host)
                .map_or_else(|| "untenanted".to_string(), |x| x.name.clone())
        };
        labels.push(("initiator_tenant", of(&p.initiator)));
        labels.push(("responder_tenant", of(&p.responder)));
    }
    labels
}

impl Exporter for Prometheus {
    fn serialize(&self, data: &ExportData) -> Result<Vec<u8>> {
        let mut out = Out::default();
        latency_percentiles(&mut out, data);
        for d in data.docs {
            let tool = &d.doc.tool;
            for r in &d.doc.results {
                match r {
                    TestResult::Bandwidth(b) => bandwidth(&mut out, data.tenants, tool, b),
                    TestResult::Latency(l) => latency_loss(&mut out, data.tenants, tool, l),
                    TestResult::Collective(c) => collective(&mut out, c),
                }
            }
            run_facts(&mut out, &d.doc);
        }
        if let Some(v) = data.verdict {
            verdict_states(&mut out, v);
        }
        Ok(out.text().into_bytes())
    }
}

/// Latency per pair: one row per pair and size, or several runs of it merged through
/// their histograms, exported by percentile.
fn latency_percentiles(out: &mut Out, data: &ExportData) {
    let mut lat: BTreeMap<Labels, Vec<&results::LatencyResult>> = BTreeMap::new();
    for d in data.docs {
        for r in &d.doc.results {
            if let TestResult::Latency(l) = r {
                lat.entry(pair_labels(
                    data.tenants,
                    &d.doc.tool,
                    &l.test,
                    &results::transport_label(&l.transport, l.memory.as_ref()),
                    l.size_bytes,
                    &l.pair,
                ))
                .or_default()
                .push(l);
            }
        }
    }
    for (labels, rows) in lat {
        let s: LatencySummary = if rows.len() == 1 {
            rows[0].latency_us
        } else {
            let mut h = LatencyHistogram::new();
            for r in &rows {
                let _ = h.merge_encoded(&r.histogram);
            }
            h.summary_us()
        };
        for (p, v) in [
            ("p50", s.p50),
            ("p90", s.p90),
            ("p99", s.p99),
            ("p999", s.p999),
            ("max", s.max),
        ] {
            let mut l = labels.clone();
            l.push(("percentile", p.to_string()));
            out.set(
                "fabcheck_latency_seconds",
                "One-way message latency (round trip / 2), by percentile over every sample of the pair.",
                &l,
                v / 1e6,
            );
        }
    }
}

const LINK_LOSS_HELP: &str =
    "Retransmitted or erroneous packets over packets sent, from NIC counter deltas.";

/// A bandwidth row: avg and peak, message rate, fluctuation, each side's CPU, link loss.
fn bandwidth(out: &mut Out, tenants: Option<&Tenants>, tool: &str, b: &results::BandwidthResult) {
    // GPU-memory rows carry `verbs+cuda` ...: a series per memory kind.
    let transport = results::transport_label(&b.transport, b.memory.as_ref());
    let mut labels = pair_labels(tenants, tool, &b.test, &transport, b.size_bytes, &b.pair);
    labels.push(("bidirectional", b.bidirectional.to_string()));
    for (stat, v) in [("avg", b.bw_gbit_s.avg), ("peak", b.bw_gbit_s.peak)] {
        let mut l = labels.clone();
        l.push(("stat", stat.to_string()));
        out.set(
            "fabcheck_bandwidth_bytes_per_second",
            "Streaming bandwidth (Prometheus base unit: bytes; 100 Gb/s is 12.5e9): avg over the timed loop, peak = best interval.",
            &l,
            v * 1e9 / 8.0,
        );
    }
    out.set(
        "fabcheck_message_rate_per_second",
        "Messages completed per second.",
        &labels,
        b.msg_rate_mpps * 1e6,
    );
    if let Some(f) = fluctuation_pct(&b.interval_gbit_s) {
        out.set(
            "fabcheck_bandwidth_fluctuation_ratio",
            "Largest deviation of one interval sample from the run's mean, over the mean.",
            &labels,
            f / 100.0,
        );
    }
    for (side, v) in [
        ("initiator", b.cpu.initiator_cores),
        ("responder", b.cpu.responder_cores),
    ] {
        let mut l = labels.clone();
        l.push(("side", side.to_string()));
        out.set(
            "fabcheck_cpu_busy_cores",
            "CPU cores busy (user + system seconds per second) on one side during the timed loop.",
            &l,
            v,
        );
    }
    if let Some(loss) = b.counters.as_ref().and_then(link_loss_pct) {
        out.set(
            "fabcheck_link_loss_ratio",
            LINK_LOSS_HELP,
            &labels,
            loss / 100.0,
        );
    }
}

/// A latency row's link loss (its percentiles are exported per pair, merged).
fn latency_loss(out: &mut Out, tenants: Option<&Tenants>, tool: &str, l: &results::LatencyResult) {
    if let Some(loss) = l.counters.as_ref().and_then(link_loss_pct) {
        let transport = results::transport_label(&l.transport, l.memory.as_ref());
        let labels = pair_labels(tenants, tool, &l.test, &transport, l.size_bytes, &l.pair);
        out.set(
            "fabcheck_link_loss_ratio",
            LINK_LOSS_HELP,
            &labels,
            loss / 100.0,
        );
    }
}

/// A collective row, nccl-tests' figures per placement, and its efficiency.
fn collective(out: &mut Out, c: &results::CollectiveResult) {
    let base: Labels = vec![
        ("collective", c.collective.clone()),
        ("backend", c.backend.clone()),
        ("ranks", c.ranks.to_string()),
        ("size_bytes", c.size_bytes.to_string()),
        ("datatype", c.datatype.clone()),
    ];
    for (place, t) in [("out_of_place", &c.out_of_place), ("in_place", &c.in_place)] {
        let mut l = base.clone();
        l.push(("placement", place.to_string()));
        out.set(
            "fabcheck_collective_bus_bandwidth_bytes_per_second",
            "nccl-tests bus bandwidth (algbw times the collective's bus factor).",
            &l,
            t.busbw_gbyte_s * 1e9,
        );
        out.set(
            "fabcheck_collective_algorithm_bandwidth_bytes_per_second",
            "nccl-tests algorithm bandwidth (bytes per rank over time).",
            &l,
            t.algbw_gbyte_s * 1e9,
        );
        out.set(
            "fabcheck_collective_time_seconds",
            "Mean time of one collective, slowest rank.",
            &l,
            t.time_us / 1e6,
        );
        if t.checked {
            out.set(
                "fabcheck_collective_wrong_elements",
                "Elements found wrong by --check.",
                &l,
                t.wrong as f64,
            );
        }
    }
    if let Some(e) = Metric::Efficiency.of_collective(c, None) {
        out.set(
            "fabcheck_collective_efficiency_ratio",
            "Out-of-place bus bandwidth over the link rate.",
            &base,
            e / 100.0,
        );
    }
}

/// Per tool, over its runs: whether any was disturbed, and when the newest finished.
fn run_facts(out: &mut Out, doc: &results::Document) {
    let labels = vec![("tool", doc.tool.clone())];
    let marks = results::quality::Marks::of(doc);
    if marks.known() {
        let cur = out.current("fabcheck_run_disturbed", &labels);
        out.set(
            "fabcheck_run_disturbed",
            "1 when a run of the tool was measured on a disturbed host or link (load, CPU steal, preemptions or other traffic over the thresholds of results::quality), else 0.",
            &labels,
            cur.max(if marks.any_disturbed() { 1.0 } else { 0.0 }),
        );
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(&doc.finished_at) {
        if let Ok(secs) = t.duration_since(std::time::UNIX_EPOCH) {
            let cur = out.current("fabcheck_run_finished_timestamp_seconds", &labels);
            out.set(
                "fabcheck_run_finished_timestamp_seconds",
                "When the newest run of the tool finished (Unix time).",
                &labels,
                secs.as_secs_f64().max(cur),
            );
        }
    }
}

/// Each check of the delivery profile, one-hot over its states, and the verdict.
fn verdict_states(out: &mut Out, v: &verdict::judge::Verdict) {
    for c in &v.checks {
        for state in ["PASS", "FAIL", "MISSING"] {
            out.set(
                "fabcheck_check_state",
                "Outcome of one delivery-profile check: 1 for the state it is in, 0 for the others.",
                &vec![
                    ("profile", v.profile.clone()),
                    ("check", c.id.clone()),
                    ("state", state.to_lowercase()),
                ],
                if c.status.as_str() == state { 1.0 } else { 0.0 },
            );
        }
    }
    out.set(
        "fabcheck_verdict_pass",
        "1 when every check of the delivery profile passed, else 0.",
        &vec![("profile", v.profile.clone())],
        if v.pass() { 1.0 } else { 0.0 },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_series_unique() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut o = Out::default();
        let l = vec![("test", "x".to_string())];
        o.set("m", "h", &l, 1.0);
        o.set("m", "h", &l, 2.0);
        o.set("m", "h", &l, f64::NAN);
        let t = o.text();
        assert_eq!(t.matches("m{test=\"x\"}").count(), 1);
        assert!(t.contains("m{test=\"x\"} 2"));
    }

    #[test]
    fn each_end_of_a_pair_carries_its_tenant_when_tenants_are_known() {
        let peer = |host: &str, rank| results::Peer {
            rank: Some(rank),
            host: host.to_string(),
            device: None,
            port: None,
        };
        let pair = results::Pair {
            initiator: peer("g0n0", 0),
            responder: peer("g1n1", 3),
            round: None,
        };
        let tenants = Tenants::parse(
            "t.toml",
            "version = 1\n[[tenant]]\nname = \"acme\"\nnodes = [\"g0n[0-1]\"]\n",
        )
        .unwrap();
        let with = render_labels(&pair_labels(
            Some(&tenants),
            "bench-bw",
            "write_bw",
            "tcp",
            65536,
            &pair,
        ));
        assert!(
            with.ends_with(r#"initiator="g0n0:0",responder="g1n1:3",initiator_tenant="acme",responder_tenant="untenanted"}"#),
            "{with}"
        );
        // Without tenants the series are as they always were.
        let without = render_labels(&pair_labels(
            None, "bench-bw", "write_bw", "tcp", 65536, &pair,
        ));
        assert!(!without.contains("tenant"), "{without}");
    }
}
