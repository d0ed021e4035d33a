//! AllGather: rank r's block lands at block r of every rank's output. The size is the
//! whole output (n blocks), and each link carries (n-1)/n of it.

use super::{shape, Collective, Ctx};
use fabric::collective::Primitive;

pub const ALL_GATHER: Collective = Collective {
    name: "all_gather",
    primitive: Primitive::AllGather,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: shape::all_but_own,
    expected: |ctx: &Ctx, _, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, j % p))
    },
};
