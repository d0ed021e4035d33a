//! The fabric under load, from `bench-congestion` documents: GPCNeT's table per run (each
//! canary test isolated and loaded, with its impact factors), what the congestors moved
//! meanwhile, and the incast rounds (aggregate against the receiver's line rate, Jain's
//! fairness, the victim flow alone and loaded, the counters that moved). The profile's
//! `[load]` table bounds them; every bound is relative to the same cluster's own quiet
//! figures (isolated canaries, the victim alone, the receiver's line rate), so one profile
//! holds across cluster sizes and link speeds.

use std::collections::BTreeMap;

use results::congestion::{CongestionRun, IncastRound};
use serde::Serialize;

use verdict::input::Loaded;
use verdict::judge::{Outcome, Status};
use verdict::profile::LoadSpec;

/// What the report shows under "Under load".
#[derive(Debug, Clone, Serialize, Default)]
pub struct Load {
    pub runs: Vec<RunView>,
    pub incasts: Vec<IncastView>,
}

impl Load {
    pub fn present(&self) -> bool {
        !self.runs.is_empty() || !self.incasts.is_empty()
    }
}

/// One canary/congestor run.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub source: String,
    pub seed: u64,
    /// The flows' transport (older documents: tcp).
    pub transport: String,
    pub phase_seconds: f64,
    pub canaries: usize,
    pub congestors: usize,
    /// Every rank counted as a node: the factors measure one machine's CPUs.
    pub include_local: bool,
    pub tests: Vec<CanaryRow>,
    /// `group 0 (alltoall, 3 nodes): 1.234 Gbit/s`.
    pub congestor_lines: Vec<String>,
    /// Canary tests the run did not take, with why (`allreduce_8b: not run: ...`).
    pub skipped: Vec<String>,
    /// `mpi`, `agents`.
    pub launcher: String,
    /// Counters that moved in each phase, summed over the ranks (`name +delta`).
    pub counters_isolated: Vec<String>,
    pub counters_loaded: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CanaryRow {
    pub test: String,
    pub unit: String,
    pub isolated_mean: f64,
    pub loaded_mean: f64,
    pub isolated_p99: f64,
    pub loaded_p99: f64,
    pub impact_mean: f64,
    pub impact_p99: f64,
    pub impact_p999: Option<f64>,
}

/// One incast run.
#[derive(Debug, Clone, Serialize)]
pub struct IncastView {
    pub source: String,
    pub senders_per_round: u32,
    /// `verbs write, counted at the sender completions` (older documents: tcp).
    pub carried: String,
    pub no_victim: Option<String>,
    pub rounds: Vec<IncastRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IncastRow {
    pub receiver: String,
    pub senders: usize,
    pub aggregate_gbit_s: f64,
    pub line_rate_gbit_s: Option<f64>,
    /// Aggregate over the receiver's line rate, percent.
    pub of_line_rate_pct: Option<f64>,
    pub jain_fairness: f64,
    pub slowest_sender: String,
    pub slowest_gbit_s: Option<f64>,
    pub victim: Option<VictimRow>,
    pub counters: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VictimRow {
    pub pair: String,
    pub bw_alone: f64,
    pub bw_loaded: f64,
    pub bandwidth_impact: f64,
    pub p50_alone: Option<f64>,
    pub p50_loaded: Option<f64>,
    pub p99_alone: f64,
    pub p99_loaded: f64,
    pub p999_alone: Option<f64>,
    pub p999_loaded: Option<f64>,
    pub latency_impact_p99: f64,
}

/// Counters listed per phase or round; the input keeps them all.
const COUNTERS_LISTED: usize = 12;

fn moved<'a>(ports: impl Iterator<Item = &'a results::PortCounters>) -> Vec<String> {
    let mut sum: BTreeMap<&str, i64> = BTreeMap::new();
    for p in ports {
        for (k, v) in p
            .counters
            .iter()
            .chain(&p.hw_counters)
            .chain(&p.driver_counters)
        {
            let e = sum.entry(k.as_str()).or_default();
            *e = e.saturating_add(*v);
        }
    }
    let mut out: Vec<(&str, i64)> = sum.into_iter().filter(|(_, v)| *v != 0).collect();
    out.sort_by_key(|(_, v)| std::cmp::Reverse(v.unsigned_abs()));
    out.into_iter()
        .take(COUNTERS_LISTED)
        .map(|(k, v)| format!("{k} {v:+}"))
        .collect()
}

fn source(d: &Loaded) -> String {
    verdict::escape::shorten(&d.path.display().to_string(), 256)
}

fn include_local(d: &Loaded) -> bool {
    d.doc
        .options
        .get("include-local")
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// The congestion blocks of the inputs, in input order.
fn runs(docs: &[Loaded]) -> impl Iterator<Item = (&Loaded, &CongestionRun)> {
    docs.iter()
        .filter_map(|d| d.doc.congestion.as_ref().map(|c| (d, c)))
}

pub fn build(docs: &[Loaded]) -> Load {
    let mut load = Load::default();
    for (d, c) in runs(docs) {
        if let Some(inc) = &c.incast {
            load.incasts.push(IncastView {
                source: source(d),
                senders_per_round: inc.senders_per_round,
                carried: format!(
                    "{} {}, counted at the {}",
                    inc.transport.as_deref().unwrap_or("tcp"),
                    inc.op.as_deref().unwrap_or("send"),
                    inc.counted_at.as_deref().unwrap_or("receiver")
                ),
                no_victim: inc.no_victim.clone(),
                rounds: inc.rounds.iter().map(incast_row).collect(),
            });
            continue;
        }
        load.runs.push(RunView {
            source: source(d),
            seed: c.seed,
            transport: c.transport.clone().unwrap_or_else(|| "tcp".into()),
            phase_seconds: c.phase_seconds,
            canaries: c.canaries.len(),
            congestors: c.nodes.iter().filter(|n| n.role == "congestor").count(),
            include_local: include_local(d),
            tests: c
                .canary_tests
                .iter()
                .map(|t| CanaryRow {
                    test: t.test.clone(),
                    unit: t.unit.clone(),
                    isolated_mean: t.isolated.mean,
                    loaded_mean: t.loaded.mean,
                    isolated_p99: t.isolated.p99,
                    loaded_p99: t.loaded.p99,
                    impact_mean: t.impact_mean,
                    impact_p99: t.impact_p99,
                    impact_p999: t.impact_p999,
                })
                .collect(),
            congestor_lines: c
                .congestor_throughput
                .iter()
                .map(|g| {
                    let nodes = c
                        .congestor_groups
                        .get(g.group as usize)
                        .map_or(0, |x| x.nodes.len());
                    let op = g.op.as_deref().unwrap_or("send");
                    let at = g.counted_at.as_deref().unwrap_or("receiver");
                    format!(
                        "group {} ({}, {nodes} nodes, {} B {op} messages): {:.3} Gbit/s over {:.2} s, counted at the {at}",
                        g.group, g.pattern, g.message_bytes, g.gbit_s, g.seconds
                    )
                })
                .collect(),
            skipped: c
                .skipped_tests
                .iter()
                .map(|t| format!("{}: {}", t.test, t.why))
                .collect(),
            launcher: d.doc.launcher.clone(),
            counters_isolated: moved(c.counters_isolated.iter()),
            counters_loaded: moved(c.counters_loaded.iter()),
        });
    }
    load
}

fn incast_row(r: &IncastRound) -> IncastRow {
    let slowest = r
        .sender_gbit_s
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1));
    IncastRow {
        receiver: r.receiver.clone(),
        senders: r.senders.len(),
        aggregate_gbit_s: r.aggregate_gbit_s,
        line_rate_gbit_s: r.line_rate_gbit_s,
        of_line_rate_pct: share_pct(r),
        jain_fairness: r.jain_fairness,
        slowest_sender: slowest
            .and_then(|(i, _)| r.senders.get(i).cloned())
            .unwrap_or_default(),
        slowest_gbit_s: slowest.map(|(_, v)| *v),
        victim: r.victim.as_ref().map(|v| VictimRow {
            pair: format!("{} -> {}", v.sender, v.receiver),
            bw_alone: v.alone.bandwidth.mean,
            bw_loaded: v.loaded.bandwidth.mean,
            bandwidth_impact: v.bandwidth_impact,
            p50_alone: v.alone.latency.p50,
            p50_loaded: v.loaded.latency.p50,
            p99_alone: v.alone.latency.p99,
            p99_loaded: v.loaded.latency.p99,
            p999_alone: v.alone.latency.p999,
            p999_loaded: v.loaded.latency.p999,
            latency_impact_p99: v.latency_impact_p99,
        }),
        counters: moved(r.counters.iter().flat_map(|c| c.ports.iter())),
    }
}

fn share_pct(r: &IncastRound) -> Option<f64> {
    r.line_rate_gbit_s
        .filter(|l| *l > 0.0)
        .map(|l| r.aggregate_gbit_s / l * 100.0)
}

/// The worst of some values, where it was, how many: (value, where, count).
struct Worst {
    higher_is_worse: bool,
    best: Option<(f64, String)>,
    judged: usize,
}

impl Worst {
    fn new(higher_is_worse: bool) -> Self {
        Worst {
            higher_is_worse,
            best: None,
            judged: 0,
        }
    }

    fn see(&mut self, v: f64, at: impl FnOnce() -> String) {
        // A factor over an empty phase (no sample) is worse than any number.
        let v = match (v.is_finite(), self.higher_is_worse) {
            (true, _) => v,
            (false, true) => f64::INFINITY,
            (false, false) => f64::NEG_INFINITY,
        };
        self.judged += 1;
        let worse = match &self.best {
            None => true,
            Some((w, _)) if self.higher_is_worse => v > *w,
            Some((w, _)) => v < *w,
        };
        if worse {
            self.best = Some((v, at()));
        }
    }
}

struct CheckText<'a> {
    id: &'a str,
    description: &'a str,
    metric: &'a str,
    unit: &'a str,
    selector: &'a str,
    /// Why nothing was judged, and what to run.
    missing: &'a str,
}

fn outcome(t: CheckText<'_>, bound: verdict::profile::Bound, w: Worst) -> Outcome {
    let (status, measured, worst_at) = match w.best {
        None => (Status::Missing, None, t.missing.to_string()),
        Some((v, at)) => (
            if bound.holds(v) {
                Status::Pass
            } else {
                Status::Fail
            },
            v.is_finite().then_some(v),
            at,
        ),
    };
    Outcome {
        id: format!("load-{}", t.id),
        description: t.description.into(),
        metric: t.metric.into(),
        unit: t.unit.into(),
        selector: t.selector.into(),
        bound: format!(
            "{} {} {}",
            bound.symbol(),
            verdict::judge::fmt_value(bound.value()),
            t.unit
        ),
        bound_value: bound.value(),
        status,
        measured,
        worst_at,
        observations: w.judged,
        warning: None,
        at_least: false,
    }
}

const NO_RUN: &str = "no bench-congestion run in the inputs: run `mpirun ... bench-congestion --json FILE` over the cluster (one rank per node) and report it with the others";
const NO_INCAST: &str =
    "no incast run in the inputs: run `mpirun ... bench-congestion --mode incast[:N] --json FILE`";
const NO_VICTIM: &str = "no incast round carried a victim flow: it needs N + 3 nodes for N senders (`--mode incast:N` with a smaller N)";
const NO_EP: &str = "no expert-parallel run in the inputs: run `mpirun ... bench-collective ep_dispatch ep_combine --json FILE` with the all-pairs sweep of the same cluster";
const NO_SWEEP: &str = "unknown, because no point-to-point bandwidth between two nodes is in the inputs: report the EP run with the cluster's all-pairs sweep (`bench-bw --pattern all-pairs`), whose pairwise bandwidth is the reference";

/// The cluster's own pairwise reference for scale-out bandwidth: the median bandwidth of
/// the one-way, host-memory point-to-point rows between two different hosts at the
/// largest size any of them measured (an all-pairs sweep's rows, whole or streamed), in
/// GB/s (10^9 bytes/s, the EP figures' unit), with what it was taken from.
fn pairwise_reference(docs: &[Loaded]) -> Option<(f64, String)> {
    // (size, Gbit/s) of every such row.
    let mut rows: Vec<(u64, f64)> = Vec::new();
    for d in docs {
        for r in &d.doc.results {
            if let results::TestResult::Bandwidth(b) = r {
                if !b.bidirectional
                    && b.memory_class() == "host"
                    && b.pair.initiator.host != b.pair.responder.host
                {
                    rows.push((b.size_bytes, b.bw_gbit_s.avg));
                }
            }
        }
        if let Some(p2p) = d.p2p() {
            for r in &p2p.rows {
                let g = &p2p.groups[r.group as usize];
                let host = |i: u32| &p2p.peers.list[i as usize].host;
                if let verdict::rows::RowStats::Bandwidth(b) = &r.stats {
                    if !g.bidirectional
                        && g.memory == "host"
                        && host(r.initiator) != host(r.responder)
                    {
                        rows.push((g.size, b.avg));
                    }
                }
            }
        }
    }
    let size = rows.iter().map(|r| r.0).max()?;
    let mut at: Vec<f64> = rows
        .iter()
        .filter(|r| r.0 == size && r.1.is_finite())
        .map(|r| r.1)
        .collect();
    let n = at.len();
    let median = verdict::metric::median(&mut at)?;
    Some((
        median / 8.0,
        format!(
            "median of {n} pair(s) at {}: {:.3} GB/s",
            results::units::format_size(size),
            median / 8.0
        ),
    ))
}

const NO_RATE: &str = "unknown, because no incast receiver reported its line rate (no RDMA port or link speed in its host facts)";

/// The checks of a `[load]` table, in a fixed order; each key given is one check.
pub fn checks(spec: &LoadSpec, docs: &[Loaded]) -> Vec<Outcome> {
    let mut out = Vec::new();
    out.extend(congestion_checks(spec, docs));
    out.extend(incast_checks(spec, docs));
    out.extend(victim_checks(spec, docs));
    if let Some(b) = spec.ep_network_of_pairwise_min_pct {
        out.push(ep_network_of_pairwise(b, docs));
    }
    // One machine rehearsing the method measures its CPUs: say so on every check.
    if runs(docs).any(|(d, _)| include_local(d)) {
        for o in out.iter_mut().filter(|o| o.id.starts_with("load-impact")) {
            o.warning = Some(
                "a run counted every rank as a node (--include-local): its factors measure one machine's CPUs, not the fabric".into(),
            );
        }
    }
    out
}

/// GPCNeT's congestion impact on the canaries, mean and tail.
fn congestion_checks(spec: &LoadSpec, docs: &[Loaded]) -> Vec<Outcome> {
    use verdict::profile::Bound::Max;
    let mut out = Vec::new();
    let canary = |p99: bool| canary_impacts(docs, p99);
    if let Some(b) = spec.impact_mean_max {
        out.push(outcome(
            CheckText {
                id: "impact-mean",
                description: "Congestion impact on the mean: every canary test loaded against the same canaries isolated (GPCNeT's factor, unrounded)",
                metric: "congestion_impact_mean",
                unit: "x",
                selector: "every canary test of every bench-congestion run",
                missing: NO_RUN,
            },
            Max(b),
            canary(false),
        ));
    }
    if let Some(b) = spec.impact_p99_max {
        out.push(outcome(
            CheckText {
                id: "impact-p99",
                description: "Congestion impact on the tail: the 99th percentile loaded against isolated (bandwidth: the low tail)",
                metric: "congestion_impact_p99",
                unit: "x",
                selector: "every canary test of every bench-congestion run",
                missing: NO_RUN,
            },
            Max(b),
            canary(true),
        ));
    }
    out
}

/// The worst canary impact of every congestion run (not incasts, not the noisy-neighbour
/// runs across two tenants: `[isolation] neighbour_impact_max` judges those): mean, or p99.
fn canary_impacts(docs: &[Loaded], p99: bool) -> Worst {
    let mut w = Worst::new(true);
    for (d, c) in runs(docs).filter(|(_, c)| c.incast.is_none() && c.canary_tenant.is_none()) {
        for t in &c.canary_tests {
            let v = if p99 { t.impact_p99 } else { t.impact_mean };
            w.see(v, || {
                format!(
                    "{} (seed {}, {}): isolated {:.3}, loaded {:.3} {}",
                    t.test,
                    c.seed,
                    source(d),
                    if p99 { t.isolated.p99 } else { t.isolated.mean },
                    if p99 { t.loaded.p99 } else { t.loaded.mean },
                    t.unit
                )
            });
        }
    }
    w
}

/// Every round of every incast run, with the document it came from.
fn incast_rounds(docs: &[Loaded]) -> impl Iterator<Item = (&Loaded, &IncastRound)> + '_ {
    runs(docs).flat_map(|(d, c)| {
        c.incast
            .iter()
            .flat_map(move |i| i.rounds.iter().map(move |r| (d, r)))
    })
}

/// The incast's fairness among senders and its aggregate against the receiver's line rate.
fn incast_checks(spec: &LoadSpec, docs: &[Loaded]) -> Vec<Outcome> {
    use verdict::profile::Bound::Min;
    let mut out = Vec::new();
    let rounds = || incast_rounds(docs);
    if let Some(b) = spec.incast_fairness_min {
        let mut w = Worst::new(false);
        for (d, r) in rounds() {
            w.see(r.jain_fairness, || {
                format!(
                    "receiver {} ({}): senders {}",
                    r.receiver,
                    source(d),
                    r.senders
                        .iter()
                        .zip(&r.sender_gbit_s)
                        .map(|(s, g)| format!("{s} {g:.3}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
        }
        out.push(outcome(
            CheckText {
                id: "incast-fairness",
                description: "Incast fairness: Jain's index of the senders' bandwidth at every receiver (1: equal shares)",
                metric: "incast_fairness",
                unit: "index",
                selector: "every round of every incast run",
                missing: NO_INCAST,
            },
            Min(b),
            w,
        ));
    }
    if let Some(b) = spec.incast_line_rate_min_pct {
        let mut w = Worst::new(false);
        let mut any = false;
        for (d, r) in rounds() {
            any = true;
            if let Some(p) = share_pct(r) {
                w.see(p, || {
                    format!(
                        "receiver {} ({}): {:.3} of {} Gbit/s",
                        r.receiver,
                        source(d),
                        r.aggregate_gbit_s,
                        r.line_rate_gbit_s.unwrap_or_default()
                    )
                });
            }
        }
        out.push(outcome(
            CheckText {
                id: "incast-line-rate",
                description: "Incast aggregate: what all senders together deliver to a receiver, against its line rate",
                metric: "incast_of_line_rate",
                unit: "%",
                selector: "every round of every incast run",
                missing: if any { NO_RATE } else { NO_INCAST },
            },
            Min(b),
            w,
        ));
    }
    out
}

/// The victim flow beside each incast: its bandwidth and latency tail, alone against loaded.
fn victim_checks(spec: &LoadSpec, docs: &[Loaded]) -> Vec<Outcome> {
    use verdict::profile::Bound::Max;
    let mut out = Vec::new();
    let rounds = || incast_rounds(docs);
    let victims = || rounds().filter_map(|(d, r)| r.victim.as_ref().map(|v| (d, r, v)));
    let no_victim = if rounds().next().is_some() {
        NO_VICTIM
    } else {
        NO_INCAST
    };
    if let Some(b) = spec.victim_bandwidth_impact_max {
        let mut w = Worst::new(true);
        for (d, r, v) in victims() {
            w.see(v.bandwidth_impact, || {
                format!(
                    "{} -> {} beside the incast to {} ({}): {:.3} Gbit/s alone, {:.3} loaded",
                    v.sender,
                    v.receiver,
                    r.receiver,
                    source(d),
                    v.alone.bandwidth.mean,
                    v.loaded.bandwidth.mean
                )
            });
        }
        out.push(outcome(
            CheckText {
                id: "victim-bandwidth",
                description: "Victim bandwidth: a flow sharing no end with the incast, alone against during it (congestion spreading)",
                metric: "victim_bandwidth_impact",
                unit: "x",
                selector: "the victim flow of every incast round",
                missing: no_victim,
            },
            Max(b),
            w,
        ));
    }
    if let Some(b) = spec.victim_latency_impact_max {
        let mut w = Worst::new(true);
        for (d, r, v) in victims() {
            w.see(v.latency_impact_p99, || {
                format!(
                    "{} -> {} beside the incast to {} ({}): p99 {:.1} us alone, {:.1} loaded",
                    v.sender,
                    v.receiver,
                    r.receiver,
                    source(d),
                    v.alone.latency.p99,
                    v.loaded.latency.p99
                )
            });
        }
        out.push(outcome(
            CheckText {
                id: "victim-latency",
                description: "Victim latency tail: the victim's 8 B p99 during the incast against alone (head-of-line blocking)",
                metric: "victim_latency_impact_p99",
                unit: "x",
                selector: "the victim flow of every incast round",
                missing: no_victim,
            },
            Max(b),
            w,
        ));
    }
    out
}

/// Expert-parallel scale-out bandwidth against the same cluster's pairwise bandwidth.
fn ep_network_of_pairwise(b: f64, docs: &[Loaded]) -> Outcome {
    use verdict::profile::Bound::Min;
    let mut w = Worst::new(false);
    let reference = pairwise_reference(docs);
    let mut any_ep = false;
    for d in docs {
        for r in &d.doc.results {
            let results::TestResult::Collective(c) = r else {
                continue;
            };
            let Some(ep) = &c.ep else { continue };
            any_ep = true;
            let Some((pair, from)) = &reference else {
                continue;
            };
            if *pair <= 0.0 {
                continue;
            }
            w.see(ep.network_gbyte_s / pair * 100.0, || {
                format!(
                    "{} {} {} ranks, {} ({}): {:.3} GB/s per rank against the sweep's {from}",
                    c.collective,
                    ep.routing,
                    c.ranks,
                    ep.variant,
                    source(d),
                    ep.network_gbyte_s
                )
            });
        }
    }
    outcome(
        CheckText {
            id: "ep-network-of-pairwise",
            description: "Expert-parallel scale-out bandwidth: each EP run's network bytes per rank per step, against the same cluster's pairwise bandwidth (the all-pairs sweep's median)",
            metric: "ep_network_of_pairwise",
            unit: "%",
            selector: "every ep_dispatch/ep_combine row, against the sweep's one-way host-memory pairs between nodes at its largest size",
            missing: if !any_ep { NO_EP } else { NO_SWEEP },
        },
        Min(b),
        w,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::congestion::{
        CanaryFigures, CanaryTest, IncastRun, RoundCounters, VictimFigures, VictimFlow,
    };

    fn loaded(c: CongestionRun, include_local: bool) -> Loaded {
        let mut doc =
            results::Document::new("bench-congestion", "mpi", 8, "2026-01-01T00:00:00Z".into());
        doc.options
            .insert("include-local".into(), include_local.into());
        doc.congestion = Some(c);
        Loaded::from_text("c.json", &serde_json::to_string(&doc).unwrap()).unwrap()
    }

    fn fig(mean: f64, p99: f64) -> CanaryFigures {
        CanaryFigures {
            samples: 10,
            mean,
            p99,
            ..Default::default()
        }
    }

    fn canaries(impacts: &[(&str, f64, f64)]) -> CongestionRun {
        CongestionRun {
            seed: 7,
            canary_tests: impacts
                .iter()
                .map(|(t, m, p)| CanaryTest {
                    test: t.to_string(),
                    unit: "us".into(),
                    isolated: fig(10.0, 20.0),
                    loaded: fig(10.0 * m, 20.0 * p),
                    impact_mean: *m,
                    impact_p99: *p,
                    impact_p999: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn round(rx: &str, bw: &[f64], victim: Option<(f64, f64)>) -> IncastRound {
        IncastRound {
            receiver: rx.into(),
            senders: (0..bw.len()).map(|i| format!("s{i}")).collect(),
            sender_gbit_s: bw.to_vec(),
            aggregate_gbit_s: bw.iter().sum(),
            line_rate_gbit_s: Some(100.0),
            jain_fairness: results::congestion::jain(bw),
            victim: victim.map(|(b, l)| VictimFlow {
                sender: "va".into(),
                receiver: "vb".into(),
                alone: VictimFigures {
                    latency: fig(5.0, 8.0),
                    bandwidth: fig(50.0, 40.0),
                },
                loaded: VictimFigures {
                    latency: fig(5.0 * l, 8.0 * l),
                    bandwidth: fig(50.0 / b, 40.0 / b),
                },
                bandwidth_impact: b,
                latency_impact_p99: l,
            }),
            counters: vec![RoundCounters {
                node: rx.into(),
                role: "receiver".into(),
                ports: vec![results::PortCounters {
                    device: "mlx5_0".into(),
                    port: 1,
                    driver_counters: [("rx_prio3_pause".to_string(), 42)].into(),
                    ..Default::default()
                }],
            }],
        }
    }

    fn spec() -> LoadSpec {
        LoadSpec {
            impact_mean_max: Some(1.5),
            impact_p99_max: Some(3.0),
            incast_fairness_min: Some(0.9),
            incast_line_rate_min_pct: Some(90.0),
            victim_bandwidth_impact_max: Some(1.25),
            victim_latency_impact_max: Some(3.0),
            ep_network_of_pairwise_min_pct: None,
        }
    }

    fn by<'a>(out: &'a [Outcome], id: &str) -> &'a Outcome {
        out.iter()
            .find(|o| o.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    }

    #[test]
    fn the_worst_factor_decides_and_is_named() {
        let docs = [loaded(
            canaries(&[("ring_latency_8b", 1.1, 2.0), ("allreduce_8b", 1.7, 2.5)]),
            false,
        )];
        let out = checks(&spec(), &docs);
        let mean = by(&out, "load-impact-mean");
        assert_eq!(mean.status, Status::Fail);
        assert_eq!(mean.measured, Some(1.7));
        assert!(
            mean.worst_at.starts_with("allreduce_8b (seed 7"),
            "{}",
            mean.worst_at
        );
        assert_eq!(mean.observations, 2);
        assert!(mean.warning.is_none());
        let p99 = by(&out, "load-impact-p99");
        assert_eq!((p99.status, p99.measured), (Status::Pass, Some(2.5)));
        // No incast among the inputs: those checks say what to run.
        let f = by(&out, "load-incast-fairness");
        assert_eq!(f.status, Status::Missing);
        assert!(f.worst_at.contains("--mode incast"), "{}", f.worst_at);
    }

    /// Each key of the table is one check, once, in a fixed order (a cut of `checks` into
    /// steps once listed the impact checks twice).
    #[test]
    fn every_check_of_the_table_appears_once_in_order() {
        let docs = [loaded(canaries(&[("ring_latency_8b", 1.1, 2.0)]), false)];
        let ids: Vec<String> = checks(&spec(), &docs).into_iter().map(|o| o.id).collect();
        let mut seen = std::collections::BTreeSet::new();
        assert!(ids.iter().all(|i| seen.insert(i.clone())), "{ids:?}");
        let at = |id: &str| ids.iter().position(|i| i == id).unwrap_or(usize::MAX);
        assert!(at("load-impact-mean") < at("load-impact-p99"), "{ids:?}");
        assert!(
            at("load-impact-p99") < at("load-incast-fairness"),
            "{ids:?}"
        );
    }

    #[test]
    fn a_one_machine_rehearsal_is_warned_on_the_impact_checks() {
        let docs = [loaded(canaries(&[("ring_latency_8b", 1.0, 1.0)]), true)];
        let out = checks(&spec(), &docs);
        assert!(by(&out, "load-impact-mean").warning.is_some());
        assert!(by(&out, "load-incast-fairness").warning.is_none());
        assert!(build(&docs).runs[0].include_local);
    }

    #[test]
    fn incast_fairness_share_and_victim_are_judged_per_round() {
        let run = CongestionRun {
            incast: Some(IncastRun {
                senders_per_round: 2,
                rounds: vec![
                    round("r0", &[48.0, 47.0], Some((1.1, 1.5))),
                    round("r1", &[80.0, 10.0], Some((2.0, 6.0))),
                ],
                no_victim: None,
                ..Default::default()
            }),
            ..Default::default()
        };
        let docs = [loaded(run, false)];
        let out = checks(&spec(), &docs);
        let f = by(&out, "load-incast-fairness");
        assert_eq!(f.status, Status::Fail);
        assert!(f.worst_at.starts_with("receiver r1"), "{}", f.worst_at);
        let share = by(&out, "load-incast-line-rate");
        assert_eq!((share.status, share.measured), (Status::Pass, Some(90.0)));
        let vb = by(&out, "load-victim-bandwidth");
        assert_eq!((vb.status, vb.measured), (Status::Fail, Some(2.0)));
        assert!(
            vb.worst_at.contains("beside the incast to r1"),
            "{}",
            vb.worst_at
        );
        let vl = by(&out, "load-victim-latency");
        assert_eq!((vl.status, vl.measured), (Status::Fail, Some(6.0)));
        // The canary checks have nothing to judge in an incast run.
        assert_eq!(by(&out, "load-impact-mean").status, Status::Missing);

        let view = build(&docs);
        assert!(view.runs.is_empty());
        let rows = &view.incasts[0].rounds;
        assert_eq!(rows[1].slowest_sender, "s1");
        assert_eq!(rows[1].slowest_gbit_s, Some(10.0));
        assert_eq!(rows[0].of_line_rate_pct, Some(95.0));
        assert_eq!(rows[0].counters, vec!["rx_prio3_pause +42".to_string()]);
    }

    #[test]
    fn unknown_line_rates_and_missing_victims_are_said_not_guessed() {
        let mut r = round("r0", &[1.0, 1.0], None);
        r.line_rate_gbit_s = None;
        let run = CongestionRun {
            incast: Some(IncastRun {
                senders_per_round: 2,
                rounds: vec![r],
                no_victim: Some("no victim flow: 3 nodes".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let out = checks(&spec(), &[loaded(run, false)]);
        let share = by(&out, "load-incast-line-rate");
        assert_eq!(share.status, Status::Missing);
        assert!(
            share.worst_at.starts_with("unknown, because"),
            "{}",
            share.worst_at
        );
        let v = by(&out, "load-victim-bandwidth");
        assert_eq!(v.status, Status::Missing);
        assert!(v.worst_at.contains("N + 3 nodes"), "{}", v.worst_at);
        assert_eq!(by(&out, "load-incast-fairness").status, Status::Pass);
    }

    /// EP scale-out bandwidth is judged against the cluster's own pairwise bandwidth: the
    /// sweep's median, read the same from a whole and a streamed document.
    #[test]
    fn ep_bandwidth_is_judged_against_the_sweeps_pairwise_median() {
        let mut spec = synth::sweep::SweepSpec::bandwidth(5, 1);
        spec.base = 96.0;
        let sweep = synth::sweep::sweep_doc(&spec);
        let mut gbit: Vec<f64> = sweep
            .results
            .iter()
            .filter_map(|r| match r {
                results::TestResult::Bandwidth(b) => Some(b.bw_gbit_s.avg),
                _ => None,
            })
            .collect();
        gbit.sort_by(f64::total_cmp);
        let n = gbit.len();
        assert!(n >= 4, "{n} rows");
        let median = if n % 2 == 1 {
            gbit[n / 2]
        } else {
            (gbit[n / 2 - 1] + gbit[n / 2]) / 2.0
        } / 8.0;
        let ep = |gbyte_s: f64| {
            let mut d = synth::collective_doc(8, &[1 << 20], 5.0, 100.0, 1);
            if let results::TestResult::Collective(c) = &mut d.results[0] {
                c.collective = "ep_dispatch".into();
                c.ep = Some(results::collective::EpFigures {
                    routing: "uniform".into(),
                    variant: "flat".into(),
                    network_gbyte_s: gbyte_s,
                    ..Default::default()
                });
            }
            Loaded::from_text("ep.json", &serde_json::to_string(&d).unwrap()).unwrap()
        };
        let whole =
            Loaded::from_text("sweep.json", &serde_json::to_string(&sweep).unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep.json");
        std::fs::write(&path, serde_json::to_string_pretty(&sweep).unwrap()).unwrap();
        let limits = verdict::input::Limits::default();
        let streamed = verdict::stream::read(
            0,
            &path,
            &limits,
            &verdict::input::Budget::new(limits.decoded_bytes()),
            None,
        )
        .unwrap()
        .unwrap();
        assert!(streamed.p2p().is_some(), "the sweep was streamed");
        let spec = LoadSpec {
            ep_network_of_pairwise_min_pct: Some(40.0),
            ..Default::default()
        };
        for sweep in [&whole, &streamed] {
            let (r, from) = pairwise_reference(std::slice::from_ref(sweep)).unwrap();
            assert!((r - median).abs() < 1e-9, "{r} vs {median}");
            assert!(
                from.starts_with(&format!("median of {n} pair(s) at ")),
                "{from}"
            );
            let o = &checks(&spec, &[sweep.clone(), ep(median * 0.5)])[0];
            assert_eq!(o.status, Status::Pass, "{o:?}");
            assert!((o.measured.unwrap() - 50.0).abs() < 1e-6);
            let o = &checks(&spec, &[sweep.clone(), ep(median * 0.3)])[0];
            assert_eq!(o.status, Status::Fail, "{o:?}");
            assert!(
                o.worst_at.contains("ep_dispatch uniform 8 ranks, flat"),
                "{}",
                o.worst_at
            );
        }
        // Without the sweep the reference is unknown; without an EP run there is nothing.
        let o = &checks(&spec, &[ep(1.0)])[0];
        assert_eq!((o.status, o.worst_at.as_str()), (Status::Missing, NO_SWEEP));
        let o = &checks(&spec, &[whole])[0];
        assert_eq!((o.status, o.worst_at.as_str()), (Status::Missing, NO_EP));
    }

    #[test]
    fn a_factor_that_is_not_a_number_fails_rather_than_passes() {
        let mut w = Worst::new(true);
        w.see(1.0, || "a".into());
        w.see(f64::NAN, || "b".into());
        let o = outcome(
            CheckText {
                id: "x",
                description: "",
                metric: "",
                unit: "x",
                selector: "",
                missing: "",
            },
            verdict::profile::Bound::Max(1.5),
            w,
        );
        assert_eq!((o.status, o.measured), (Status::Fail, None));
        assert_eq!(o.worst_at, "b");
    }
}
