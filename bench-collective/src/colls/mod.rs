//! The collectives, one small file each, as nccl-tests keeps one `.cu` per collective.
//!
//! An entry says everything that differs between collectives: how a size becomes element
//! counts (nccl-tests' `getCollByteCount`), the bus-bandwidth factor (`getBw`), where the
//! input and output sit when run in place, and what every output element must be after
//! one call (for `--check`). The harness does the rest. Adding a collective is a new file
//! here, a line in [`ALL`], its name and bus factor in `results::collective` (shared
//! with everything that reads results), and (if it is a new library call) one arm per
//! backend.

use fabric::collective::{Primitive, RedOp};

use crate::data;

mod all_gather;
mod all_reduce;
mod alltoall;
mod broadcast;
mod reduce;
mod reduce_scatter;

/// Every collective, in the order `all` runs them.
pub const ALL: [&Collective; 6] = [
    &all_reduce::ALL_REDUCE,
    &all_gather::ALL_GATHER,
    &reduce_scatter::REDUCE_SCATTER,
    &alltoall::ALLTOALL,
    &broadcast::BROADCAST,
    &reduce::REDUCE,
];

/// Looks a collective up by name (`all_reduce`, ...).
pub fn by_name(name: &str) -> Option<&'static Collective> {
    ALL.iter().copied().find(|c| c.name == name)
}

/// Element counts of one size, as nccl-tests derives them from `count = size / type size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Elements in each rank's send buffer.
    pub send: usize,
    /// Elements in each rank's receive buffer.
    pub recv: usize,
    /// The count passed to the library call (per rank or per peer where the call counts so).
    pub param: usize,
}

/// What the checker knows when it asks for an expected output element.
pub struct Ctx {
    pub ranks: usize,
    pub root: usize,
    /// The reduction, `None` for data-movement collectives.
    pub op: Option<RedOp>,
    pub counts: Counts,
}

impl Ctx {
    /// Element `i` of rank `rank`'s input (the same function the harness fills buffers with).
    pub fn input(&self, rank: usize, i: usize) -> f64 {
        data::input_value(self.op, rank, i)
    }

    /// The reduction over all ranks of `f(rank)`, exact (small integers; see `data`).
    pub fn reduce(&self, f: impl Fn(usize) -> f64) -> f64 {
        data::reduce(self.op.unwrap_or(RedOp::Sum), self.ranks, f)
    }
}

/// One collective.
pub struct Collective {
    /// `all_reduce`, ... (the positional argument, the JSON `collective`): from the
    /// shared definition in `results::collective`, like `reduces`, `rooted` and
    /// `bus_factor`.
    pub name: &'static str,
    /// The library call behind it.
    pub primitive: Primitive,
    /// Takes `-o/--op`; data-movement collectives print `none`.
    pub reduces: bool,
    /// Takes `-r/--root`; others print -1.
    pub rooted: bool,
    /// nccl-tests `getCollByteCount`: counts from `count` elements of the size and `ranks`.
    pub counts: fn(count: usize, ranks: usize) -> Counts,
    /// nccl-tests `getBw` (`results::collective::Kind::bus_factor`).
    pub bus_factor: fn(ranks: usize) -> f64,
    /// In place, NCCL semantics (nccl-tests' in-place offsets): element offsets of the
    /// input and of the output inside the one buffer of `rank`.
    pub in_place: fn(rank: usize, param: usize) -> (usize, usize),
    /// Element `j` of `rank`'s output after one call; `None` where it is undefined (the
    /// receive buffer of a non-root rank after Reduce).
    pub expected: fn(ctx: &Ctx, rank: usize, j: usize) -> Option<f64>,
}

impl Collective {
    /// The root printed and recorded: the root for rooted collectives, -1 otherwise.
    pub fn root_of(&self, root: usize) -> i32 {
        if self.rooted {
            root as i32
        } else {
            -1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nccl-tests' published factors and size conventions.
    #[test]
    fn bus_factors_and_counts_match_nccl_tests() {
        let f = |name: &str, n: usize| (by_name(name).unwrap().bus_factor)(n);
        assert_eq!(f("all_reduce", 4), 1.5);
        assert_eq!(f("all_gather", 4), 0.75);
        assert_eq!(f("reduce_scatter", 4), 0.75);
        assert_eq!(f("alltoall", 4), 0.75);
        assert_eq!(f("broadcast", 4), 1.0);
        assert_eq!(f("reduce", 4), 1.0);
        let c = |name: &str, count, n| (by_name(name).unwrap().counts)(count, n);
        assert_eq!(
            c("all_reduce", 10, 3),
            Counts {
                send: 10,
                recv: 10,
                param: 10
            }
        );
        assert_eq!(
            c("all_gather", 10, 3),
            Counts {
                send: 3,
                recv: 9,
                param: 3
            }
        );
        assert_eq!(
            c("reduce_scatter", 10, 3),
            Counts {
                send: 9,
                recv: 3,
                param: 3
            }
        );
        assert_eq!(
            c("alltoall", 10, 3),
            Counts {
                send: 9,
                recv: 9,
                param: 3
            }
        );
        assert_eq!(
            c("broadcast", 10, 3),
            Counts {
                send: 10,
                recv: 10,
                param: 10
            }
        );
    }

    /// Brute force: simulate every collective on a few ranks and check that `expected`
    /// agrees with the definition written out independently here.
    #[test]
    fn expected_outputs_follow_the_definitions() {
        let n = 3;
        for coll in ALL {
            let counts = (coll.counts)(12, n);
            let ctx = Ctx {
                ranks: n,
                root: 1,
                op: coll.reduces.then_some(RedOp::Sum),
                counts,
            };
            for r in 0..n {
                for j in 0..counts.recv {
                    let got = (coll.expected)(&ctx, r, j);
                    let want = match coll.primitive {
                        Primitive::AllReduce => Some((0..n).map(|s| ctx.input(s, j)).sum()),
                        Primitive::Reduce => {
                            (r == 1).then(|| (0..n).map(|s| ctx.input(s, j)).sum())
                        }
                        Primitive::Broadcast => Some(ctx.input(1, j)),
                        Primitive::AllGather => Some(ctx.input(j / counts.param, j % counts.param)),
                        Primitive::ReduceScatter => {
                            Some((0..n).map(|s| ctx.input(s, r * counts.param + j)).sum())
                        }
                        Primitive::AllToAll => {
                            Some(ctx.input(j / counts.param, r * counts.param + j % counts.param))
                        }
                    };
                    assert_eq!(got, want, "{} rank {r} element {j}", coll.name);
                }
            }
        }
    }
}
