//! The collectives fabcheck measures, by the names result documents carry, with
//! nccl-tests' bus-bandwidth factors. One definition for everything that names a
//! collective or computes a busbw: `bench-collective` (which adds how to run and check
//! each one), the synthetic data of the tests, and readers of results.

/// What every reader and writer of results must agree on about one collective.
#[derive(Debug)]
pub struct Kind {
    /// `all_reduce`, ... (the JSON `collective` field and `bench-collective`'s argument).
    pub name: &'static str,
    /// nccl-tests' `getBw`: busbw = algbw * factor(ranks), so that busbw is comparable
    /// with the link speed whatever the algorithm (a ring AllReduce moves 2(n-1)/n of the
    /// buffer over each link).
    pub bus_factor: fn(ranks: usize) -> f64,
    /// Takes a reduction operator (`-o/--op`); data-movement collectives record `none`.
    pub reduces: bool,
    /// Has a root (`-r/--root`); the others record root -1.
    pub rooted: bool,
}

/// (n-1)/n: each rank receives (or sends) all but its own share once.
fn all_but_own_share(n: usize) -> f64 {
    (n as f64 - 1.0) / n as f64
}

pub const ALL_REDUCE: Kind = Kind {
    name: "all_reduce",
    bus_factor: |n| 2.0 * all_but_own_share(n),
    reduces: true,
    rooted: false,
};
pub const ALL_GATHER: Kind = Kind {
    name: "all_gather",
    bus_factor: all_but_own_share,
    reduces: false,
    rooted: false,
};
pub const REDUCE_SCATTER: Kind = Kind {
    name: "reduce_scatter",
    bus_factor: all_but_own_share,
    reduces: true,
    rooted: false,
};
pub const ALLTOALL: Kind = Kind {
    name: "alltoall",
    bus_factor: all_but_own_share,
    reduces: false,
    rooted: false,
};
pub const BROADCAST: Kind = Kind {
    name: "broadcast",
    bus_factor: |_| 1.0,
    reduces: false,
    rooted: true,
};
pub const REDUCE: Kind = Kind {
    name: "reduce",
    bus_factor: |_| 1.0,
    reduces: true,
    rooted: true,
};

/// Every rank sends to the next and receives from the previous: the whole buffer
/// crosses a link once (busbw = algbw).
pub const SENDRECV: Kind = Kind {
    name: "sendrecv",
    bus_factor: |_| 1.0,
    reduces: false,
    rooted: false,
};
pub const SCATTER: Kind = Kind {
    name: "scatter",
    bus_factor: all_but_own_share,
    reduces: false,
    rooted: true,
};
pub const GATHER: Kind = Kind {
    name: "gather",
    bus_factor: all_but_own_share,
    reduces: false,
    rooted: true,
};
/// An AllGather by recursive doubling; its algbw already counts only the n-1 blocks a
/// rank receives, so busbw = algbw.
pub const HYPERCUBE: Kind = Kind {
    name: "hypercube",
    bus_factor: |_| 1.0,
    reduces: false,
    rooted: false,
};

/// Every collective, in the order `bench-collective all` runs them (nccl-tests' set).
pub const ALL: &[&Kind] = &[
    &ALL_REDUCE,
    &ALL_GATHER,
    &REDUCE_SCATTER,
    &ALLTOALL,
    &BROADCAST,
    &REDUCE,
    &SENDRECV,
    &SCATTER,
    &GATHER,
    &HYPERCUBE,
];

/// Looks a collective up by its JSON name.
pub fn by_name(name: &str) -> Option<&'static Kind> {
    ALL.iter().copied().find(|k| k.name == name)
}

/// `bench-collective`'s expert-parallel collectives (not nccl-tests': their rows carry
/// an [`EpFigures`] block, and their sizes are tokens per rank). Dispatch sends each token
/// to the ranks holding its top-k experts; combine returns the weighted expert outputs.
pub const EP_DISPATCH: &str = "ep_dispatch";
pub const EP_COMBINE: &str = "ep_combine";

/// The byte formulas behind [`EpFigures`], stamped in every block so a reader knows which
/// definition a figure follows.
pub const EP_BYTE_FORMULA: &str = "fabcheck-ep-1";

/// What one `ep_dispatch` or `ep_combine` row measured, beside the row's timing (whose
/// `out_of_place` is the step; an EP step has one mode, so `in_place` repeats it).
///
/// Two byte counts, side by side:
/// - `network_bytes`: payload bytes that left their sender's node (one copy per token and
///   destination rank on another node): what crossed NICs, own node excluded;
/// - `deepep_bytes`: DeepEP's "RDMA" count, one copy per token and distinct destination
///   node *including the sender's own node* (its benchmarks count that copy too, though
///   it never reaches a NIC), so figures compare with published DeepEP/UCCL-EP numbers.
///
/// Both are summed over all ranks; the `_gbyte_s` rates are per rank (the sum / ranks /
/// the slowest rank's median step), as DeepEP prints them per rank.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpFigures {
    /// [`EP_BYTE_FORMULA`].
    pub byte_formula: String,
    /// `flat` (one Alltoallv), `two_stage` (inside the node, then across nodes on the same
    /// local rank), or `nccl` (grouped send/recv).
    pub variant: String,
    /// `uniform`, `node:G`, `zipf:S` or `hot:R`, as given.
    pub routing: String,
    pub seed: u64,
    pub tokens_per_rank: u64,
    pub hidden: u64,
    pub topk: u32,
    pub experts: u32,
    pub ranks_per_node: u32,
    /// `fp8` (hidden bytes plus hidden/128 scales of 4 bytes per copy) or `bf16`
    /// (2 bytes per element).
    pub payload: String,
    pub bytes_per_copy: u64,
    /// (token, destination rank) copies sent by all ranks, own rank included.
    pub copies: u64,
    pub network_bytes: u64,
    pub deepep_bytes: u64,
    /// The slowest rank's step time per iteration: median, 99th percentile, maximum.
    pub step_p50_us: f64,
    pub step_p99_us: f64,
    pub step_max_us: f64,
    /// The count exchange (each rank tells every other how many copies it sends),
    /// timed apart from the step, slowest rank, median and maximum.
    pub notify_p50_us: f64,
    pub notify_max_us: f64,
    pub network_gbyte_s: f64,
    pub deepep_gbyte_s: f64,
    /// Copies received by the busiest rank and by the mean rank; imbalance = max / mean.
    pub received_max_copies: u64,
    pub received_mean_copies: f64,
    pub imbalance: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nccl-tests' published factors (doc/PERFORMANCE.md).
    #[test]
    fn bus_factors_match_nccl_tests() {
        let f = |name: &str, n: usize| (by_name(name).unwrap().bus_factor)(n);
        assert_eq!(f("all_reduce", 4), 1.5);
        assert_eq!(f("all_reduce", 2), 1.0);
        assert_eq!(f("all_gather", 4), 0.75);
        assert_eq!(f("reduce_scatter", 4), 0.75);
        assert_eq!(f("alltoall", 8), 0.875);
        assert_eq!(f("broadcast", 4), 1.0);
        assert_eq!(f("reduce", 4), 1.0);
        assert_eq!(f("sendrecv", 4), 1.0);
        assert_eq!(f("scatter", 4), 0.75);
        assert_eq!(f("gather", 4), 0.75);
        assert_eq!(f("hypercube", 4), 1.0);
        assert!(by_name("allreduce").is_none());
        let names: Vec<_> = ALL.iter().map(|k| k.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(names.len(), unique.len(), "{names:?}");
    }
}
