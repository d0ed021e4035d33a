//! AllReduce: every rank ends with the element-wise reduction of all ranks' buffers.
//! A ring moves 2(n-1)/n of the buffer over each link (reduce-scatter, then all-gather).

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const ALL_REDUCE: Collective = Collective {
    name: kind::ALL_REDUCE.name,
    primitive: Primitive::AllReduce,
    reduces: kind::ALL_REDUCE.reduces,
    rooted: kind::ALL_REDUCE.rooted,
    param: shape::whole,
    alg_blocks: shape::one,
    bus_factor: kind::ALL_REDUCE.bus_factor,
    expected: |ctx: &Ctx, _, j| Some(ctx.reduce(|r| ctx.input(r, j))),
};
