//! SendRecv: every rank sends its buffer to rank + 1 and receives rank - 1's, all at once
//! (a ring shift): each link carries the whole buffer in each direction it is used, so
//! busbw = algbw = size / time, the point-to-point bandwidth under full load.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const SENDRECV: Collective = Collective {
    name: kind::SENDRECV.name,
    primitive: Primitive::SendRecv,
    reduces: kind::SENDRECV.reduces,
    rooted: kind::SENDRECV.rooted,
    param: shape::whole,
    alg_blocks: shape::one,
    bus_factor: kind::SENDRECV.bus_factor,
    expected: |ctx: &Ctx, rank, j| Some(ctx.input((rank + ctx.ranks - 1) % ctx.ranks, j)),
};
