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

/// Every collective, in the order `bench-collective all` runs them.
pub const ALL: &[&Kind] = &[
    &ALL_REDUCE,
    &ALL_GATHER,
    &REDUCE_SCATTER,
    &ALLTOALL,
    &BROADCAST,
    &REDUCE,
];

/// Looks a collective up by its JSON name.
pub fn by_name(name: &str) -> Option<&'static Kind> {
    ALL.iter().copied().find(|k| k.name == name)
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
        assert!(by_name("allreduce").is_none());
        let names: Vec<_> = ALL.iter().map(|k| k.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(names.len(), unique.len(), "{names:?}");
    }
}
