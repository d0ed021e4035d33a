//! ReduceScatter: the reduction of all ranks' n-block buffers, block r delivered to rank r.
//! The size is the whole input; each link carries (n-1)/n of it.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const REDUCE_SCATTER: Collective = Collective {
    name: kind::REDUCE_SCATTER.name,
    primitive: Primitive::ReduceScatter,
    reduces: kind::REDUCE_SCATTER.reduces,
    rooted: kind::REDUCE_SCATTER.rooted,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: kind::REDUCE_SCATTER.bus_factor,
    expected: |ctx: &Ctx, rank, j| {
        let i = rank * ctx.counts.param + j;
        Some(ctx.reduce(|r| ctx.input(r, i)))
    },
};
