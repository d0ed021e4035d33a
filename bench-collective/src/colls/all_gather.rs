//! AllGather: rank r's block lands at block r of every rank's output. The size is the
//! whole output (n blocks), and each link carries (n-1)/n of it.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;
use results::collective as kind;

pub const ALL_GATHER: Collective = Collective {
    name: kind::ALL_GATHER.name,
    primitive: Primitive::AllGather,
    reduces: kind::ALL_GATHER.reduces,
    rooted: kind::ALL_GATHER.rooted,
    counts: |count, n| Counts {
        send: count / n,
        recv: (count / n) * n,
        param: count / n,
    },
    bus_factor: kind::ALL_GATHER.bus_factor,
    // In place the input already sits at this rank's block of the output.
    in_place: |rank, param| (rank * param, 0),
    expected: |ctx: &Ctx, _, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, j % p))
    },
};
