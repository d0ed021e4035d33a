//! Reduce: the element-wise reduction of all ranks' buffers lands on the root only.
//! busbw = algbw, as for Broadcast (the same chain, run backwards).

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;

pub const REDUCE: Collective = Collective {
    name: "reduce",
    primitive: Primitive::Reduce,
    reduces: true,
    rooted: true,
    counts: |count, _| Counts {
        send: count,
        recv: count,
        param: count,
    },
    bus_factor: |_| 1.0,
    in_place: |_, _| (0, 0),
    // Only the root's output is defined.
    expected: |ctx: &Ctx, rank, j| (rank == ctx.root).then(|| ctx.reduce(|r| ctx.input(r, j))),
};
