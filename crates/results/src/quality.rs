//! Measurement quality: what else was happening on a host while it measured, and the
//! thresholds beyond which a figure is called *disturbed*.
//!
//! Two runs of the same benchmark on the same fabric differ, and users of every reference
//! tool ask why. The usual answers are outside the fabric: another job on the node (load),
//! a hypervisor taking the CPU away (steal), the measuring thread losing its core
//! (involuntary context switches: each one is a scheduler slice, milliseconds, that lands
//! in the tail of a latency histogram or in one bandwidth interval), or other traffic on
//! the same port (the port counters moved more than the test did). Each document records
//! these figures ([`RunQuality`]); [`assess`] judges them against the thresholds below, in
//! the writer and again in `aggregate`, so both always agree and a document cannot claim to
//! be clean when its own figures say otherwise.
//!
//! The probe that measures a host lives in `probe::quality`; this module has no system
//! dependency, so `aggregate` judges documents anywhere.

use serde::{Deserialize, Serialize};

use crate::{CounterDeltas, Document, PortCounters, TestResult};

/// Load beyond the run's own measuring threads that a host may carry before a run on it
/// is called disturbed, on top of the cores the run leaves free. With `n` ranks of the run
/// on a host of `c` cores, the run is disturbed when the load that is not its own exceeds
/// `c - n + LOAD_SLACK`: then some runnable task waits for a core, and the scheduler
/// preempts a measuring thread to serve it.
pub const LOAD_SLACK: f64 = 0.5;

/// Share of CPU time (all CPUs) that the hypervisor stole during the run, in %, above
/// which the run is disturbed: a stolen vCPU stops the measuring thread without the guest
/// kernel knowing.
pub const STEAL_PCT_MAX: f64 = 1.0;

/// Involuntary context switches of the measuring thread above which the run is disturbed:
/// more than this many in all AND more than [`INVOLUNTARY_PER_S_MAX`] per second of the run.
pub const INVOLUNTARY_MIN: u64 = 10;

/// See [`INVOLUNTARY_MIN`].
pub const INVOLUNTARY_PER_S_MAX: f64 = 10.0;

/// Foreign port traffic (counted by the port beyond what the test itself can account for)
/// above this share of the test's own traffic makes a result disturbed ...
pub const FOREIGN_RATIO_MAX: f64 = 0.10;

/// ... provided it also exceeds this many bytes (byte counters) ...
pub const FOREIGN_MIN_BYTES: f64 = 1048576.0;

/// ... or this many packets (packet counters only), so that the port's own management
/// traffic (subnet manager, CNPs, the test's control messages) never counts.
pub const FOREIGN_MIN_PACKETS: f64 = 1000.0;

/// Largest header bytes per packet a port's data counter adds to the payload (RoCE v2:
/// Ethernet, IP, UDP, BTH, RETH, ICRC, FCS are 78 bytes; InfiniBand is smaller).
pub const HEADER_BYTES_MAX: f64 = 128.0;

/// Smallest path MTU, assumed when the document does not record the MTU: it gives the
/// most packets a message can take, so the estimate of the test's own packets is an upper
/// bound and foreign traffic is never over-counted.
pub const MTU_MIN: u64 = 256;

/// What could have disturbed one run, measured around it on each participating host.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunQuality {
    /// One entry per rank (MPI) or per side (standalone) that probed its host.
    pub hosts: Vec<HostQuality>,
    /// Port traffic beyond the test's own, one entry per point-to-point result and side
    /// whose counters can tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_traffic: Vec<PortTraffic>,
    /// True when any figure crossed its threshold.
    pub disturbed: bool,
    /// Every threshold crossed, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// One host's figures, taken by the measuring thread just before the run and just after.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostQuality {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub hostname: String,
    /// CPUs the host offers.
    pub cores: u32,
    /// 1-minute load average (`/proc/loadavg`) before and after the run.
    pub load_avg_before: f64,
    pub load_avg_after: f64,
    /// Share of CPU time stolen by the hypervisor since boot, at the start, in % (`steal`
    /// of `/proc/stat`): what this host is like.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_steal_pct_before: Option<f64>,
    /// Share of CPU time stolen during the run, in %: what this run suffered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_steal_pct: Option<f64>,
    /// Times the measuring thread was preempted during the run (`getrusage(RUSAGE_THREAD)`
    /// `ru_nivcsw`); absent when the run was not finished on the thread that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_context_switches: Option<u64>,
    /// Times it gave up the CPU itself (waits, sleeps): context, never judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_context_switches: Option<u64>,
    /// Wall time between the two probes.
    pub duration_s: f64,
}

/// Traffic one port counted during one result, against what the test itself moved.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PortTraffic {
    /// Index of the result in the document's `results`.
    pub result: usize,
    /// `initiator` or `responder`.
    pub side: String,
    /// `bytes` (`port_xmit_data` + `port_rcv_data`, 4-byte units, minus a header
    /// allowance per packet) or `packets` (only packet counters, as on Soft-RoCE).
    pub basis: String,
    /// The test's own traffic through the port, in `basis` units (for packets: the most
    /// the test can have sent and received, acknowledgements included).
    pub test: f64,
    /// What the port counted beyond that (never negative).
    pub foreign: f64,
    /// `foreign / test`.
    pub foreign_ratio: f64,
}

impl HostQuality {
    /// The label used in reasons: `host (rank 3)`.
    fn label(&self) -> String {
        match self.rank {
            Some(r) => format!("{} (rank {r})", self.hostname),
            None => self.hostname.clone(),
        }
    }

    /// Load on the host that is not the run's own, given `own` measuring threads there:
    /// the load before the run, or after it less what the run's threads could have added,
    /// whichever is larger.
    pub fn foreign_load(&self, own: u32) -> f64 {
        self.load_avg_before
            .max(self.load_avg_after - f64::from(own))
            .max(0.0)
    }

    /// Thresholds of the host crossed (load, steal: shared by every rank there), in words;
    /// `own` as for [`Self::foreign_load`].
    pub fn host_problems(&self, own: u32) -> Vec<String> {
        let mut out = Vec::new();
        let load = self.foreign_load(own);
        let room = f64::from(self.cores) - f64::from(own) + LOAD_SLACK;
        if load > room {
            out.push(format!(
                "{}: load average {:.2} before and {:.2} after the run on {} cores running {own} \
                 measuring thread(s): other work waited for a core",
                self.hostname, self.load_avg_before, self.load_avg_after, self.cores
            ));
        }
        if let Some(s) = self.cpu_steal_pct.filter(|s| *s > STEAL_PCT_MAX) {
            out.push(format!(
                "{}: the hypervisor stole {s:.1}% of the CPU time during the run (threshold {STEAL_PCT_MAX}%)",
                self.hostname
            ));
        }
        out
    }

    /// The threshold of the measuring thread itself (preemptions), in words.
    pub fn thread_problem(&self) -> Option<String> {
        let n = self.involuntary_context_switches?;
        let rate = if self.duration_s > 0.0 {
            n as f64 / self.duration_s
        } else {
            0.0
        };
        (n > INVOLUNTARY_MIN && rate > INVOLUNTARY_PER_S_MAX).then(|| {
            format!(
                "{}: the measuring thread was preempted {n} times in {:.1} s ({rate:.0}/s; \
                 threshold {INVOLUNTARY_MIN} and {INVOLUNTARY_PER_S_MAX}/s)",
                self.label(),
                self.duration_s
            )
        })
    }

    /// Every threshold crossed, host and thread.
    pub fn problems(&self, own: u32) -> Vec<String> {
        let mut out = self.host_problems(own);
        out.extend(self.thread_problem());
        out
    }
}

impl PortTraffic {
    /// True when the foreign traffic crosses the thresholds.
    pub fn disturbed(&self) -> bool {
        let floor = if self.basis == "bytes" {
            FOREIGN_MIN_BYTES
        } else {
            FOREIGN_MIN_PACKETS
        };
        self.foreign > floor && self.foreign_ratio > FOREIGN_RATIO_MAX
    }
}

fn counter(p: &PortCounters, names: &[&str]) -> Option<f64> {
    let mut found = None;
    for n in names {
        if let Some(v) = p.counters.get(*n).or_else(|| p.hw_counters.get(*n)) {
            *found.get_or_insert(0.0) += (*v).max(0) as f64;
        }
    }
    found
}

/// What a point-to-point result moved through one of its ports: payload bytes, data
/// packets and request packets (both directions), from its size, message count and test.
struct OwnTraffic {
    payload: f64,
    packets_max: f64,
}

fn own_traffic(r: &TestResult, mtu: u64, warmup: u64) -> Option<OwnTraffic> {
    let per_msg = |size: u64| size.div_ceil(mtu).max(1) as f64;
    let (size, messages, data_pkts, req_pkts) = match r {
        TestResult::Latency(l) => {
            let iters = (l.iterations + l.warmup_iterations) as f64;
            if l.test.starts_with("read") {
                // A read request goes out, the data comes back.
                (l.size_bytes, iters, iters * per_msg(l.size_bytes), iters)
            } else {
                // Ping and pong: the message crosses the port in both directions.
                let m = 2.0 * iters;
                (l.size_bytes, m, m * per_msg(l.size_bytes), 0.0)
            }
        }
        TestResult::Bandwidth(b) => {
            // Messages still in flight at the end and the warm-up are not in `iterations`.
            let extra = u64::from(b.tx_depth) * u64::from(b.streams.max(1)) * 2 + warmup;
            let m = (b.iterations + extra) as f64;
            let req = if b.test.starts_with("read") { m } else { 0.0 };
            (b.size_bytes, m, m * per_msg(b.size_bytes), req)
        }
        TestResult::Collective(_) => return None,
    };
    Some(OwnTraffic {
        payload: size as f64 * messages,
        // Every data and request packet may be acknowledged by one packet.
        packets_max: 2.0 * (data_pkts + req_pkts),
    })
}

/// Foreign traffic on each side of one point-to-point result, from its counter deltas.
/// `mtu` is the path MTU when the document records one.
pub fn port_traffic(
    index: usize,
    r: &TestResult,
    mtu: Option<u64>,
    warmup: u64,
) -> Vec<PortTraffic> {
    let (counters, pair): (&Option<CounterDeltas>, _) = match r {
        TestResult::Latency(l) => (&l.counters, &l.pair),
        TestResult::Bandwidth(b) => (&b.counters, &b.pair),
        TestResult::Collective(_) => return Vec::new(),
    };
    let Some(c) = counters else {
        return Vec::new();
    };
    // Both ends on one device of one host (Soft-RoCE in one VM, a NIC's loopback): the
    // port counts every packet twice, once per end.
    let shared = match (&c.initiator, &c.responder) {
        (Some(a), Some(b)) => {
            a.device == b.device && a.port == b.port && pair.initiator.host == pair.responder.host
        }
        _ => false,
    };
    let scale = if shared { 0.5 } else { 1.0 };
    let mut out = Vec::new();
    for (side, p) in [("initiator", &c.initiator), ("responder", &c.responder)] {
        let Some(p) = p else { continue };
        let bytes = counter(p, &["port_xmit_data"]).zip(counter(p, &["port_rcv_data"]));
        let pkts = counter(p, &["port_xmit_packets", "sent_pkts"])
            .zip(counter(p, &["port_rcv_packets", "rcvd_pkts"]));
        let entry = match (bytes, pkts) {
            (Some((tx, rx)), Some((ptx, prx))) => {
                // Data counters count 4-byte words, headers included: allow the most header
                // bytes a counted packet can carry, then what is left beyond the payload is
                // someone else's.
                let Some(own) = own_traffic(r, mtu.unwrap_or(MTU_MIN).max(1), warmup) else {
                    continue;
                };
                let counted = (tx + rx) * 4.0 * scale;
                let headers = (ptx + prx) * scale * HEADER_BYTES_MAX;
                let foreign = (counted - headers - own.payload).max(0.0);
                PortTraffic {
                    result: index,
                    side: side.into(),
                    basis: "bytes".into(),
                    test: own.payload,
                    foreign,
                    foreign_ratio: foreign / own.payload.max(1.0),
                }
            }
            (_, Some((ptx, prx))) => {
                let Some(own) = own_traffic(r, mtu.unwrap_or(MTU_MIN).max(1), warmup) else {
                    continue;
                };
                let counted = (ptx + prx) * scale;
                let foreign = (counted - own.packets_max).max(0.0);
                PortTraffic {
                    result: index,
                    side: side.into(),
                    basis: "packets".into(),
                    test: own.packets_max,
                    foreign,
                    foreign_ratio: foreign / own.packets_max.max(1.0),
                }
            }
            _ => continue,
        };
        out.push(entry);
    }
    out
}

/// Judges the figures of every host and every result's ports, filling `disturbed` and
/// `reasons`. `hosts` are the probes' figures; the port traffic is computed from the
/// results' counter deltas.
pub fn assess(hosts: Vec<HostQuality>, doc: &Document) -> RunQuality {
    let mtu = doc.options.get("mtu").and_then(|v| v.as_u64());
    let warmup = doc
        .options
        .get("warmup")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let port_traffic: Vec<PortTraffic> = doc
        .results
        .iter()
        .enumerate()
        .flat_map(|(i, r)| port_traffic(i, r, mtu, warmup))
        .collect();
    let mut q = RunQuality {
        hosts,
        port_traffic,
        ..RunQuality::default()
    };
    let (hosts, threads) = disturbed_hosts(&q.hosts);
    let mut reasons: Vec<String> = hosts.into_iter().flat_map(|h| h.1).collect();
    reasons.extend(threads.into_iter().map(|t| t.2));
    for t in q.port_traffic.iter().filter(|t| t.disturbed()) {
        let r = &doc.results[t.result];
        reasons.push(format!(
            "{} {} B ({}): the {} port counted {:.0} {} beyond the test's own {:.0} ({:.0}%; \
             threshold {:.0}%): other traffic shared the link",
            r.test(),
            r.size_bytes(),
            pair_label(r),
            t.side,
            t.foreign,
            t.basis,
            t.test,
            t.foreign_ratio * 100.0,
            FOREIGN_RATIO_MAX * 100.0
        ));
    }
    reasons.dedup();
    q.disturbed = !reasons.is_empty();
    q.reasons = reasons;
    q
}

/// Hosts over a host threshold (name and reasons), each once whatever its ranks, judged
/// on the worst figures any of its ranks took; and measuring threads over theirs (host,
/// rank, reason).
#[allow(clippy::type_complexity)]
fn disturbed_hosts(
    hosts: &[HostQuality],
) -> (
    Vec<(String, Vec<String>)>,
    Vec<(String, Option<u32>, String)>,
) {
    let mut by_host: std::collections::BTreeMap<&str, (HostQuality, u32)> = Default::default();
    for h in hosts {
        let e = by_host
            .entry(h.hostname.as_str())
            .or_insert_with(|| (h.clone(), 0));
        e.1 += 1;
        let w = &mut e.0;
        w.load_avg_before = w.load_avg_before.max(h.load_avg_before);
        w.load_avg_after = w.load_avg_after.max(h.load_avg_after);
        w.cpu_steal_pct = match (w.cpu_steal_pct, h.cpu_steal_pct) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    let host_level = by_host
        .into_iter()
        .map(|(name, (worst, own))| (name.to_string(), worst.host_problems(own)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let thread_level = hosts
        .iter()
        .filter_map(|h| h.thread_problem().map(|p| (h.hostname.clone(), h.rank, p)))
        .collect();
    (host_level, thread_level)
}

fn pair_label(r: &TestResult) -> String {
    match r {
        TestResult::Latency(l) => l.pair.label(),
        TestResult::Bandwidth(b) => b.pair.label(),
        TestResult::Collective(c) => format!("{} ranks", c.ranks),
    }
}

/// The quality of one result, for marks in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// Every figure within its threshold.
    Clean,
    /// A figure of a host it ran on, or of its own ports, crossed a threshold.
    Disturbed,
    /// The document records no quality (older writers, synthetic data).
    Unknown,
}

impl Mark {
    pub fn as_str(self) -> &'static str {
        match self {
            Mark::Clean => "ok",
            Mark::Disturbed => "disturbed",
            Mark::Unknown => "unknown",
        }
    }
}

/// The marks of every result of one document, judged once.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    /// `None`: the document has no quality record.
    judged: Option<Judged>,
}

#[derive(Debug, Clone, Default)]
struct Judged {
    /// Hosts disturbed as a whole (load, steal).
    hosts: Vec<String>,
    /// Measuring threads that were preempted: (hostname, rank).
    threads: Vec<(String, Option<u32>)>,
    /// Results disturbed by port traffic.
    results: Vec<usize>,
    /// Reasons, as [`assess`] words them.
    reasons: Vec<String>,
}

impl Marks {
    /// Re-judges the document's recorded figures with this build's thresholds.
    pub fn of(doc: &Document) -> Marks {
        let Some(q) = &doc.quality else {
            return Marks::default();
        };
        let fresh = assess(q.hosts.clone(), doc);
        let (hosts, threads) = disturbed_hosts(&fresh.hosts);
        let mut results: Vec<usize> = fresh
            .port_traffic
            .iter()
            .filter(|t| t.disturbed())
            .map(|t| t.result)
            .collect();
        results.dedup();
        Marks {
            judged: Some(Judged {
                hosts: hosts.into_iter().map(|h| h.0).collect(),
                threads: threads.into_iter().map(|t| (t.0, t.1)).collect(),
                results,
                reasons: fresh.reasons,
            }),
        }
    }

    /// True when the document carries a quality record.
    pub fn known(&self) -> bool {
        self.judged.is_some()
    }

    /// Every threshold crossed anywhere in the document.
    pub fn reasons(&self) -> &[String] {
        self.judged.as_ref().map_or(&[], |j| &j.reasons)
    }

    /// True when any host or result of the document is disturbed.
    pub fn any_disturbed(&self) -> bool {
        !self.reasons().is_empty()
    }

    /// The mark of result `index`: a point-to-point result is disturbed by its own ports or
    /// by either host of its pair; a collective by any host of the run.
    pub fn mark(&self, index: usize, r: &TestResult) -> Mark {
        let Some(j) = &self.judged else {
            return Mark::Unknown;
        };
        if j.results.contains(&index) {
            return Mark::Disturbed;
        }
        let hit = |p: &crate::Peer| {
            j.hosts.contains(&p.host)
                || j.threads.iter().any(|(h, rank)| {
                    *h == p.host && (rank.is_none() || p.rank.is_none() || *rank == p.rank)
                })
        };
        let disturbed = match r {
            TestResult::Latency(l) => hit(&l.pair.initiator) || hit(&l.pair.responder),
            TestResult::Bandwidth(b) => hit(&b.pair.initiator) || hit(&b.pair.responder),
            // Every rank waits for the slowest: one disturbed rank slows the collective.
            TestResult::Collective(_) => !j.hosts.is_empty() || !j.threads.is_empty(),
        };
        if disturbed {
            Mark::Disturbed
        } else {
            Mark::Clean
        }
    }
}

impl Document {
    /// Records the probes' figures of every host, judges them and every result's port
    /// traffic, and adds a warning per threshold crossed. Call once the results are in.
    pub fn attach_quality(&mut self, hosts: Vec<HostQuality>) {
        let q = assess(hosts, self);
        for r in &q.reasons {
            self.warnings.push(format!("measurement disturbed: {r}"));
        }
        self.quality = Some(q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BandwidthResult, BandwidthSummary, CpuUse, Pair, Peer};

    fn host(name: &str, rank: Option<u32>, cores: u32, before: f64, after: f64) -> HostQuality {
        HostQuality {
            rank,
            hostname: name.into(),
            cores,
            load_avg_before: before,
            load_avg_after: after,
            cpu_steal_pct_before: Some(0.0),
            cpu_steal_pct: Some(0.0),
            involuntary_context_switches: Some(0),
            voluntary_context_switches: Some(3),
            duration_s: 10.0,
        }
    }

    fn peer(h: &str, r: Option<u32>) -> Peer {
        Peer {
            rank: r,
            host: h.into(),
            ..Peer::default()
        }
    }

    fn bw(a: &str, b: &str, size: u64, msgs: u64, counters: Option<CounterDeltas>) -> TestResult {
        TestResult::Bandwidth(BandwidthResult {
            test: "write_bw".into(),
            transport: "verbs".into(),
            size_bytes: size,
            iterations: msgs,
            duration_s: 1.0,
            bidirectional: false,
            streams: 1,
            tx_depth: 128,
            cq_mod: None,
            post_list: None,
            bw_gbit_s: BandwidthSummary::default(),
            msg_rate_mpps: 0.0,
            interval_s: 0.1,
            interval_gbit_s: vec![],
            cpu: CpuUse::default(),
            pair: Pair {
                initiator: peer(a, None),
                responder: peer(b, None),
                round: None,
            },
            complete: true,
            counters,
            check_wrong_bytes: None,
            memory: None,
            setup: None,
            directions: Vec::new(),
            flows: Vec::new(),
        })
    }

    fn port(dev: &str, counters: &[(&str, i64)], hw: &[(&str, i64)]) -> Option<PortCounters> {
        Some(PortCounters {
            device: dev.into(),
            port: 1,
            counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            hw_counters: hw.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        })
    }

    fn doc(results: Vec<TestResult>) -> Document {
        let mut d = Document::new("bench-bw", "standalone", 2, "2026-01-01T00:00:00Z".into());
        d.results = results;
        d
    }

    #[test]
    fn load_beyond_the_free_cores_is_a_disturbance_and_the_runs_own_load_is_not() {
        // Two measuring threads on a 2-core host: no room for anyone else.
        assert!(host("a", None, 2, 0.2, 2.3).problems(2).is_empty());
        assert_eq!(host("a", None, 2, 1.0, 2.3).problems(2).len(), 1);
        // 64 cores, 8 ranks: 40 runnable tasks of others still leave room.
        assert!(host("a", Some(0), 64, 40.0, 45.0).problems(8).is_empty());
        assert!(!host("a", Some(0), 64, 57.0, 60.0).problems(8).is_empty());
    }

    #[test]
    fn steal_and_preemption_cross_their_thresholds() {
        let mut h = host("a", None, 8, 0.0, 0.0);
        h.cpu_steal_pct = Some(STEAL_PCT_MAX * 2.0);
        assert!(h.problems(1)[0].contains("stole"), "{:?}", h.problems(1));
        let mut h = host("a", None, 8, 0.0, 0.0);
        h.involuntary_context_switches = Some(500);
        assert!(h.problems(1)[0].contains("preempted 500 times"));
        // A few preemptions in a long run are the normal life of a thread.
        h.involuntary_context_switches = Some(INVOLUNTARY_MIN);
        assert!(h.problems(1).is_empty());
        h.involuntary_context_switches = Some(50);
        h.duration_s = 60.0;
        assert!(h.problems(1).is_empty(), "50 in 60 s is under 10/s");
    }

    #[test]
    fn foreign_bytes_on_a_port_are_found_and_headers_are_not_foreign() {
        let (size, msgs) = (65536u64, 100_000u64);
        let payload = (size * msgs) as i64;
        let pkts = (msgs * 64) as i64; // 1 KiB MTU
                                       // A clean port: the payload plus 60 header bytes a packet, acks back.
        let clean = CounterDeltas {
            initiator: port(
                "mlx5_0",
                &[
                    ("port_xmit_data", (payload + pkts * 60) / 4),
                    ("port_rcv_data", pkts * 60 / 4),
                    ("port_xmit_packets", pkts),
                    ("port_rcv_packets", pkts),
                ],
                &[],
            ),
            responder: None,
        };
        let d = doc(vec![bw("a", "b", size, msgs, Some(clean.clone()))]);
        let q = assess(vec![], &d);
        assert_eq!(q.port_traffic.len(), 1);
        assert_eq!(q.port_traffic[0].basis, "bytes");
        assert!(!q.disturbed, "{:?}", q);
        // Another job moved 2 GB through the same port meanwhile.
        let mut busy = clean;
        let p = busy.initiator.as_mut().unwrap();
        *p.counters.get_mut("port_rcv_data").unwrap() += 2_000_000_000 / 4;
        *p.counters.get_mut("port_rcv_packets").unwrap() += 2_000_000_000 / 4096;
        let d = doc(vec![bw("a", "b", size, msgs, Some(busy))]);
        let q = assess(vec![], &d);
        assert!(q.disturbed, "{:?}", q);
        assert!(q.reasons[0].contains("other traffic"), "{:?}", q.reasons);
        let m = Marks::of(&Document {
            quality: Some(q),
            ..d.clone()
        });
        assert_eq!(m.mark(0, &d.results[0]), Mark::Disturbed);
    }

    #[test]
    fn packet_counters_of_a_shared_loopback_device_count_each_packet_once() {
        // Soft-RoCE in one VM: both ends on rxe0, every packet seen by "both" sides.
        let (size, msgs) = (4096u64, 10_000u64);
        let own = (msgs + 256) * (size / 256) * 2; // upper bound with acks, MTU 256
        let both = |extra: i64| CounterDeltas {
            initiator: port(
                "rxe0",
                &[],
                &[
                    ("sent_pkts", own as i64 + extra),
                    ("rcvd_pkts", own as i64 + extra),
                ],
            ),
            responder: port(
                "rxe0",
                &[],
                &[
                    ("sent_pkts", own as i64 + extra),
                    ("rcvd_pkts", own as i64 + extra),
                ],
            ),
        };
        let d = doc(vec![bw("vm", "vm", size, msgs, Some(both(0)))]);
        assert!(!assess(vec![], &d).disturbed);
        let d = doc(vec![bw("vm", "vm", size, msgs, Some(both(100_000)))]);
        let q = assess(vec![], &d);
        assert!(q.disturbed && q.port_traffic[0].basis == "packets", "{q:?}");
    }

    #[test]
    fn marks_follow_the_hosts_of_each_pair() {
        let mut d = doc(vec![
            bw("a", "b", 1024, 10, None),
            bw("c", "d", 1024, 10, None),
        ]);
        assert_eq!(Marks::of(&d).mark(0, &d.results[0]), Mark::Unknown);
        d.attach_quality(vec![
            host("a", None, 4, 0.0, 1.0),
            host("b", None, 4, 0.0, 1.0),
            host("c", None, 4, 9.0, 9.0),
            host("d", None, 4, 0.0, 1.0),
        ]);
        assert!(d.quality.as_ref().unwrap().disturbed);
        assert!(d
            .warnings
            .iter()
            .any(|w| w.starts_with("measurement disturbed: c:")));
        let m = Marks::of(&d);
        assert_eq!(m.mark(0, &d.results[0]), Mark::Clean);
        assert_eq!(m.mark(1, &d.results[1]), Mark::Disturbed);
        // The record round-trips through JSON and is judged the same way again.
        let back: Document = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back.quality, d.quality);
        assert_eq!(Marks::of(&back).mark(1, &back.results[1]), Mark::Disturbed);
    }
}
