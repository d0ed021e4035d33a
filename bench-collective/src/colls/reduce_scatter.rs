//! ReduceScatter: the reduction of all ranks' n-block buffers, block r delivered to rank r.
//! The size is the whole input; each link carries (n-1)/n of it.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;

pub const REDUCE_SCATTER: Collective = Collective {
    name: "reduce_scatter",
    primitive: Primitive::ReduceScatter,
    reduces: true,
    rooted: false,
    counts: |count, n| Counts {
        send: (count / n) * n,
        recv: count / n,
        param: count / n,
    },
    bus_factor: |n| (n as f64 - 1.0) / n as f64,
    // NCCL in place: the result lands on this rank's own block of the input.
    in_place: |rank, param| (0, rank * param),
    expected: |ctx: &Ctx, rank, j| {
        let i = rank * ctx.counts.param + j;
        Some(ctx.reduce(|r| ctx.input(r, i)))
    },
};
