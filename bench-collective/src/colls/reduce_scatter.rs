//! ReduceScatter: the reduction of all ranks' n-block buffers, block r delivered to rank r.
//! The size is the whole input; each link carries (n-1)/n of it.

use super::{shape, Collective, Ctx};
use fabric::collective::Primitive;

pub const REDUCE_SCATTER: Collective = Collective {
    name: "reduce_scatter",
    primitive: Primitive::ReduceScatter,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: shape::all_but_own,
    expected: |ctx: &Ctx, rank, j| {
        let i = rank * ctx.counts.param + j;
        Some(ctx.reduce(|r| ctx.input(r, i)))
    },
};
