//! Broadcast: the root's buffer is copied to every rank. busbw = algbw: a pipelined
//! chain sends the whole buffer over each link once.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;
use results::collective as kind;

pub const BROADCAST: Collective = Collective {
    name: kind::BROADCAST.name,
    primitive: Primitive::Broadcast,
    reduces: kind::BROADCAST.reduces,
    rooted: kind::BROADCAST.rooted,
    counts: |count, _| Counts {
        send: count,
        recv: count,
        param: count,
    },
    bus_factor: kind::BROADCAST.bus_factor,
    in_place: |_, _| (0, 0),
    expected: |ctx: &Ctx, _, j| Some(ctx.input(ctx.root, j)),
};
