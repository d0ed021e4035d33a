//! AllReduce: every rank ends with the element-wise reduction of all ranks' buffers.
//! A ring moves 2(n-1)/n of the buffer over each link (reduce-scatter, then all-gather).

use super::{shape, Collective, Ctx};
use fabric::collective::Primitive;

pub const ALL_REDUCE: Collective = Collective {
    name: "all_reduce",
    primitive: Primitive::AllReduce,
    param: shape::whole,
    alg_blocks: shape::one,
    bus_factor: |n| 2.0 * (n as f64 - 1.0) / n as f64,
    expected: |ctx: &Ctx, _, j| Some(ctx.reduce(|r| ctx.input(r, j))),
};
