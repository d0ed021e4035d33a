//! ReduceScatter: the reduction of all ranks' n-block buffers, block r delivered to rank r.
//! The size is the whole input; each link carries (n-1)/n of it.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;
use results::collective as kind;

pub const REDUCE_SCATTER: Collective = Collective {
    name: kind::REDUCE_SCATTER.name,
    primitive: Primitive::ReduceScatter,
    reduces: kind::REDUCE_SCATTER.reduces,
    rooted: kind::REDUCE_SCATTER.rooted,
    counts: |count, n| Counts {
        send: (count / n) * n,
        recv: count / n,
        param: count / n,
    },
    bus_factor: kind::REDUCE_SCATTER.bus_factor,
    // NCCL in place: the result lands on this rank's own block of the input.
    in_place: |rank, param| (0, rank * param),
    expected: |ctx: &Ctx, rank, j| {
        let i = rank * ctx.counts.param + j;
        Some(ctx.reduce(|r| ctx.input(r, i)))
    },
};
