//! Broadcast: the root's buffer is copied to every rank. busbw = algbw: a pipelined
//! chain sends the whole buffer over each link once.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const BROADCAST: Collective = Collective {
    name: kind::BROADCAST.name,
    primitive: Primitive::Broadcast,
    reduces: kind::BROADCAST.reduces,
    rooted: kind::BROADCAST.rooted,
    param: shape::whole,
    alg_blocks: shape::one,
    bus_factor: kind::BROADCAST.bus_factor,
    expected: |ctx: &Ctx, _, j| Some(ctx.input(ctx.root, j)),
};
