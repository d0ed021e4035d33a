//! Reduce: the element-wise reduction of all ranks' buffers lands on the root only.
//! busbw = algbw, as for Broadcast (the same chain, run backwards).

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;
use results::collective as kind;

pub const REDUCE: Collective = Collective {
    name: kind::REDUCE.name,
    primitive: Primitive::Reduce,
    reduces: kind::REDUCE.reduces,
    rooted: kind::REDUCE.rooted,
    counts: |count, _| Counts {
        send: count,
        recv: count,
        param: count,
    },
    bus_factor: kind::REDUCE.bus_factor,
    in_place: |_, _| (0, 0),
    // Only the root's output is defined.
    expected: |ctx: &Ctx, rank, j| (rank == ctx.root).then(|| ctx.reduce(|r| ctx.input(r, j))),
};
