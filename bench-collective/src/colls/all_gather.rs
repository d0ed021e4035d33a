//! AllGather: rank r's block lands at block r of every rank's output. The size is the
//! whole output (n blocks), and each link carries (n-1)/n of it.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const ALL_GATHER: Collective = Collective {
    name: kind::ALL_GATHER.name,
    primitive: Primitive::AllGather,
    reduces: kind::ALL_GATHER.reduces,
    rooted: kind::ALL_GATHER.rooted,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: kind::ALL_GATHER.bus_factor,
    expected: |ctx: &Ctx, _, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, j % p))
    },
};
