//! AlltoAll: block p of rank r's input lands at block r of rank p's output (the exchange
//! of expert-parallel training). The size is the whole buffer; (n-1)/n of it crosses links.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const ALLTOALL: Collective = Collective {
    name: kind::ALLTOALL.name,
    primitive: Primitive::AllToAll,
    reduces: kind::ALLTOALL.reduces,
    rooted: kind::ALLTOALL.rooted,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: kind::ALLTOALL.bus_factor,
    expected: |ctx: &Ctx, rank, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, rank * p + j % p))
    },
};
