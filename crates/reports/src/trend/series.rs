//! What a night contributes to the trend: its key figures (the merged figures `compare`
//! compares, plus link loss and collective efficiency), each pair's own figures, and the
//! latency distribution of one test and size.

use std::collections::BTreeMap;

use results::TestResult;
use serde::Serialize;

use crate::compare::{self, Facts, Point};
use verdict::input::Loaded;
use verdict::profile::{Bound, Profile};
use verdict::tables::{size_label, Tables};

/// The key figures of one night (see [`compare::points`]), plus link loss per bandwidth
/// row and efficiency per collective row.
pub fn night_points(t: &Tables) -> BTreeMap<String, Point> {
    let mut m = compare::points(t);
    for r in &t.bandwidth {
        let Some(loss) = r.link_loss_pct else {
            continue;
        };
        let dir = if r.bidirectional { " bidir" } else { "" };
        m.insert(
            format!(
                "{} {}{dir} {} link loss",
                r.test,
                r.transport,
                size_label(r.size_bytes)
            ),
            Point {
                group: "bandwidth",
                unit: "%",
                higher_is_better: false,
                value: loss,
                stdev: 0.0,
                disturbed: r.quality.disturbed(),
                metric: "link_loss",
                facts: Facts::point_to_point(&r.tool, &r.test, &r.transport, r.size_bytes),
            },
        );
    }
    for r in &t.collective {
        let Some(e) = r.efficiency_pct else { continue };
        m.insert(
            format!(
                "{} {} n={} {} efficiency",
                r.collective,
                r.backend,
                r.ranks,
                size_label(r.size_bytes)
            ),
            Point {
                group: "collective",
                unit: "%",
                higher_is_better: true,
                value: e,
                stdev: 0.0,
                disturbed: r.quality.disturbed(),
                metric: "efficiency",
                facts: Facts::collective(&r.collective, &r.backend, r.size_bytes),
            },
        );
    }
    m
}

/// The profile bound drawn beside a series: the first check of the profile that bounds
/// this metric over the rows the figure stands on.
pub fn bound_for(profile: Option<&Profile>, p: &Point) -> Option<(Bound, String)> {
    profile?
        .checks
        .iter()
        .find(|c| c.metric.name() == p.metric && p.facts.selected_by(&c.select))
        .map(|c| (c.bound, c.id.clone()))
}

/// One pair's figure, by hosts (ranks change between allocations; hosts do not).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PairKey {
    pub initiator: String,
    pub responder: String,
    /// `send_lat verbs 2 B p99`, `write_bw verbs 1MiB bw avg`.
    pub metric: String,
    #[serde(skip)]
    pub higher_is_better: bool,
}

/// Every pair's figures of one night: latency p99 and bandwidth average per pair, test,
/// transport (GPU buffers apart: `verbs+cuda`, as the tables label them) and size, the
/// mean where a pair was measured more than once.
pub fn pair_values(docs: &[Loaded]) -> BTreeMap<PairKey, f64> {
    let mut acc: BTreeMap<PairKey, (f64, u32)> = BTreeMap::new();
    for d in docs {
        for r in &d.doc.results {
            let (pair, metric, hib, v) = match r {
                TestResult::Latency(l) => (
                    &l.pair,
                    format!(
                        "{} {} {} p99",
                        l.test,
                        results::transport_label(&l.transport, l.memory.as_ref()),
                        size_label(l.size_bytes)
                    ),
                    false,
                    l.latency_us.p99,
                ),
                TestResult::Bandwidth(b) => (
                    &b.pair,
                    format!(
                        "{} {}{} {} bw avg",
                        b.test,
                        results::transport_label(&b.transport, b.memory.as_ref()),
                        if b.bidirectional { " bidir" } else { "" },
                        size_label(b.size_bytes)
                    ),
                    true,
                    b.bw_gbit_s.avg,
                ),
                TestResult::Collective(_) => continue,
            };
            if !v.is_finite() {
                continue;
            }
            let e = acc
                .entry(PairKey {
                    initiator: pair.initiator.host.clone(),
                    responder: pair.responder.host.clone(),
                    metric,
                    higher_is_better: hib,
                })
                .or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    acc.into_iter()
        .map(|(k, (sum, n))| (k, sum / f64::from(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{MemorySide, MemoryUse};

    #[test]
    fn gpu_and_host_figures_of_a_pair_are_kept_apart() {
        let mut doc = synth::bandwidth_doc("a", "b", &[65536], 90.0, 1);
        let mut gpu = doc.results[0].clone();
        if let TestResult::Bandwidth(b) = &mut gpu {
            let side = || MemorySide {
                kind: "cuda".into(),
                path: "dmabuf".into(),
                ..Default::default()
            };
            b.memory = Some(MemoryUse {
                initiator: Some(side()),
                responder: Some(side()),
            });
            b.bw_gbit_s.avg = 10.0;
        }
        doc.results.push(gpu);
        let loaded = Loaded::from_text("n.json", &serde_json::to_string(&doc).unwrap()).unwrap();
        let v = pair_values(&[loaded]);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.keys().any(|k| k.metric.contains("+cuda")), "{v:?}");
        assert!(
            v.values().any(|&x| x == 10.0),
            "not averaged with host: {v:?}"
        );
    }
}
