//! Synthetic all-pairs sweeps (development only): documents shaped like
//! what `bench-bw`/`bench-lat --pattern all-pairs` write under mpirun over N nodes with R
//! rails, with faults placed on purpose (a slow node, a slow NIC on one rail, a slow link,
//! a failed pair, a port that trained lower), for the localisation tests and the scale
//! benchmark (`synth sweep`). Every document says it is synthetic.
//!
//! Large sweeps are written row by row in the exact layout the benchmarks write (serde's
//! pretty printer), so a 4-million-row document never has to sit in memory here.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use results::{
    BandwidthResult, BandwidthSummary, CounterDeltas, CpuUse, Document, FailedPair, HostInfo,
    LatencyResult, Pair, PciLink, Peer, PortCounters, RdmaDevice, RdmaPort, SweepInfo, TestResult,
};
use serde_json::{Map, Value};

use crate::{histogram, Rng};

/// A fault placed in a synthetic sweep. Factors multiply bandwidth (and divide latency).
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Every link of `node`, on every rail.
    Node { node: u32, factor: f64 },
    /// Every link of `node` on `rail` only (a NIC, optic or switch port).
    Nic { node: u32, rail: u32, factor: f64 },
    /// The link between `a` and `b` (on one rail, or every rail).
    Link {
        a: u32,
        b: u32,
        rail: Option<u32>,
        factor: f64,
    },
    /// The pair `a`-`b` on `rail` could not be measured.
    Failed { a: u32, b: u32, rail: u32 },
    /// Inventory only (no effect on the numbers): `node`'s port on `rail` shows this.
    Inventory {
        node: u32,
        rail: u32,
        what: InventoryFault,
    },
}

/// What a port can show wrong in the inventory.
#[derive(Debug, Clone, PartialEq)]
pub enum InventoryFault {
    PcieWidth(u32),
    RateGbit(f64),
    Firmware(String),
    Mtu(u32),
    PortDown,
    SymbolErrors(i64),
}

/// The shape of a synthetic sweep.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    pub nodes: u32,
    pub rails: u32,
    /// `write_bw`, `send_lat`, ...: `_bw` tests write bench-bw rows, `_lat` bench-lat rows.
    pub test: String,
    /// `verbs` (devices `mlx5_R` on each rail) or `tcp` (no device, one rail).
    pub transport: String,
    pub size: u64,
    /// Healthy value: Gb/s for bandwidth, one-way microseconds for latency.
    pub base: f64,
    /// Spread of healthy values around `base` (fraction).
    pub jitter: f64,
    pub faults: Vec<Fault>,
    /// Counter deltas in every row (an rxe-sized set), error counters raised on faulty links.
    pub counters: bool,
    /// Instead of all pairs: these node pairs only (a `--pattern file:` retest).
    pub pairs: Option<Vec<(u32, u32)>>,
    pub seed: u64,
}

impl SweepSpec {
    /// A healthy all-pairs bandwidth sweep.
    pub fn bandwidth(nodes: u32, rails: u32) -> Self {
        SweepSpec {
            nodes,
            rails,
            test: "write_bw".into(),
            transport: "verbs".into(),
            size: 65536,
            base: 96.0,
            jitter: 0.01,
            faults: vec![],
            counters: false,
            pairs: None,
            seed: 1,
        }
    }

    /// A healthy all-pairs latency sweep.
    pub fn latency(nodes: u32, rails: u32) -> Self {
        SweepSpec {
            test: "send_lat".into(),
            size: 8,
            base: 2.0,
            ..Self::bandwidth(nodes, rails)
        }
    }

    fn is_latency(&self) -> bool {
        self.test.ends_with("_lat")
    }

    fn tool(&self) -> &'static str {
        if self.is_latency() {
            "bench-lat"
        } else {
            "bench-bw"
        }
    }

    fn rails_used(&self) -> u32 {
        if self.transport == "tcp" {
            1
        } else {
            self.rails.max(1)
        }
    }

    fn device(&self, rail: u32) -> Option<String> {
        (self.transport != "tcp").then(|| format!("mlx5_{rail}"))
    }

    /// Rounds of node pairs: the circle method for all pairs, or the given list greedily.
    fn rounds(&self) -> Vec<Vec<(u32, u32)>> {
        match &self.pairs {
            Some(list) => {
                let mut rounds: Vec<Vec<(u32, u32)>> = Vec::new();
                for &(a, b) in list {
                    let i = rounds
                        .iter()
                        .position(|r| r.iter().all(|&(x, y)| x != a && x != b && y != a && y != b))
                        .unwrap_or_else(|| {
                            rounds.push(Vec::new());
                            rounds.len() - 1
                        });
                    rounds[i].push((a, b));
                }
                rounds
            }
            None => circle(self.nodes),
        }
    }

    /// Multiplier of the healthy value on `a`-`b` at `rail` (1 = healthy); `None`: failed.
    fn factor(&self, a: u32, b: u32, rail: u32) -> Option<f64> {
        let mut f = 1.0;
        for fault in &self.faults {
            match *fault {
                Fault::Node { node, factor } if node == a || node == b => f *= factor,
                Fault::Nic {
                    node,
                    rail: r,
                    factor,
                } if r == rail && (node == a || node == b) => f *= factor,
                Fault::Link {
                    a: x,
                    b: y,
                    rail: r,
                    factor,
                } if ((x, y) == (a, b) || (x, y) == (b, a)) && r.is_none_or(|r| r == rail) => {
                    f *= factor
                }
                Fault::Failed {
                    a: x,
                    b: y,
                    rail: r,
                } if ((x, y) == (a, b) || (x, y) == (b, a)) && r == rail => return None,
                _ => {}
            }
        }
        Some(f)
    }
}

/// Node name of index `i` in a sweep.
pub fn sweep_node(i: u32) -> String {
    format!("node{i:04}")
}

/// The circle method: N-1 rounds of N/2 pairs (N rounds with one idle node for odd N).
fn circle(n: u32) -> Vec<Vec<(u32, u32)>> {
    let m = if n.is_multiple_of(2) { n } else { n + 1 };
    (0..m.saturating_sub(1))
        .map(|r| {
            let at = |k: u32| if k == 0 { 0 } else { 1 + (k - 1 + r) % (m - 1) };
            (0..m / 2)
                .map(|i| (i, at(i), at(m - 1 - i)))
                .filter(|&(_, a, b)| a < n && b < n)
                .map(|(i, a, b)| if (r + i) % 2 == 0 { (a, b) } else { (b, a) })
                .collect()
        })
        .collect()
}

fn port_counters(errors: i64) -> BTreeMap<String, i64> {
    [
        ("link_downed", 0),
        ("link_error_recovery", 0),
        ("port_rcv_data", 9_876_543_210),
        ("port_rcv_errors", 0),
        ("port_rcv_packets", 123_456_789),
        ("port_xmit_data", 9_876_543_210),
        ("port_xmit_discards", 0),
        ("port_xmit_packets", 123_456_789),
        ("symbol_error", errors),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The inventory of one node's devices, with the spec's inventory faults applied.
fn devices(spec: &SweepSpec, node: u32) -> Vec<RdmaDevice> {
    if spec.transport == "tcp" {
        return vec![];
    }
    (0..spec.rails_used())
        .map(|rail| {
            let mut fw = "22.39.1002".to_string();
            let mut width = 16;
            let mut rate = 100.0;
            let mut mtu = 4096;
            let mut state = "4: ACTIVE".to_string();
            let mut phys = "5: LinkUp".to_string();
            let mut symbol = 0;
            for f in &spec.faults {
                if let Fault::Inventory {
                    node: n,
                    rail: r,
                    what,
                } = f
                {
                    if *n != node || *r != rail {
                        continue;
                    }
                    match what {
                        InventoryFault::PcieWidth(w) => width = *w,
                        InventoryFault::RateGbit(g) => rate = *g,
                        InventoryFault::Firmware(v) => fw = v.clone(),
                        InventoryFault::Mtu(m) => mtu = *m,
                        InventoryFault::PortDown => {
                            state = "1: DOWN".into();
                            phys = "3: Disabled".into();
                        }
                        InventoryFault::SymbolErrors(n) => symbol = *n,
                    }
                }
            }
            let lanes = if rate >= 100.0 { "4X" } else { "2X" };
            RdmaDevice {
                name: format!("mlx5_{rail}"),
                fw_ver: Some(fw),
                node_guid: Some(format!("b8ce:f603:00{node:02x}:{rail:04x}")),
                ports: vec![RdmaPort {
                    port: 1,
                    state,
                    rate: format!("{rate} Gb/sec ({lanes} EDR)"),
                    rate_gbit_s: Some(rate),
                    link_layer: "Ethernet".into(),
                    netdev: Some(format!("eth{rail}")),
                    phys_state: Some(phys),
                    width: Some(lanes.into()),
                    speed: Some("EDR".into()),
                    active_mtu: Some(mtu),
                    netdev_mtu: Some(if mtu >= 4096 { 9000 } else { 1500 }),
                    netdev_speed_mbit_s: Some((rate * 1000.0) as u64),
                    counters: port_counters(symbol),
                }],
                pci: Some(PciLink {
                    address: format!("0000:{:02x}:00.0", 0x1a + rail),
                    current_speed: Some("16.0 GT/s PCIe".into()),
                    current_speed_gt_s: Some(16.0),
                    current_width: Some(width),
                    max_speed: Some("16.0 GT/s PCIe".into()),
                    max_speed_gt_s: Some(16.0),
                    max_width: Some(16),
                }),
                numa_node: Some((rail / 4) as i32),
            }
        })
        .collect()
}

fn hosts(spec: &SweepSpec) -> Vec<HostInfo> {
    let rails = spec.rails_used();
    let mut out = Vec::with_capacity((spec.nodes * rails) as usize);
    for node in 0..spec.nodes {
        let devs = devices(spec, node);
        for rail in 0..rails {
            out.push(HostInfo {
                rank: Some(node * rails + rail),
                hostname: sweep_node(node),
                kernel: "6.1.0-synthetic".into(),
                cpu_model: "Synthetic CPU".into(),
                cores: 64,
                numa_nodes: 2,
                rdma_devices: devs.clone(),
                local_rank: Some(rail),
                device: spec.device(rail),
                ..Default::default()
            });
        }
    }
    out
}

fn peer(spec: &SweepSpec, node: u32, rail: u32) -> Peer {
    let device = spec.device(rail);
    Peer {
        rank: Some(node * spec.rails_used() + rail),
        host: sweep_node(node),
        port: device.as_ref().map(|_| 1),
        device,
    }
}

fn counter_deltas(spec: &SweepSpec, p: &Pair, sent: i64, lost: i64) -> Option<CounterDeltas> {
    if !spec.counters {
        return None;
    }
    let side = |peer: &Peer, sent: i64, lost: i64| {
        peer.device.as_ref().map(|d| PortCounters {
            device: d.clone(),
            port: 1,
            counters: Default::default(),
            hw_counters: [
                ("sent_pkts".to_string(), sent),
                ("rcvd_pkts".to_string(), sent / 2),
                ("completer_retry_err".to_string(), lost),
                ("rcvd_seq_err".to_string(), lost / 2),
                ("duplicate_request".to_string(), 0),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        })
    };
    Some(CounterDeltas {
        initiator: side(&p.initiator, sent, lost),
        responder: side(&p.responder, sent / 64, 0),
    })
}

/// One result row of `a`-`b` on `rail` in `round`, or why it failed.
fn row(
    spec: &SweepSpec,
    rng: &mut Rng,
    a: u32,
    b: u32,
    rail: u32,
    round: u32,
) -> Result<TestResult, Box<FailedPair>> {
    let pair = Pair {
        initiator: peer(spec, a, rail),
        responder: peer(spec, b, rail),
        round: Some(round),
    };
    let Some(factor) = spec.factor(a, b, rail) else {
        return Err(Box::new(FailedPair {
            round,
            pair,
            size_bytes: Some(spec.size),
            initiator_error: Some(
                "work completion IBV_WC_RETRY_EXC_ERR (transport retry counter exceeded)".into(),
            ),
            responder_error: Some("peer stopped answering".into()),
            initiator_port_state: Some("4: ACTIVE".into()),
            responder_port_state: Some("1: DOWN".into()),
        }));
    };
    let healthy = factor >= 0.999;
    let jitter = 1.0 + spec.jitter * (2.0 * rng.unit() - 1.0);
    let lost = if healthy { 0 } else { 2_000 };
    if spec.is_latency() {
        let us = spec.base * jitter / factor;
        let h = histogram(rng, us, 200);
        Ok(TestResult::Latency(LatencyResult {
            test: spec.test.clone(),
            transport: spec.transport.clone(),
            size_bytes: spec.size,
            iterations: h.len(),
            warmup_iterations: 100,
            duration_s: h.len() as f64 * us * 2e-6,
            latency_us: h.summary_us(),
            perftest_us: None,
            histogram: h.encode(),
            counters: counter_deltas(spec, &pair, 400, lost / 100),
            pair,
            complete: true,
            memory: None,
            setup: None,
        }))
    } else {
        let gbit = spec.base * jitter * factor;
        let intervals: Vec<f64> = (0..5)
            .map(|_| gbit * (1.0 + 0.01 * (2.0 * rng.unit() - 1.0)))
            .collect();
        let avg = intervals.iter().sum::<f64>() / intervals.len() as f64;
        let peak = intervals.iter().cloned().fold(f64::MIN, f64::max);
        let duration = 0.5;
        let msgs = (avg * 1e9 / 8.0 * duration / spec.size as f64) as u64;
        Ok(TestResult::Bandwidth(BandwidthResult {
            test: spec.test.clone(),
            transport: spec.transport.clone(),
            size_bytes: spec.size,
            iterations: msgs,
            duration_s: duration,
            bidirectional: false,
            streams: 1,
            tx_depth: 128,
            cq_mod: None,
            post_list: None,
            bw_gbit_s: BandwidthSummary {
                avg,
                peak,
                perftest_peak: None,
            },
            msg_rate_mpps: msgs as f64 / duration / 1e6,
            interval_s: 0.1,
            interval_gbit_s: intervals,
            cpu: CpuUse {
                initiator_cores: 0.3,
                responder_cores: 0.25,
            },
            counters: counter_deltas(spec, &pair, msgs as i64 * 16, lost),
            pair,
            complete: true,
            check_wrong_bytes: None,
            setup: None,
            directions: Vec::new(),
            flows: Vec::new(),
            memory: None,
        }))
    }
}

/// The document around the rows (results empty): what rank 0 writes besides them.
fn head(spec: &SweepSpec, failed: Vec<FailedPair>) -> Document {
    let rounds = spec.rounds();
    let rails = spec.rails_used();
    let planned: u64 = rounds.iter().map(|r| r.len() as u64 * rails as u64).sum();
    let mut options = Map::new();
    options.insert("test".into(), Value::from(spec.test.clone()));
    options.insert("transport".into(), Value::from(spec.transport.clone()));
    options.insert("sizes".into(), Value::from(vec![spec.size]));
    options.insert(
        "pattern".into(),
        Value::from(if spec.pairs.is_some() {
            "file:suspects.pairs"
        } else {
            "all-pairs"
        }),
    );
    let mut doc = crate::document(spec.tool(), hosts(spec), spec.nodes * rails, vec![]);
    doc.launcher = "mpi".into();
    doc.options = options;
    doc.sweep = Some(SweepInfo {
        plan: None,
        pattern: if spec.pairs.is_some() {
            "file".into()
        } else {
            "all-pairs".into()
        },
        seed: None,
        file: spec.pairs.as_ref().map(|_| "suspects.pairs".into()),
        nodes: (0..spec.nodes).map(sweep_node).collect(),
        rails,
        rail_mode: "aligned".into(),
        include_local: false,
        rounds: rounds.len() as u32,
        rounds_done: rounds.len() as u32,
        planned_pairs: planned,
        round_seconds: vec![],
    });
    doc.failed_pairs = failed;
    doc
}

/// Visits every scheduled pair on every rail in schedule order.
fn each_row(spec: &SweepSpec, mut f: impl FnMut(Result<TestResult, Box<FailedPair>>)) {
    let mut rng = Rng::new(spec.seed);
    for (round, pairs) in spec.rounds().iter().enumerate() {
        for &(a, b) in pairs {
            for rail in 0..spec.rails_used() {
                f(row(spec, &mut rng, a, b, rail, round as u32));
            }
        }
    }
}

/// The whole sweep document in memory (tests and small sets).
pub fn sweep_doc(spec: &SweepSpec) -> Document {
    let mut results = Vec::new();
    let mut failed = Vec::new();
    each_row(spec, |r| match r {
        Ok(row) => results.push(row),
        Err(f) => failed.push(*f),
    });
    let mut doc = head(spec, failed);
    doc.results = results;
    doc
}

/// Writes the sweep document to `path` row by row, byte for byte as
/// `results::write::write_json_atomic` would write [`sweep_doc`], without holding the rows.
/// Returns the number of rows written.
pub fn write_sweep(spec: &SweepSpec, path: &Path) -> std::io::Result<u64> {
    write_sweep_as(spec, path, false)
}

/// [`write_sweep`], or compact JSON (no whitespace) with `compact`.
pub fn write_sweep_as(spec: &SweepSpec, path: &Path, compact: bool) -> std::io::Result<u64> {
    // Failed pairs go in the head, which is written first: collect them in a first pass
    // (they are few) and draw the numbers again in the second, from the same seed.
    let mut failed = Vec::new();
    each_row(spec, |r| {
        if let Err(f) = r {
            failed.push(*f)
        }
    });
    let (head, marker, open, close, sep, first, indent) = if compact {
        let h = serde_json::to_string(&head(spec, failed))?;
        (h, "\"results\":[],", "\"results\":[", "]", ",", "", "")
    } else {
        let h = serde_json::to_string_pretty(&head(spec, failed))?;
        (
            h,
            "\n  \"results\": [],\n",
            "\n  \"results\": [",
            "\n  ]",
            ",\n    ",
            "\n    ",
            "\n    ",
        )
    };
    let at = head
        .find(marker)
        .ok_or_else(|| std::io::Error::other("no results array in the document head"))?;
    let tmp = path.with_extension("json.part");
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    out.write_all(&head.as_bytes()[..at])?;
    out.write_all(open.as_bytes())?;
    let mut n = 0u64;
    let mut err = None;
    each_row(spec, |r| {
        let Ok(row) = r else { return };
        if err.is_some() {
            return;
        }
        let text = match if compact {
            serde_json::to_string(&row)
        } else {
            serde_json::to_string_pretty(&row)
        } {
            Ok(t) => t,
            Err(e) => {
                err = Some(std::io::Error::other(e));
                return;
            }
        };
        let res = out
            .write_all(if n == 0 { first } else { sep }.as_bytes())
            .and_then(|_| out.write_all(text.replace('\n', indent).as_bytes()));
        if let Err(e) = res {
            err = Some(e);
        }
        n += 1;
    });
    if let Some(e) = err {
        return Err(e);
    }
    out.write_all(if n == 0 { "]" } else { close }.as_bytes())?;
    out.write_all(&head.as_bytes()[at + marker.len() - if compact { 1 } else { 2 }..])?;
    out.write_all(b"\n")?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_pairs_meets_every_pair_once_on_every_rail() {
        let doc = sweep_doc(&SweepSpec::bandwidth(7, 2));
        assert_eq!(doc.results.len(), 7 * 6 / 2 * 2);
        let s = doc.sweep.as_ref().unwrap();
        assert_eq!(s.planned_pairs, 42);
        assert_eq!(s.rounds, 7);
    }

    #[test]
    fn streamed_document_is_byte_for_byte_the_pretty_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = SweepSpec::bandwidth(5, 2);
        spec.counters = true;
        spec.faults = vec![Fault::Failed {
            a: 0,
            b: 3,
            rail: 1,
        }];
        let p = dir.path().join("s.json");
        let rows = write_sweep(&spec, &p).unwrap();
        let streamed = std::fs::read_to_string(&p).unwrap();
        let whole = dir.path().join("w.json");
        results::write::write_json_atomic(&whole, &sweep_doc(&spec)).unwrap();
        assert_eq!(streamed, std::fs::read_to_string(&whole).unwrap());
        assert_eq!(rows, 19);
        let empty = SweepSpec {
            pairs: Some(vec![]),
            ..SweepSpec::latency(2, 1)
        };
        write_sweep(&empty, &p).unwrap();
        results::write::write_json_atomic(&whole, &sweep_doc(&empty)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            std::fs::read_to_string(&whole).unwrap()
        );
        for s in [&spec, &empty] {
            write_sweep_as(s, &p, true).unwrap();
            assert_eq!(
                std::fs::read_to_string(&p).unwrap(),
                serde_json::to_string(&sweep_doc(s)).unwrap() + "\n"
            );
        }
    }
}
