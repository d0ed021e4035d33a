//! Point-to-point result rows in compact form: for each row, which test it measured, its
//! two ends, its round, and every number a check, a table or the matrix reads from it,
//! computed once. A 1024-node, 8-rail all-pairs sweep holds 4.2 million rows; as full
//! `TestResult` values (strings, interval vectors, counter maps) they would take several
//! GiB, in this form about 100 bytes each.
//!
//! Documents streamed (the `stream` module) keep only these rows. Documents read whole keep
//! their `TestResult`s, and [`P2pRows::from_document`] gives the same compact view of them
//! to the matrix, so both kinds are judged by one code path there.

use std::collections::{BTreeMap, HashMap};

use results::quality::{Mark, Marks};
use results::{
    BandwidthResult, CounterDeltas, CpuUse, Document, LatencyResult, LatencySummary, Pair, Peer,
    TestResult,
};

use crate::metric::{
    cpu_per_100g, fluctuation_pct, health, link_loss_pct, HealthTally, Metric, LOSS_COUNTERS,
};

/// Driver counters (mlx5 and rxe `hw_counters`) whose every increment is a request that
/// failed or was retried: with the link's own error counters and the loss counters of the
/// `link_loss` metric, the evidence beside a suspect (see [`is_error_counter`]).
pub const ERROR_COUNTERS: &[&str] = &[
    "rnr_nak_retry_err",
    "req_cqe_error",
    "resp_cqe_error",
    "req_transport_retries_exceeded",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "send_err",
    "duplicate_request",
];

/// True for a counter that counts errors: the link's own (the InfiniBand PortCounters of
/// [`results::pma::ERROR_FIELDS`]), the drivers' ([`ERROR_COUNTERS`]) and the loss counters.
pub fn is_error_counter(name: &str) -> bool {
    results::pma::is_error_field(name)
        || ERROR_COUNTERS.contains(&name)
        || LOSS_COUNTERS.contains(&name)
}

/// Sentinel for a row without a round (standalone pairs).
pub const NO_ROUND: u32 = u32::MAX;

/// What a group of rows measured: rows of one group are comparable with each other.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct GroupKey {
    pub tool: String,
    pub test: String,
    pub transport: String,
    pub size: u64,
    pub bidirectional: bool,
    pub latency: bool,
    /// Buffers of the ends: `host`, `cuda` or `mixed` (`results::MemoryUse::class`).
    pub memory: String,
}

impl GroupKey {
    /// The transport as merged tables show it, GPU buffers apart (`verbs+cuda`): what
    /// `results::transport_label` gives for this memory class.
    pub fn table_transport(&self) -> String {
        if self.memory != "host" && self.transport != "cuda" {
            format!("{}+{}", self.transport, self.memory)
        } else {
            self.transport.clone()
        }
    }
}

/// Bandwidth numbers of one row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwStats {
    pub avg: f64,
    pub peak: f64,
    pub msg_rate: f64,
    pub fluctuation: Option<f64>,
    /// Sample variance of the interval samples (two or more), for `compare`'s noise floor.
    pub interval_var: Option<f64>,
    pub cpu_per_100g: Option<f64>,
    pub loss: Option<f64>,
    /// GPU copy baseline bandwidth, 10^9 byte/s (copy rows only: transport `cuda`).
    pub copy_bw: Option<f64>,
    /// Pauses, discards, CNPs, post-FEC errors from the counters, and the row's length.
    pub health: HealthTally,
    pub seconds: f64,
    /// A bidirectional row's figures per direction (average, peak Gb/s, Mpps), in the
    /// order the row recorded them; `None` where not recorded (one-way rows, older ones).
    pub directions: [Option<DirStats>; 2],
}

/// One direction of a bidirectional row: average and peak Gb/s, message rate in Mpps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirStats {
    pub avg: f64,
    pub peak: f64,
    pub msg_rate: f64,
}

impl DirStats {
    /// The figures of up to two recorded directions.
    pub fn of(directions: impl IntoIterator<Item = (f64, f64, f64)>) -> [Option<DirStats>; 2] {
        let mut out = [None, None];
        for (slot, (avg, peak, msg_rate)) in out.iter_mut().zip(directions) {
            *slot = Some(DirStats {
                avg,
                peak,
                msg_rate,
            });
        }
        out
    }

    fn metric(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::BwAvg => Some(self.avg),
            Metric::BwPeak => Some(self.peak),
            Metric::MsgRate => Some(self.msg_rate),
            _ => None,
        }
    }
}

impl BwStats {
    /// `m` for each recorded direction (see [`Metric::of_directions`]).
    pub fn of_directions(&self, m: Metric) -> Vec<f64> {
        self.directions
            .iter()
            .flatten()
            .filter_map(|d| d.metric(m))
            .collect()
    }

    pub fn of(r: &BandwidthResult) -> Self {
        let mut s = Self::from_parts(
            &r.transport,
            r.bw_gbit_s.avg,
            r.bw_gbit_s.peak,
            r.msg_rate_mpps,
            &r.interval_gbit_s,
            &r.cpu,
            r.counters.as_ref().and_then(link_loss_pct),
            (
                r.counters.as_ref().map(health).unwrap_or_default(),
                r.duration_s,
            ),
        );
        s.directions = DirStats::of(
            r.directions
                .iter()
                .map(|d| (d.bw_gbit_s.avg, d.bw_gbit_s.peak, d.msg_rate_mpps)),
        );
        s
    }

    /// The one place the numbers are derived, whichever reader parsed the row.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        transport: &str,
        avg: f64,
        peak: f64,
        msg_rate: f64,
        intervals: &[f64],
        cpu: &CpuUse,
        loss: Option<f64>,
        (health, seconds): (HealthTally, f64),
    ) -> Self {
        let interval_var = (intervals.len() >= 2).then(|| {
            let m = intervals.iter().sum::<f64>() / intervals.len() as f64;
            intervals.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (intervals.len() - 1) as f64
        });
        BwStats {
            avg,
            peak,
            msg_rate,
            fluctuation: fluctuation_pct(intervals),
            interval_var,
            cpu_per_100g: cpu_per_100g(cpu, avg),
            loss,
            copy_bw: (transport == "cuda").then_some(avg / 8.0),
            health,
            seconds,
            directions: [None, None],
        }
    }

    /// The value of `m` for this row, as [`Metric::of_bandwidth`] reads it.
    pub fn metric(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::BwAvg => Some(self.avg),
            Metric::BwPeak => Some(self.peak),
            Metric::BwFluctuation => self.fluctuation,
            Metric::MsgRate => Some(self.msg_rate),
            Metric::CpuPer100G => self.cpu_per_100g,
            Metric::LinkLoss => self.loss,
            Metric::CopyBw => self.copy_bw,
            Metric::PauseShare
            | Metric::Discards
            | Metric::CnpRate
            | Metric::PostFecErrors
            | Metric::PreFecBer => self.health.metric(m, self.seconds),
            _ => None,
        }
    }
}

/// Latency numbers of one row (its own percentiles; histograms are merged at load).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatStats {
    pub us: LatencySummary,
    pub loss: Option<f64>,
    /// Discards and post-FEC errors from the counters.
    pub health: HealthTally,
}

impl LatStats {
    pub fn of(r: &LatencyResult) -> Self {
        LatStats {
            us: r.latency_us,
            loss: r.counters.as_ref().and_then(link_loss_pct),
            health: r.counters.as_ref().map(health).unwrap_or_default(),
        }
    }

    /// The value of `m` for this row, as [`Metric::of_latency_row`] reads it.
    pub fn metric(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Latency(p) => Some(p.of(&self.us)),
            Metric::LinkLoss => self.loss,
            Metric::Discards | Metric::PostFecErrors => self.health.metric(m, 0.0),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowStats {
    Latency(LatStats),
    Bandwidth(BwStats),
}

impl RowStats {
    pub fn metric(&self, m: Metric) -> Option<f64> {
        match self {
            RowStats::Latency(l) => l.metric(m),
            RowStats::Bandwidth(b) => b.metric(m),
        }
    }

    /// Whether `m`'s value is only a lower bound (a counter behind it saturated or was
    /// cleared in the window).
    pub fn at_least(&self, m: Metric) -> bool {
        match self {
            RowStats::Latency(l) => l.health.at_least(m),
            RowStats::Bandwidth(b) => b.health.at_least(m),
        }
    }

    /// Whether `m`'s value is an estimate: the pre-FEC BER over the port's rate x the
    /// row's time where the driver counts no received bits.
    pub fn estimated(&self, m: Metric) -> bool {
        match self {
            RowStats::Bandwidth(b) => m == Metric::PreFecBer && b.health.ber_by_rate(),
            RowStats::Latency(_) => false,
        }
    }
}

/// A [`GroupKey`] borrowed from a row being read (no allocation for groups seen).
#[derive(Debug, Clone, Copy)]
pub struct GroupRef<'a> {
    pub tool: &'a str,
    pub test: &'a str,
    pub transport: &'a str,
    pub size: u64,
    pub bidirectional: bool,
    pub latency: bool,
    pub memory: &'a str,
}

impl GroupKey {
    pub fn as_ref(&self) -> GroupRef<'_> {
        GroupRef {
            tool: &self.tool,
            test: &self.test,
            transport: &self.transport,
            size: self.size,
            bidirectional: self.bidirectional,
            latency: self.latency,
            memory: &self.memory,
        }
    }
}

/// One compact row: indices into its [`P2pRows`]' groups and peers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct P2pRow {
    pub group: u32,
    pub initiator: u32,
    pub responder: u32,
    /// [`NO_ROUND`] when the row has none.
    pub round: u32,
    pub complete: bool,
    pub stats: RowStats,
}

/// Interns the ends of pairs: a sweep has 8192 of them and 4 million rows naming them.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    pub list: Vec<Peer>,
    /// By rank (MPI runs name every end by rank), candidates compared in full.
    by_rank: HashMap<Option<u32>, Vec<u32>>,
    /// The first peer seen with each small rank: a sweep names the same end of a rank
    /// millions of times, and a hash look-up per row and end shows in the profile.
    dense: Vec<u32>,
}

impl Peers {
    /// Index of the peer with these fields, added when new. Takes borrowed parts so a
    /// streaming reader does not allocate for the ends it has seen before.
    pub fn intern(
        &mut self,
        rank: Option<u32>,
        host: &str,
        device: Option<&str>,
        port: Option<u32>,
    ) -> u32 {
        let same = |p: &Peer| p.host == host && p.device.as_deref() == device && p.port == port;
        let slot = rank.map(|r| r as usize).filter(|&r| r < 1 << 20);
        if let Some(&i) = slot.and_then(|r| self.dense.get(r)) {
            if i != u32::MAX && same(&self.list[i as usize]) {
                return i;
            }
        }
        let cands = self.by_rank.entry(rank).or_default();
        if let Some(&i) = cands.iter().find(|&&i| same(&self.list[i as usize])) {
            return i;
        }
        let i = self.list.len() as u32;
        if let Some(r) = slot {
            if self.dense.len() <= r {
                self.dense.resize(r + 1, u32::MAX);
            }
            if self.dense[r] == u32::MAX {
                self.dense[r] = i;
            }
        }
        self.list.push(Peer {
            rank,
            host: host.to_string(),
            device: device.map(str::to_string),
            port,
        });
        cands.push(i);
        i
    }

    pub fn intern_peer(&mut self, p: &Peer) -> u32 {
        self.intern(p.rank, &p.host, p.device.as_deref(), p.port)
    }
}

/// One error counter's rise summed over rows, and whether any row's delta was only a
/// lower bound (the counter at its ceiling after the window, or cleared in it:
/// `PortCounters::at_least`), which makes the sum one too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorSum {
    pub delta: i64,
    pub at_least: bool,
}

impl ErrorSum {
    pub fn add(&mut self, other: ErrorSum) {
        self.delta = self.delta.saturating_add(other.delta);
        self.at_least |= other.at_least;
    }

    /// Adds every counter's sum of `from` into `into`: the one way per-row sums become
    /// per-end, per-device or merged-document sums.
    pub fn add_all(into: &mut BTreeMap<String, ErrorSum>, from: &BTreeMap<String, ErrorSum>) {
        for (name, v) in from {
            into.entry(name.clone()).or_default().add(*v);
        }
    }
}

/// The compact rows of one document, with what they index.
#[derive(Debug, Clone, Default)]
pub struct P2pRows {
    pub groups: Vec<GroupKey>,
    pub peers: Peers,
    pub rows: Vec<P2pRow>,
    /// Error-counter deltas summed per peer over every row where it was an end: the
    /// non-zero ones, and those that were lower bounds.
    pub errors: BTreeMap<u32, BTreeMap<String, ErrorSum>>,
}

impl P2pRows {
    /// Index of a group, added when new (a document has a handful).
    pub fn group(&mut self, k: GroupRef) -> u32 {
        if let Some(i) = self.groups.iter().position(|g| {
            g.size == k.size
                && g.bidirectional == k.bidirectional
                && g.latency == k.latency
                && g.test == k.test
                && g.transport == k.transport
                && g.tool == k.tool
                && g.memory == k.memory
        }) {
            return i as u32;
        }
        self.groups.push(GroupKey {
            tool: k.tool.into(),
            test: k.test.into(),
            transport: k.transport.into(),
            size: k.size,
            bidirectional: k.bidirectional,
            latency: k.latency,
            memory: k.memory.into(),
        });
        (self.groups.len() - 1) as u32
    }

    /// Adds one error-counter delta of `peer` (zero and non-error counters are ignored).
    pub fn add_error(&mut self, peer: u32, name: &str, v: i64) {
        if v != 0 && is_error_counter(name) {
            self.error_entry(peer, name).add(ErrorSum {
                delta: v,
                at_least: false,
            });
        }
    }

    /// Notes that `peer`'s delta of error counter `name` in a row was a lower bound.
    pub fn error_at_least(&mut self, peer: u32, name: &str) {
        if is_error_counter(name) {
            self.error_entry(peer, name).at_least = true;
        }
    }

    fn error_entry(&mut self, peer: u32, name: &str) -> &mut ErrorSum {
        self.errors
            .entry(peer)
            .or_default()
            .entry(name.to_string())
            .or_default()
    }

    fn add_counter_errors(&mut self, c: &Option<CounterDeltas>, ends: (u32, u32)) {
        let Some(c) = c else { return };
        for (side, peer) in [(&c.initiator, ends.0), (&c.responder, ends.1)] {
            if let Some(side) = side {
                for (name, v) in side.counters.iter().chain(&side.hw_counters) {
                    self.add_error(peer, name, *v);
                }
                for name in &side.at_least {
                    self.error_at_least(peer, name);
                }
            }
        }
    }

    fn ends(&mut self, pair: &Pair) -> (u32, u32, u32) {
        (
            self.peers.intern_peer(&pair.initiator),
            self.peers.intern_peer(&pair.responder),
            pair.round.unwrap_or(NO_ROUND),
        )
    }

    /// The compact view of a document's point-to-point rows (collective rows have none).
    pub fn from_document(doc: &Document) -> Self {
        let mut out = P2pRows::default();
        for r in &doc.results {
            out.push_result(&doc.tool, r);
        }
        out
    }

    /// Adds one result row of a `tool` document (a collective row adds nothing).
    pub fn push_result(&mut self, tool: &str, r: &TestResult) {
        let (group, pair, stats, counters, complete) = match r {
            TestResult::Latency(l) => (
                self.group(GroupRef {
                    tool,
                    test: &l.test,
                    transport: &l.transport,
                    size: l.size_bytes,
                    bidirectional: false,
                    latency: true,
                    memory: l.memory_class(),
                }),
                &l.pair,
                RowStats::Latency(LatStats::of(l)),
                &l.counters,
                l.complete,
            ),
            TestResult::Bandwidth(b) => (
                self.group(GroupRef {
                    tool,
                    test: &b.test,
                    transport: &b.transport,
                    size: b.size_bytes,
                    bidirectional: b.bidirectional,
                    latency: false,
                    memory: b.memory_class(),
                }),
                &b.pair,
                RowStats::Bandwidth(BwStats::of(b)),
                &b.counters,
                b.complete,
            ),
            TestResult::Collective(_) => return,
        };
        let (initiator, responder, round) = self.ends(pair);
        self.add_counter_errors(counters, (initiator, responder));
        self.rows.push(P2pRow {
            group,
            initiator,
            responder,
            round,
            complete,
            stats,
        });
    }

    /// Appends `other`, re-indexing its groups and peers into this set's.
    pub fn append(&mut self, other: P2pRows) {
        let groups: Vec<u32> = other
            .groups
            .iter()
            .map(|g| self.group(g.as_ref()))
            .collect();
        let peers: Vec<u32> = other
            .peers
            .list
            .iter()
            .map(|p| self.peers.intern_peer(p))
            .collect();
        self.rows.reserve(other.rows.len());
        for r in other.rows {
            self.rows.push(P2pRow {
                group: groups[r.group as usize],
                initiator: peers[r.initiator as usize],
                responder: peers[r.responder as usize],
                ..r
            });
        }
        for (p, counters) in &other.errors {
            ErrorSum::add_all(self.errors.entry(peers[*p as usize]).or_default(), counters);
        }
    }

    /// The quality mark of every row (`results::quality`), from the document's record;
    /// `None` when it has none (every row unknown). A streamed document's rows keep no
    /// counters, so only its hosts and threads can mark them, not foreign port traffic.
    pub fn marks(&self, doc: &Document) -> Option<Vec<Mark>> {
        doc.quality.as_ref()?;
        let marks = Marks::of(doc);
        Some(
            self.rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let probe = TestResult::Bandwidth(results::BandwidthResult {
                        pair: self.pair(r),
                        ..Default::default()
                    });
                    marks.mark(i, &probe)
                })
                .collect(),
        )
    }

    /// The pair of a row, as the document wrote it.
    pub fn pair(&self, r: &P2pRow) -> Pair {
        Pair {
            initiator: self.peers.list[r.initiator as usize].clone(),
            responder: self.peers.list[r.responder as usize].clone(),
            round: (r.round != NO_ROUND).then_some(r.round),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::ALL;

    #[test]
    fn compact_rows_give_every_metric_the_full_row_gives() {
        let doc = synth::bandwidth_doc("a", "b", &[4096, 1 << 20], 90.0, 3);
        let lat = synth::latency_doc("a", "b", &[2, 64], 2.0, 4);
        for d in [&doc, &lat] {
            let rows = P2pRows::from_document(d);
            assert_eq!(rows.rows.len(), d.results.len());
            for (r, full) in rows.rows.iter().zip(&d.results) {
                for (_, m, _) in ALL {
                    let want = match full {
                        TestResult::Latency(l) => m.of_latency_row(l),
                        TestResult::Bandwidth(b) => m.of_bandwidth(b),
                        TestResult::Collective(_) => unreachable!(),
                    };
                    assert_eq!(r.stats.metric(*m), want, "{m:?}");
                }
                assert_eq!(rows.pair(r).label(), "a <-> b");
            }
        }
    }

    #[test]
    fn errors_are_summed_per_end_and_peers_interned_once() {
        let mut doc = synth::bandwidth_doc("a", "b", &[4096, 8192], 90.0, 3);
        let first = P2pRows::from_document(&doc);
        assert_eq!(first.peers.list.len(), 2);
        // synth counters: completer_retry_err 10 on the initiator per row.
        assert_eq!(first.errors[&0]["completer_retry_err"].delta, 20);
        assert!(!first.errors.contains_key(&1));
        doc.tool = "other".into();
        let mut all = first.clone();
        all.append(P2pRows::from_document(&doc));
        assert_eq!(all.groups.len(), 4);
        assert_eq!(all.peers.list.len(), 2);
        assert_eq!(all.errors[&0]["completer_retry_err"].delta, 40);
    }
}
