//! AllReduce: every rank ends with the element-wise reduction of all ranks' buffers.
//! A ring moves 2(n-1)/n of the buffer over each link (reduce-scatter, then all-gather).

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;

pub const ALL_REDUCE: Collective = Collective {
    name: "all_reduce",
    primitive: Primitive::AllReduce,
    reduces: true,
    rooted: false,
    counts: |count, _| Counts {
        send: count,
        recv: count,
        param: count,
    },
    bus_factor: |n| 2.0 * (n as f64 - 1.0) / n as f64,
    in_place: |_, _| (0, 0),
    expected: |ctx: &Ctx, _, j| Some(ctx.reduce(|r| ctx.input(r, j))),
};
