//! Gather: rank r's block lands at block r of the root's buffer (Scatter backwards). The
//! size is the root's whole buffer; (n-1)/n of it arrives over the fabric.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const GATHER: Collective = Collective {
    name: kind::GATHER.name,
    primitive: Primitive::Gather,
    reduces: kind::GATHER.reduces,
    rooted: kind::GATHER.rooted,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: kind::GATHER.bus_factor,
    // Only the root's output is defined.
    expected: |ctx: &Ctx, rank, j| {
        let p = ctx.counts.param;
        (rank == ctx.root).then(|| ctx.input(j / p, j % p))
    },
};
