//! Broadcast: the root's buffer is copied to every rank. busbw = algbw: a pipelined
//! chain sends the whole buffer over each link once.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;

pub const BROADCAST: Collective = Collective {
    name: "broadcast",
    primitive: Primitive::Broadcast,
    reduces: false,
    rooted: true,
    counts: |count, _| Counts {
        send: count,
        recv: count,
        param: count,
    },
    bus_factor: |_| 1.0,
    in_place: |_, _| (0, 0),
    expected: |ctx: &Ctx, _, j| Some(ctx.input(ctx.root, j)),
};
