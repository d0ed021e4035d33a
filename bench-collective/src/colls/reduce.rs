//! Reduce: the element-wise reduction of all ranks' buffers lands on the root only.
//! busbw = algbw, as for Broadcast (the same chain, run backwards).

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const REDUCE: Collective = Collective {
    name: kind::REDUCE.name,
    primitive: Primitive::Reduce,
    reduces: kind::REDUCE.reduces,
    rooted: kind::REDUCE.rooted,
    param: shape::whole,
    alg_blocks: shape::one,
    bus_factor: kind::REDUCE.bus_factor,
    // Only the root's output is defined.
    expected: |ctx: &Ctx, rank, j| (rank == ctx.root).then(|| ctx.reduce(|r| ctx.input(r, j))),
};
