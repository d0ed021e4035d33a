//! AllReduce: every rank ends with the element-wise reduction of all ranks' buffers.
//! A ring moves 2(n-1)/n of the buffer over each link (reduce-scatter, then all-gather).

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;
use results::collective as kind;

pub const ALL_REDUCE: Collective = Collective {
    name: kind::ALL_REDUCE.name,
    primitive: Primitive::AllReduce,
    reduces: kind::ALL_REDUCE.reduces,
    rooted: kind::ALL_REDUCE.rooted,
    counts: |count, _| Counts {
        send: count,
        recv: count,
        param: count,
    },
    bus_factor: kind::ALL_REDUCE.bus_factor,
    in_place: |_, _| (0, 0),
    expected: |ctx: &Ctx, _, j| Some(ctx.reduce(|r| ctx.input(r, j))),
};
