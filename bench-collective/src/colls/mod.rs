//! The collectives, one small file each, as nccl-tests keeps one `.cu` per collective.
//!
//! A row says everything that differs between collectives as a benchmark: which library
//! primitive runs it, how a size becomes the call's count (nccl-tests'
//! `getCollByteCount`), how many of those blocks algbw counts and the bus-bandwidth factor
//! (`getBw`), and what every output element must be after one call (for `--check`). What
//! the call reads and writes for a count, and where an in-place call finds its input, are
//! the library's and live with the primitive (`transport::collective`); each backend has one
//! arm per primitive. The harness does the rest.
//!
//! Adding a collective: a file here with its row, a line in [`ALL`] (and an alias in
//! `plan.rs` if users know it by another name), its name, bus factor and flags in
//! `results::collective` (shared with everything that reads results), and, for a new
//! library call, a
//! `transport::collective::Primitive` variant with its shape and one arm per backend
//! (`transport/src/collective/mpi.rs`, `transport/src/cuda/mod.rs`). docs/collective.md walks
//! through it.

use transport::collective::{Primitive, RedOp};

use crate::data;

mod all_gather;
mod all_reduce;
mod alltoall;
mod broadcast;
pub mod ep_combine;
pub mod ep_dispatch;
mod gather;
mod hypercube;
mod reduce;
mod reduce_scatter;
mod scatter;
mod sendrecv;

/// Every collective, in the order `all` runs them (nccl-tests' binaries' order).
pub const ALL: [&Collective; 10] = [
    &all_reduce::ALL_REDUCE,
    &all_gather::ALL_GATHER,
    &reduce_scatter::REDUCE_SCATTER,
    &alltoall::ALLTOALL,
    &broadcast::BROADCAST,
    &reduce::REDUCE,
    &sendrecv::SENDRECV,
    &scatter::SCATTER,
    &gather::GATHER,
    &hypercube::HYPERCUBE,
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
    /// The library call behind it: what it reads and writes, the ranks it runs on.
    pub primitive: Primitive,
    /// Takes `-o/--op`; data-movement collectives print `none`.
    pub reduces: bool,
    /// Takes `-r/--root`; others print -1.
    pub rooted: bool,
    /// nccl-tests `getCollByteCount`: the count passed to the call for `count` elements
    /// of `type_size` bytes of the size on `ranks` ranks.
    pub param: fn(count: usize, ranks: usize, type_size: usize) -> usize,
    /// nccl-tests `getBw`: algbw counts this many blocks of `param` elements per second
    /// (equal to the size column for every collective but hypercube, whose algbw counts
    /// the n-1 blocks a rank receives).
    pub alg_blocks: fn(ranks: usize) -> usize,
    /// nccl-tests `getBw` (`results::collective::Kind::bus_factor`).
    pub bus_factor: fn(ranks: usize) -> f64,
    /// Element `j` of `rank`'s output after one call; `None` where it is undefined (the
    /// receive buffer of a non-root rank after Reduce or Gather).
    pub expected: fn(ctx: &Ctx, rank: usize, j: usize) -> Option<f64>,
}

impl Collective {
    /// Counts of one size (`count` elements of `type_size` bytes): the call's count from
    /// the row, the buffers from the call's shape.
    pub fn counts(&self, count: usize, ranks: usize, type_size: usize) -> Counts {
        let param = (self.param)(count, ranks, type_size);
        let (send, recv) = self.primitive.elements(param, ranks);
        Counts { send, recv, param }
    }

    /// Bytes algbw counts for one call of `param` elements of `type_size` bytes.
    pub fn alg_bytes(&self, param: usize, type_size: usize, ranks: usize) -> u64 {
        (param * type_size * (self.alg_blocks)(ranks)) as u64
    }

    /// The root printed and recorded: the root for rooted collectives, -1 otherwise.
    pub fn root_of(&self, root: usize) -> i32 {
        if self.rooted {
            root as i32
        } else {
            -1
        }
    }
}

/// Rows that differ only in these helpers share them.
pub(crate) mod shape {
    /// The whole size per call (AllReduce, Broadcast, Reduce, SendRecv).
    pub fn whole(count: usize, _: usize, _: usize) -> usize {
        count
    }
    /// One block per rank (AllGather, ReduceScatter, AlltoAll, Scatter, Gather), rounded
    /// down to whole 16 bytes as nccl-tests rounds it (`(count/nranks) & -(16/eltSize)`):
    /// the same sizes as nccl-tests' rows at any rank count, and blocks aligned for
    /// NCCL's vectorised paths.
    pub fn per_rank(count: usize, ranks: usize, type_size: usize) -> usize {
        let align = (16 / type_size.clamp(1, 16)).max(1);
        count / ranks / align * align
    }
    pub fn one(_: usize) -> usize {
        1
    }
    pub fn all(ranks: usize) -> usize {
        ranks
    }
}

/// The expert-parallel collectives (their own shape: tokens routed to experts, see
/// `crate::ep`), in the order they run.
pub const EP_ALL: [&crate::ep::EpCollective; 2] =
    [&ep_dispatch::EP_DISPATCH, &ep_combine::EP_COMBINE];

/// The EP collective named `name`.
pub fn ep_by_name(name: &str) -> Option<&'static crate::ep::EpCollective> {
    EP_ALL.iter().copied().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(name: &str, count: usize, n: usize) -> (usize, usize, usize) {
        let c = by_name(name).unwrap().counts(count, n, 4);
        (c.send, c.recv, c.param)
    }

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
        assert_eq!(f("sendrecv", 4), 1.0);
        assert_eq!(f("scatter", 4), 0.75);
        assert_eq!(f("gather", 4), 0.75);
        assert_eq!(f("hypercube", 4), 1.0);
        // Per-rank blocks are whole 16 bytes (4 float32 elements), as nccl-tests'.
        assert_eq!(counts("all_reduce", 100, 3), (100, 100, 100));
        assert_eq!(counts("all_gather", 100, 3), (32, 96, 32));
        assert_eq!(counts("reduce_scatter", 100, 3), (96, 32, 32));
        assert_eq!(counts("alltoall", 100, 3), (96, 96, 32));
        assert_eq!(counts("broadcast", 100, 3), (100, 100, 100));
        assert_eq!(counts("sendrecv", 100, 3), (100, 100, 100));
        assert_eq!(counts("scatter", 100, 3), (96, 32, 32));
        assert_eq!(counts("gather", 100, 3), (32, 96, 32));
        // Hypercube rounds each rank's block down to a multiple of 4 elements.
        assert_eq!(counts("hypercube", 100, 4), (24, 96, 24));
        assert_eq!(counts("hypercube", 10, 4), (0, 0, 0));
        // algbw counts the size column, except hypercube: (n-1) blocks.
        for c in ALL {
            let k = c.counts(1000, 4, 4);
            let size = (k.send.max(k.recv) * 4) as u64;
            let alg = c.alg_bytes(k.param, 4, 4);
            if c.name == "hypercube" {
                assert_eq!(alg, size * 3 / 4);
            } else {
                assert_eq!(alg, size, "{}", c.name);
            }
        }
    }

    /// The shared definition and the library call agree: a collective takes an operator
    /// exactly when its call does; every collective of the results schema has a row.
    #[test]
    fn rows_follow_the_shared_definition() {
        for c in ALL {
            assert_eq!(c.reduces, c.primitive.reduces(), "{}", c.name);
            let k = results::collective::by_name(c.name).expect("in results::collective");
            assert_eq!((k.rooted, (k.bus_factor)(5)), (c.rooted, (c.bus_factor)(5)));
        }
        assert_eq!(ALL.len(), results::collective::ALL.len());
    }

    /// nccl-tests' rounding per element size: 16 bytes per block, for every type width.
    #[test]
    fn per_rank_blocks_are_whole_16_bytes() {
        let ag = by_name("all_gather").unwrap();
        // 1 MiB on 6 ranks: nccl-tests' all_gather rows.
        for ts in [1usize, 2, 4, 8] {
            let count = (1 << 20) / ts;
            let p = ag.counts(count, 6, ts).param;
            assert_eq!(p * ts % 16, 0, "type size {ts}");
            assert!(
                count / 6 - p < 16 / ts,
                "rounded down by less than one 16-byte unit"
            );
        }
        assert_eq!(ag.counts(174762, 6, 1).param, 29120);
        // Fewer than 16 bytes per rank: no block (the harness skips the size).
        assert_eq!(ag.counts(15, 1, 1).param, 0);
    }

    /// Brute force: simulate every collective on a few ranks and check that `expected`
    /// agrees with the definition written out independently here.
    #[test]
    fn expected_outputs_follow_the_definitions() {
        let n = 4;
        for coll in ALL {
            let counts = coll.counts(48, n, 4);
            let p = counts.param;
            let ctx = Ctx {
                ranks: n,
                root: 1,
                op: coll.reduces.then_some(RedOp::Sum),
                counts,
            };
            let sum = |i: usize| (0..n).map(|s| ctx.input(s, i)).sum::<f64>();
            for r in 0..n {
                for j in 0..counts.recv {
                    let got = (coll.expected)(&ctx, r, j);
                    let want = match coll.primitive {
                        Primitive::AllReduce => Some(sum(j)),
                        Primitive::Reduce => (r == 1).then(|| sum(j)),
                        Primitive::Broadcast => Some(ctx.input(1, j)),
                        Primitive::AllGather | Primitive::HyperCube => {
                            Some(ctx.input(j / p, j % p))
                        }
                        Primitive::ReduceScatter => Some(sum(r * p + j)),
                        Primitive::AllToAll => Some(ctx.input(j / p, r * p + j % p)),
                        Primitive::SendRecv => Some(ctx.input((r + n - 1) % n, j)),
                        Primitive::Scatter => Some(ctx.input(1, r * p + j)),
                        Primitive::Gather => (r == 1).then(|| ctx.input(j / p, j % p)),
                    };
                    assert_eq!(got, want, "{} rank {r} element {j}", coll.name);
                }
            }
        }
    }
}
