//! The metrics a delivery profile can bound, what each means on the wire, and how each is
//! read out of result rows. `docs/profiles.md` is the reference for profile authors; keep
//! the two in step.

use results::{BandwidthResult, CollectiveResult, CounterDeltas, LatencyResult};

/// A kind of cabling difference (`structure::cabling` finds them and says what each
/// means).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    CableSwap,
    WrongLeaf,
    WrongPort,
    MissingLink,
    ExtraLink,
    LinkDowngraded,
    /// A NIC discovery found on a node under a name none of the node's planned NICs has.
    UnplannedNic,
}

impl DiffKind {
    pub const ALL: [DiffKind; 7] = [
        DiffKind::CableSwap,
        DiffKind::WrongLeaf,
        DiffKind::WrongPort,
        DiffKind::MissingLink,
        DiffKind::ExtraLink,
        DiffKind::LinkDowngraded,
        DiffKind::UnplannedNic,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DiffKind::CableSwap => "cable_swap",
            DiffKind::WrongLeaf => "wrong_leaf",
            DiffKind::WrongPort => "wrong_port",
            DiffKind::MissingLink => "missing_link",
            DiffKind::ExtraLink => "extra_link",
            DiffKind::LinkDowngraded => "link_downgraded",
            DiffKind::UnplannedNic => "unplanned_nic",
        }
    }
    /// What to do about it.
    pub fn what(self) -> &'static str {
        match self {
            DiffKind::CableSwap => "swap the two cables back (at the host or at the leaves)",
            DiffKind::WrongLeaf => "move the cable to its planned leaf",
            DiffKind::WrongPort => "move the cable to its planned port (data flows, but labels and port maps are wrong)",
            DiffKind::MissingLink => "cable (or bring up) the missing switch link",
            DiffKind::ExtraLink => "remove the unplanned link, or add it to the plan",
            DiffKind::LinkDowngraded => "replace the cable or optic, or reseat it: it trained below its peers",
            DiffKind::UnplannedNic => "name the NIC in the plan as discovery names it (or fix the name it announces): until then its cabling is not compared",
        }
    }
}

/// Which kind of result row a metric is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    Latency,
    Bandwidth,
    Collective,
    /// Any row that carries device counters (latency or bandwidth).
    Counters,
    /// The node-by-node matrix of a sweep, as a whole (see the `matrix` module).
    Matrix,
    /// Every row.
    Any,
}

/// A metric a check can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// One-way latency percentile from the histograms of the selected rows, merged across
    /// ranks, pairs and runs (never an average of percentiles).
    Latency(Percentile),
    /// Bytes over the whole timed loop, 10^9 bit/s.
    BwAvg,
    /// Best interval of the run, 10^9 bit/s.
    BwPeak,
    /// Largest deviation of one interval sample from the run's mean, in % of the mean:
    /// the "throughput fluctuation within +-5%" of a delivery contract.
    BwFluctuation,
    /// Millions of messages per second.
    MsgRate,
    /// Cores busy on the busier side per 100 Gb/s moved: RDMA's point is that the NIC,
    /// not the CPU, moves the data (under 0.6 core at 100 Gb/s; TCP needs dozens).
    CpuPer100G,
    /// nccl-tests bus bandwidth, 10^9 byte/s (out-of-place).
    Busbw,
    /// nccl-tests algorithm bandwidth, 10^9 byte/s (out-of-place).
    Algbw,
    /// busbw over the link rate, in % (out-of-place).
    Efficiency,
    /// busbw at N ranks over busbw at a base communicator size, same collective, size and
    /// datatype, in % (out-of-place; see `scaling`).
    ScalingEfficiency,
    /// Mean time of one collective, slowest rank, microseconds (out-of-place).
    CollTime,
    /// Elements found wrong by `--check`, in-place and out-of-place together. Rows that
    /// were not checked give no value, so an unchecked run is MISSING, not PASS.
    Wrong,
    /// Retransmitted or erroneous packets over packets sent, both sides, in %.
    LinkLoss,
    /// Bandwidth rows: the longest PFC pause of one priority and direction on either side
    /// (`{rx,tx}_prio{p}_pause_duration`, us) over the row's duration, in %.
    PauseShare,
    /// Packets discarded on either side (every driver or port counter named `*discard*`:
    /// `rx_discards_phy`, `rx_prio{p}_discards`, `_buf_discard`, `_cong_discard`,
    /// `port_xmit_discards`); a lossless fabric has none.
    Discards,
    /// Bandwidth rows: CNPs sent by the notification points of both sides
    /// (`np_cnp_sent`) per second: how often ECN marks reached the receivers.
    CnpRate,
    /// Errors FEC did not correct, both sides (`rx_pcs_symbol_err_phy`, `rx_crc_errors_phy`,
    /// `rx_symbol_err_phy`, InfiniBand's `symbol_error`).
    PostFecErrors,
    /// Pre-FEC bit error rate of the worse side: bits FEC corrected
    /// (`rx_corrected_bits_phy`) over the bits the link carried in the window
    /// (`rx_bits_phy` where the driver has it, else the port's rate x the row's seconds).
    PreFecBer,
    /// Scheduled pairs that could not be measured (the sweep's `failed_pairs`).
    FailedPairs,
    /// Links measured (or failed) over links a sweep scheduled, in %; below the bound the
    /// check is MISSING, naming the links that were never measured.
    MatrixCoverage,
    /// Suspect nodes, NICs, rails and links the matrix localises.
    Suspects,
    /// Cabling differences of one kind found by discovery against the plan or the
    /// fabric's regularity (`structure::cabling`): swapped cable pairs, NICs on the wrong
    /// leaf, cables on the wrong port, missing and extra switch links, links trained
    /// below their peers. MISSING when no discovery is in the inputs.
    Cabling(DiffKind),
    /// Selected results measured on a disturbed host or link (`results::quality`): with
    /// `max = 0`, a profile accepts only undisturbed evidence. Results without a quality
    /// record give no value, so a check that sees only those is MISSING.
    Disturbed,
    /// GPU copy baseline bandwidth (`bench-bw --test h2d|d2h|d2d|p2p`), 10^9 byte/s as GPU
    /// tools print it; only copy rows (transport `cuda`) have it.
    CopyBw,
    /// Expert-parallel rows (`ep_dispatch`, `ep_combine`): payload bytes that left their
    /// node, per rank, over the slowest rank's median step, 10^9 byte/s (NIC traffic; the
    /// DeepEP-compatible figure, which counts the own node too, is `ep_deepep_bw`).
    EpNetworkBw,
    /// DeepEP's "RDMA GB/s": one copy per token and destination node, own node included.
    EpDeepepBw,
    /// The slowest rank's step time per iteration, 99th percentile, microseconds.
    EpStepP99,
    /// Copies received by the busiest rank over the mean (1 = even).
    EpImbalance,
}

/// A latency percentile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Percentile {
    Min,
    P50,
    P90,
    P99,
    P999,
    P9999,
    Max,
    Mean,
}

impl Percentile {
    /// Quantile for histogram look-ups; `None` for min, max and mean.
    pub fn quantile(self) -> Option<f64> {
        match self {
            Percentile::P50 => Some(0.5),
            Percentile::P90 => Some(0.9),
            Percentile::P99 => Some(0.99),
            Percentile::P999 => Some(0.999),
            Percentile::P9999 => Some(0.9999),
            _ => None,
        }
    }

    pub fn of(self, s: &results::LatencySummary) -> f64 {
        match self {
            Percentile::Min => s.min,
            Percentile::P50 => s.p50,
            Percentile::P90 => s.p90,
            Percentile::P99 => s.p99,
            Percentile::P999 => s.p999,
            Percentile::P9999 => s.p9999,
            Percentile::Max => s.max,
            Percentile::Mean => s.mean,
        }
    }
}

/// Every metric with its profile name and unit, in documentation order.
pub const ALL: &[(&str, Metric, &str)] = &[
    ("latency_min", Metric::Latency(Percentile::Min), "us"),
    ("latency_p50", Metric::Latency(Percentile::P50), "us"),
    ("latency_p90", Metric::Latency(Percentile::P90), "us"),
    ("latency_p99", Metric::Latency(Percentile::P99), "us"),
    ("latency_p999", Metric::Latency(Percentile::P999), "us"),
    ("latency_p9999", Metric::Latency(Percentile::P9999), "us"),
    ("latency_max", Metric::Latency(Percentile::Max), "us"),
    ("latency_mean", Metric::Latency(Percentile::Mean), "us"),
    ("bw_avg", Metric::BwAvg, "Gb/s"),
    ("bw_peak", Metric::BwPeak, "Gb/s"),
    ("bw_fluctuation", Metric::BwFluctuation, "%"),
    ("msg_rate", Metric::MsgRate, "Mpps"),
    ("cpu_cores_per_100g", Metric::CpuPer100G, "cores"),
    ("busbw", Metric::Busbw, "GB/s"),
    ("algbw", Metric::Algbw, "GB/s"),
    ("efficiency", Metric::Efficiency, "%"),
    ("scaling_efficiency", Metric::ScalingEfficiency, "%"),
    ("collective_time", Metric::CollTime, "us"),
    ("wrong_elements", Metric::Wrong, "elements"),
    ("link_loss", Metric::LinkLoss, "%"),
    ("pause_share", Metric::PauseShare, "%"),
    ("discards", Metric::Discards, "packets"),
    ("cnp_rate", Metric::CnpRate, "CNP/s"),
    ("post_fec_errors", Metric::PostFecErrors, "errors"),
    ("pre_fec_ber", Metric::PreFecBer, "BER"),
    ("failed_pairs", Metric::FailedPairs, "pairs"),
    ("matrix_coverage", Metric::MatrixCoverage, "%"),
    ("suspects", Metric::Suspects, "suspects"),
    (
        "cabling_swapped",
        Metric::Cabling(DiffKind::CableSwap),
        "cables",
    ),
    (
        "cabling_wrong_leaf",
        Metric::Cabling(DiffKind::WrongLeaf),
        "cables",
    ),
    (
        "cabling_wrong_port",
        Metric::Cabling(DiffKind::WrongPort),
        "cables",
    ),
    (
        "cabling_missing_links",
        Metric::Cabling(DiffKind::MissingLink),
        "links",
    ),
    (
        "cabling_extra_links",
        Metric::Cabling(DiffKind::ExtraLink),
        "links",
    ),
    (
        "cabling_downgraded_links",
        Metric::Cabling(DiffKind::LinkDowngraded),
        "links",
    ),
    (
        "cabling_unplanned_nics",
        Metric::Cabling(DiffKind::UnplannedNic),
        "NICs",
    ),
    ("disturbed_results", Metric::Disturbed, "results"),
    ("copy_bw", Metric::CopyBw, "GB/s"),
    ("ep_network_bw", Metric::EpNetworkBw, "GB/s"),
    ("ep_deepep_bw", Metric::EpDeepepBw, "GB/s"),
    ("ep_step_p99", Metric::EpStepP99, "us"),
    ("ep_imbalance", Metric::EpImbalance, "ratio"),
];

impl Metric {
    pub fn parse(name: &str) -> Option<(Metric, &'static str)> {
        ALL.iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, m, u)| (*m, *u))
    }

    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|(_, m, _)| *m == self)
            .map(|e| e.0)
            .unwrap_or("?")
    }

    pub fn unit(self) -> &'static str {
        ALL.iter()
            .find(|(_, m, _)| *m == self)
            .map(|e| e.2)
            .unwrap_or("?")
    }

    pub fn rows(self) -> RowKind {
        match self {
            Metric::Latency(_) => RowKind::Latency,
            Metric::BwAvg
            | Metric::BwPeak
            | Metric::BwFluctuation
            | Metric::MsgRate
            | Metric::CpuPer100G
            | Metric::CopyBw => RowKind::Bandwidth,
            Metric::Busbw
            | Metric::Algbw
            | Metric::Efficiency
            | Metric::ScalingEfficiency
            | Metric::CollTime
            | Metric::EpNetworkBw
            | Metric::EpDeepepBw
            | Metric::EpStepP99
            | Metric::EpImbalance => RowKind::Collective,
            Metric::Wrong => RowKind::Collective,
            Metric::LinkLoss | Metric::Discards | Metric::PostFecErrors => RowKind::Counters,
            Metric::PauseShare | Metric::CnpRate | Metric::PreFecBer => RowKind::Bandwidth,
            Metric::FailedPairs
            | Metric::MatrixCoverage
            | Metric::Suspects
            | Metric::Cabling(_) => RowKind::Matrix,
            Metric::Disturbed => RowKind::Any,
        }
    }

    /// True when a larger value is better (bandwidth); false when smaller is (latency).
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::BwAvg
                | Metric::BwPeak
                | Metric::MsgRate
                | Metric::Busbw
                | Metric::Algbw
                | Metric::Efficiency
                | Metric::ScalingEfficiency
                | Metric::MatrixCoverage
                | Metric::CopyBw
                | Metric::EpNetworkBw
                | Metric::EpDeepepBw
        )
    }

    /// Whether a bidirectional row's figure for this metric is the sum of its two
    /// directions (as perftest -b prints it). A bound on such a metric is one-way unless
    /// the check says `bidirectional = true`: it holds for each direction, so 47 + 47
    /// fails a bound of 94 ([`Metric::of_directions`]).
    pub fn sums_directions(self) -> bool {
        matches!(self, Metric::BwAvg | Metric::BwPeak | Metric::MsgRate)
    }

    /// This metric for each direction a bidirectional row recorded on its own (none for
    /// a one-way row, or a bidirectional one written before directions were kept).
    pub fn of_directions(self, r: &BandwidthResult) -> Vec<f64> {
        r.directions
            .iter()
            .filter_map(|d| match self {
                Metric::BwAvg => Some(d.bw_gbit_s.avg),
                Metric::BwPeak => Some(d.bw_gbit_s.peak),
                Metric::MsgRate => Some(d.msg_rate_mpps),
                _ => None,
            })
            .collect()
    }

    /// Value of a bandwidth metric for one row.
    pub fn of_bandwidth(self, r: &BandwidthResult) -> Option<f64> {
        match self {
            Metric::BwAvg => Some(r.bw_gbit_s.avg),
            Metric::BwPeak => Some(r.bw_gbit_s.peak),
            Metric::BwFluctuation => fluctuation_pct(&r.interval_gbit_s),
            Metric::MsgRate => Some(r.msg_rate_mpps),
            Metric::CpuPer100G => cpu_per_100g(&r.cpu, r.bw_gbit_s.avg),
            Metric::LinkLoss => r.counters.as_ref().and_then(link_loss_pct),
            Metric::CopyBw => (r.transport == "cuda").then_some(r.bw_gbit_s.avg / 8.0),
            Metric::PauseShare
            | Metric::Discards
            | Metric::CnpRate
            | Metric::PostFecErrors
            | Metric::PreFecBer => r
                .counters
                .as_ref()
                .and_then(|c| health(c).metric(self, r.duration_s)),
            _ => None,
        }
    }

    /// Value of a collective metric for one row, given a fallback link rate for
    /// efficiency when the row carries none.
    pub fn of_collective(self, r: &CollectiveResult, link_gbit_s: Option<f64>) -> Option<f64> {
        let t = &r.out_of_place;
        match self {
            Metric::Busbw => Some(t.busbw_gbyte_s),
            Metric::Algbw => Some(t.algbw_gbyte_s),
            Metric::CollTime => Some(t.time_us),
            Metric::Efficiency => t.efficiency.map(|e| e * 100.0).or_else(|| {
                r.link_gbit_s
                    .or(link_gbit_s)
                    .filter(|l| *l > 0.0)
                    .map(|l| t.busbw_gbyte_s * 8.0 / l * 100.0)
            }),
            Metric::Wrong => {
                let parts: Vec<u64> = [&r.out_of_place, &r.in_place]
                    .iter()
                    .filter(|t| t.checked)
                    .map(|t| t.wrong)
                    .collect();
                (!parts.is_empty()).then(|| parts.iter().map(|&w| w as f64).sum::<f64>())
            }
            Metric::Latency(p) => Some(p.of(&t.latency_us)),
            Metric::EpNetworkBw => r.ep.as_ref().map(|e| e.network_gbyte_s),
            Metric::EpDeepepBw => r.ep.as_ref().map(|e| e.deepep_gbyte_s),
            Metric::EpStepP99 => r.ep.as_ref().map(|e| e.step_p99_us),
            Metric::EpImbalance => r.ep.as_ref().map(|e| e.imbalance),
            _ => None,
        }
    }

    /// Value of a latency-row metric that is not a merged percentile.
    pub fn of_latency_row(self, r: &LatencyResult) -> Option<f64> {
        match self {
            Metric::Latency(p) => Some(p.of(&r.latency_us)),
            Metric::LinkLoss => r.counters.as_ref().and_then(link_loss_pct),
            Metric::Discards | Metric::PostFecErrors => r
                .counters
                .as_ref()
                .and_then(|c| health(c).metric(self, r.duration_s)),
            _ => None,
        }
    }
}

/// Median (mean of the middle two for an even count); `None` when empty. Sorts `v`.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// Largest |sample - mean| / mean over the interval samples, in %; `None` with fewer than
/// two samples (one interval says nothing about stability).
pub fn fluctuation_pct(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    let worst = samples.iter().map(|s| (s - mean).abs()).fold(0.0, f64::max);
    Some(worst / mean * 100.0)
}

/// Counters that count packets put on the wire: IB/RoCE `port_xmit_packets` (mlx5 and
/// every IB driver) and Soft-RoCE's `sent_pkts`.
pub const SENT_COUNTERS: &[&str] = &["port_xmit_packets", "sent_pkts"];

/// Counters that count a packet lost, retransmitted or received damaged, on either side:
/// mlx5 (`out_of_sequence`, `packet_seq_err`, `local_ack_timeout_err`,
/// `implied_nak_seq_err`, `port_rcv_errors`, `port_xmit_discards`) and rxe
/// (`completer_retry_err`, `rcvd_seq_err`, `out_of_seq_request`).
pub const LOSS_COUNTERS: &[&str] = &[
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "implied_nak_seq_err",
    "port_rcv_errors",
    "port_xmit_discards",
    "completer_retry_err",
    "rcvd_seq_err",
    "out_of_seq_request",
];

/// Cores busy on the busier side per 100 Gb/s moved; `None` when nothing moved.
pub fn cpu_per_100g(cpu: &results::CpuUse, avg_gbit_s: f64) -> Option<f64> {
    if avg_gbit_s <= 0.0 {
        return None;
    }
    let busier = cpu.initiator_cores.max(cpu.responder_cores);
    Some(busier / (avg_gbit_s / 100.0))
}

/// Sent and lost packets summed over counter deltas, one counter at a time (so a reader
/// that never builds the counter maps can tally them too).
#[derive(Debug, Clone, Copy, Default)]
pub struct LossTally {
    sent: i64,
    lost: i64,
    have_sent: bool,
}

impl LossTally {
    /// Counts one counter delta by its kernel name.
    pub fn add(&mut self, name: &str, v: i64) {
        if SENT_COUNTERS.contains(&name) {
            self.have_sent = true;
            self.sent = self.sent.saturating_add(v.max(0));
        } else if LOSS_COUNTERS.contains(&name) {
            self.lost = self.lost.saturating_add(v.max(0));
        }
    }

    /// Lost over sent, in %; `None` without a sent-packets counter or with nothing sent.
    pub fn pct(&self) -> Option<f64> {
        (self.have_sent && self.sent > 0).then(|| self.lost as f64 / self.sent as f64 * 100.0)
    }
}

/// Link health from a row's counter deltas, both sides, tallied one counter at a time
/// (as [`LossTally`], so the streaming reader tallies the same way). Each figure is known
/// only where a counter of its family was present: a driver without pause counters gives
/// no pause share, not 0 %. Negative deltas (a counter reset) count as 0. Names are each
/// driver's own, from one table ([`crate::counters`]: mlx5, bnxt_en/bnxt_re, irdma, the
/// InfiniBand PMA).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HealthTally {
    pause_us: Option<i64>,
    discards: Option<i64>,
    cnp_sent: Option<i64>,
    post_fec_errors: Option<i64>,
    /// Per side (initiator, responder): FEC-corrected bits, bits received (where the
    /// driver counts them) and the port's rate; `side` says which one `add` counts into.
    corrected_bits: [Option<i64>; 2],
    rx_bits: [Option<i64>; 2],
    rate_gbit_s: [Option<f64>; 2],
    side: usize,
    /// One bit per [`Family`]: a counter of that family was only a lower bound (saturated
    /// or cleared in the window), so the figure is "at least".
    floors: u8,
}

use crate::counters::{family, Family};

/// The family whose lower bound makes `m` a lower bound.
fn family_of_metric(m: Metric) -> Option<Family> {
    match m {
        Metric::LinkLoss => Some(Family::Loss),
        Metric::PauseShare => Some(Family::Pause),
        Metric::Discards => Some(Family::Discards),
        Metric::CnpRate => Some(Family::Cnp),
        Metric::PostFecErrors => Some(Family::PostFec),
        Metric::PreFecBer => Some(Family::Corrected),
        _ => None,
    }
}

impl HealthTally {
    /// The counters added next are side `i`'s (0 initiator, 1 responder), whose port
    /// ran at `rate_gbit_s`.
    pub fn side(&mut self, i: usize, rate_gbit_s: Option<f64>) {
        self.side = i.min(1);
        self.rate_gbit_s[self.side] = rate_gbit_s;
    }

    pub fn add(&mut self, name: &str, v: i64) {
        let v = v.max(0);
        let sum = |slot: &mut Option<i64>| *slot = Some(slot.unwrap_or(0).saturating_add(v));
        match family(name) {
            Some(Family::Pause) => self.pause_us = Some(self.pause_us.unwrap_or(0).max(v)),
            Some(Family::Discards) => sum(&mut self.discards),
            Some(Family::Cnp) => sum(&mut self.cnp_sent),
            Some(Family::PostFec) => sum(&mut self.post_fec_errors),
            Some(Family::Corrected) => sum(&mut self.corrected_bits[self.side]),
            Some(Family::RxBits) => sum(&mut self.rx_bits[self.side]),
            Some(Family::Loss) | None => {}
        }
    }

    /// Counter `name`'s delta was only a lower bound (named in the row's `at_least`):
    /// the figures summed from it become "at least".
    pub fn at_least_of(&mut self, name: &str) {
        if LOSS_COUNTERS.contains(&name) {
            self.floors |= Family::Loss as u8;
        }
        if let Some(f) = family(name) {
            self.floors |= f as u8;
        }
    }

    /// Whether `m`'s value from these counters is only a lower bound.
    pub fn at_least(&self, m: Metric) -> bool {
        family_of_metric(m).is_some_and(|f| self.floors & f as u8 != 0)
    }

    /// Whether a side's pre-FEC BER is over the port's rate x the row's seconds: the
    /// driver counts corrected bits but no received bits (mlx5 prints `rx_bits_phy` only
    /// where the firmware reports it). That denominator assumes the link received at
    /// line rate the whole row, so it is an estimate, low where the link was idle.
    pub fn ber_by_rate(&self) -> bool {
        (0..2).any(|i| {
            self.corrected_bits[i].is_some()
                && self.rx_bits[i].is_none_or(|b| b <= 0)
                && self.rate_gbit_s[i].is_some_and(|r| r > 0.0)
        })
    }

    /// The worse side's pre-FEC BER over `seconds`; `None` without a corrected-bits
    /// counter or without a denominator (neither `rx_bits_phy` nor the port's rate).
    fn pre_fec_ber(&self, seconds: f64) -> Option<f64> {
        (0..2)
            .filter_map(|i| {
                let corrected = self.corrected_bits[i]? as f64;
                let bits = match self.rx_bits[i] {
                    Some(b) if b > 0 => b as f64,
                    _ => self.rate_gbit_s[i].filter(|r| *r > 0.0)? * 1e9 * seconds,
                };
                (bits > 0.0).then(|| corrected / bits)
            })
            .reduce(f64::max)
    }

    /// The value of one of the health metrics over a row of `seconds`.
    pub fn metric(&self, m: Metric, seconds: f64) -> Option<f64> {
        let per_s = |v: Option<i64>, scale: f64| {
            v.filter(|_| seconds > 0.0)
                .map(|v| v as f64 * scale / seconds)
        };
        match m {
            Metric::PauseShare => per_s(self.pause_us, 1e-6 * 100.0),
            Metric::Discards => self.discards.map(|v| v as f64),
            Metric::CnpRate => per_s(self.cnp_sent, 1.0),
            Metric::PostFecErrors => self.post_fec_errors.map(|v| v as f64),
            Metric::PreFecBer => self.pre_fec_ber(seconds),
            _ => None,
        }
    }
}

/// [`HealthTally`] of both sides' deltas, every counter map.
pub fn health(c: &CounterDeltas) -> HealthTally {
    let mut t = HealthTally::default();
    for (i, side) in [&c.initiator, &c.responder].into_iter().enumerate() {
        let Some(side) = side else {
            continue;
        };
        t.side(i, side.rate_gbit_s);
        for map in [&side.counters, &side.hw_counters, &side.driver_counters] {
            for (name, v) in map {
                t.add(name, *v);
            }
        }
        for name in &side.at_least {
            t.at_least_of(name);
        }
    }
    t
}

/// Whether `m`'s value from a row's deltas is only a lower bound: a counter of its family
/// is named in a side's `at_least` (reads only those names, not the counters).
pub fn at_least(c: &CounterDeltas, m: Metric) -> bool {
    let mut t = HealthTally::default();
    for side in [&c.initiator, &c.responder].into_iter().flatten() {
        for name in &side.at_least {
            t.at_least_of(name);
        }
    }
    t.at_least(m)
}

/// Lost or retransmitted packets over packets sent, in %, from both sides' deltas;
/// `None` when no side has a sent-packets counter or nothing was sent.
pub fn link_loss_pct(c: &CounterDeltas) -> Option<f64> {
    let mut tally = LossTally::default();
    for side in [&c.initiator, &c.responder].into_iter().flatten() {
        for map in [&side.counters, &side.hw_counters] {
            for (name, v) in map {
                tally.add(name, *v);
            }
        }
    }
    tally.pct()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_figures_come_from_their_counters_and_are_unknown_without_them() {
        let mut r = match synth::bandwidth_doc("a", "b", &[65536], 100.0, 1)
            .results
            .remove(0)
        {
            results::TestResult::Bandwidth(b) => b,
            _ => unreachable!(),
        };
        r.duration_s = 2.0;
        r.counters = None;
        for m in [
            Metric::PauseShare,
            Metric::Discards,
            Metric::CnpRate,
            Metric::PostFecErrors,
            Metric::PreFecBer,
        ] {
            assert_eq!(m.of_bandwidth(&r), None, "{m:?} without counters");
        }
        let side = |drv: &[(&str, i64)], hw: &[(&str, i64)]| results::PortCounters {
            driver_counters: drv.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            hw_counters: hw.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        };
        r.counters = Some(CounterDeltas {
            initiator: Some(side(
                &[
                    ("rx_prio3_pause_duration", 300_000),
                    ("tx_prio3_pause_duration", 100_000),
                    ("rx_discards_phy", 2),
                    ("rx_prio3_buf_discard", 1),
                ],
                &[("np_cnp_sent", 500)],
            )),
            responder: Some(side(
                &[
                    ("rx_prio3_pause_duration", 400_000),
                    ("rx_crc_errors_phy", -4),
                ],
                &[("np_cnp_sent", 300)],
            )),
        });
        // The longest pause (0.4 s of 2 s), every discard, CNPs per second, and a
        // negative delta (a reset) as 0.
        assert_eq!(Metric::PauseShare.of_bandwidth(&r), Some(20.0));
        assert_eq!(Metric::Discards.of_bandwidth(&r), Some(3.0));
        assert_eq!(Metric::CnpRate.of_bandwidth(&r), Some(400.0));
        assert_eq!(Metric::PostFecErrors.of_bandwidth(&r), Some(0.0));
        assert_eq!(
            crate::rows::BwStats::of(&r).metric(Metric::PauseShare),
            Some(20.0)
        );
        // No corrected-bits counter: no pre-FEC BER, not a passing 0.
        assert_eq!(Metric::PreFecBer.of_bandwidth(&r), None);
        // The initiator corrected 2,000 bits in 2 s at 100 Gb/s (BER 1e-8); the responder
        // counts its received bits, 1,000 corrected of 1e9 (1e-6): the worse side counts.
        let c = r.counters.as_mut().unwrap();
        let i = c.initiator.as_mut().unwrap();
        i.driver_counters
            .insert("rx_corrected_bits_phy".into(), 2_000);
        i.rate_gbit_s = Some(100.0);
        assert_eq!(Metric::PreFecBer.of_bandwidth(&r), Some(1e-8));
        let c = r.counters.as_mut().unwrap();
        let o = c.responder.as_mut().unwrap();
        o.driver_counters
            .insert("rx_corrected_bits_phy".into(), 1_000);
        o.driver_counters
            .insert("rx_bits_phy".into(), 1_000_000_000);
        assert_eq!(Metric::PreFecBer.of_bandwidth(&r), Some(1e-6));
        assert_eq!(
            crate::rows::BwStats::of(&r).metric(Metric::PreFecBer),
            Some(1e-6)
        );
        // Without a rate or received bits the corrected bits have no denominator.
        let c = r.counters.as_mut().unwrap();
        c.responder = None;
        c.initiator.as_mut().unwrap().rate_gbit_s = None;
        assert_eq!(Metric::PreFecBer.of_bandwidth(&r), None);
    }

    #[test]
    fn every_metric_round_trips_by_name() {
        for (name, m, unit) in ALL {
            assert_eq!(Metric::parse(name), Some((*m, *unit)));
            assert_eq!(m.name(), *name);
        }
        assert!(Metric::parse("latency").is_none());
    }

    #[test]
    fn ep_metrics_read_the_ep_block_only() {
        let mut r = match synth::collective_doc(8, &[1 << 20], 10.0, 100.0, 1)
            .results
            .remove(0)
        {
            results::TestResult::Collective(c) => c,
            _ => unreachable!(),
        };
        assert_eq!(Metric::EpNetworkBw.of_collective(&r, None), None);
        r.ep = Some(results::collective::EpFigures {
            network_gbyte_s: 12.5,
            deepep_gbyte_s: 20.0,
            step_p99_us: 300.0,
            imbalance: 1.25,
            ..Default::default()
        });
        assert_eq!(Metric::EpNetworkBw.of_collective(&r, None), Some(12.5));
        assert_eq!(Metric::EpDeepepBw.of_collective(&r, None), Some(20.0));
        assert_eq!(Metric::EpStepP99.of_collective(&r, None), Some(300.0));
        assert_eq!(Metric::EpImbalance.of_collective(&r, None), Some(1.25));
        assert!(Metric::EpNetworkBw.higher_is_better() && !Metric::EpStepP99.higher_is_better());
    }

    #[test]
    fn fluctuation_is_worst_deviation_from_mean() {
        let f = fluctuation_pct(&[90.0, 100.0, 110.0]).unwrap();
        assert!((f - 10.0).abs() < 1e-9);
        assert!(fluctuation_pct(&[5.0]).is_none());
    }

    #[test]
    fn loss_needs_a_sent_counter() {
        let c = synth::counters(1_000_000, 50);
        assert!((link_loss_pct(&c).unwrap() - 0.005).abs() < 1e-12);
        let mut none = c.clone();
        for s in [&mut none.initiator, &mut none.responder]
            .into_iter()
            .flatten()
        {
            s.hw_counters.remove("sent_pkts");
        }
        assert!(link_loss_pct(&none).is_none());
    }
}
