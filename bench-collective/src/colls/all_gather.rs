//! AllGather: rank r's block lands at block r of every rank's output. The size is the
//! whole output (n blocks), and each link carries (n-1)/n of it.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;

pub const ALL_GATHER: Collective = Collective {
    name: "all_gather",
    primitive: Primitive::AllGather,
    reduces: false,
    rooted: false,
    counts: |count, n| Counts {
        send: count / n,
        recv: (count / n) * n,
        param: count / n,
    },
    bus_factor: |n| (n as f64 - 1.0) / n as f64,
    // In place the input already sits at this rank's block of the output.
    in_place: |rank, param| (rank * param, 0),
    expected: |ctx: &Ctx, _, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, j % p))
    },
};
