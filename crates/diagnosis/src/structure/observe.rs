//! The per-direction, per-rail matrix: a row is what a node sends, a column what it
//! receives. Bidirectional rows give each direction (`BandwidthResult.directions`); a
//! one-way row is its data direction (send/write and TCP: initiator to responder; read:
//! responder to initiator). A cell measured several times keeps its worst value.

use std::collections::{BTreeMap, HashMap};

use results::{Peer, TestResult};

use super::topology::Topology;
use verdict::input::Loaded;

/// Directed bandwidth per rail: `values[rail][from * n + to]`, NaN where not measured.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub n: usize,
    pub rails: usize,
    pub values: Vec<Vec<f32>>,
    /// Per-flow figures of a cell (rail, from, to), where recorded.
    pub flows: HashMap<(u32, u32, u32), Vec<f32>>,
    /// `write_bw verbs 1MiB`: the rows used.
    pub label: String,
    pub directions: usize,
    pub one_way: usize,
    /// Bidirectional rows without per-direction figures (a sum cannot be split).
    pub summed_skipped: usize,
}

impl Observed {
    pub fn new(n: usize, rails: usize) -> Self {
        Observed {
            n,
            rails,
            values: vec![vec![f32::NAN; n * n]; rails],
            ..Default::default()
        }
    }
    pub fn get(&self, r: usize, from: usize, to: usize) -> f32 {
        self.values[r][from * self.n + to]
    }
    pub fn set(&mut self, r: usize, from: usize, to: usize, v: f32) {
        let c = &mut self.values[r][from * self.n + to];
        if c.is_nan() || v < *c {
            *c = v;
        }
    }
}

/// The bandwidth rows to analyse: the (test, transport, size) with the most rows, the
/// largest size on a tie.
fn pick_key(docs: &[Loaded]) -> Option<(String, String, u64)> {
    let mut count: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
    for d in docs {
        for r in &d.doc.results {
            if let TestResult::Bandwidth(b) = r {
                if b.pair.initiator.host != b.pair.responder.host {
                    *count
                        .entry((b.test.clone(), b.transport.clone(), b.size_bytes))
                        .or_default() += 1;
                }
            }
        }
    }
    count
        .into_iter()
        .max_by_key(|(k, c)| (*c, k.2))
        .map(|x| x.0)
}

/// The node and rail of one end, when the topology knows them.
fn end(t: &Topology, p: &Peer) -> Option<(u32, u32)> {
    let node = *t.node_index.get(&p.host)?;
    let rail = match &p.device {
        Some(d) => *t.rail_of.get(&(node, d.clone()))?,
        None => 0,
    };
    Some((node, rail))
}

/// Builds the directed matrix of the chosen bandwidth rows.
pub fn observe(docs: &[Loaded], t: &Topology) -> Option<Observed> {
    let (test, transport, size) = pick_key(docs)?;
    let mut o = Observed::new(t.nodes.len(), t.rails_n());
    o.label = format!("{test} {transport} {}", verdict::tables::size_label(size));
    for d in docs {
        for r in &d.doc.results {
            let TestResult::Bandwidth(b) = r else {
                continue;
            };
            if b.test != test || b.transport != transport || b.size_bytes != size {
                continue;
            }
            let put =
                |o: &mut Observed, from: &Peer, to: &Peer, v: f64| -> Option<(u32, u32, u32)> {
                    let (fa, ra) = end(t, from)?;
                    let (tb, rb) = end(t, to)?;
                    if ra != rb || fa == tb || !v.is_finite() {
                        return None;
                    }
                    o.set(ra as usize, fa as usize, tb as usize, v as f32);
                    Some((ra, fa, tb))
                };
            if !b.directions.is_empty() {
                for dir in &b.directions {
                    if put(&mut o, &dir.from, &dir.to, dir.bw_gbit_s.avg).is_some() {
                        o.directions += 1;
                    }
                }
            } else if b.bidirectional {
                o.summed_skipped += 1;
                continue;
            } else {
                let (from, to) = if b.test == "read_bw" {
                    (&b.pair.responder, &b.pair.initiator)
                } else {
                    (&b.pair.initiator, &b.pair.responder)
                };
                if put(&mut o, from, to, b.bw_gbit_s.avg).is_some() {
                    o.one_way += 1;
                }
            }
            for f in &b.flows {
                let (from, to) = match &f.from {
                    Some(p) if *p == b.pair.responder => (&b.pair.responder, &b.pair.initiator),
                    Some(_) => (&b.pair.initiator, &b.pair.responder),
                    None if b.test == "read_bw" => (&b.pair.responder, &b.pair.initiator),
                    None => (&b.pair.initiator, &b.pair.responder),
                };
                if let (Some((fa, ra)), Some((tb, _))) = (end(t, from), end(t, to)) {
                    o.flows
                        .entry((ra, fa, tb))
                        .or_default()
                        .push(f.bw_gbit_s as f32);
                }
            }
        }
    }
    (o.directions + o.one_way > 0).then_some(o)
}
