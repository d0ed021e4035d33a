//! Broadcast: the root's buffer is copied to every rank. busbw = algbw: a pipelined
//! chain sends the whole buffer over each link once.

use super::{shape, Collective, Ctx};
use fabric::collective::Primitive;

pub const BROADCAST: Collective = Collective {
    name: "broadcast",
    primitive: Primitive::Broadcast,
    param: shape::whole,
    alg_blocks: shape::one,
    bus_factor: shape::unit,
    expected: |ctx: &Ctx, _, j| Some(ctx.input(ctx.root, j)),
};
