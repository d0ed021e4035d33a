//! AlltoAll: block p of rank r's input lands at block r of rank p's output (the exchange
//! of expert-parallel training). The size is the whole buffer; (n-1)/n of it crosses links.

use super::{Collective, Counts, Ctx};
use fabric::collective::Primitive;
use results::collective as kind;

pub const ALLTOALL: Collective = Collective {
    name: kind::ALLTOALL.name,
    primitive: Primitive::AllToAll,
    reduces: kind::ALLTOALL.reduces,
    rooted: kind::ALLTOALL.rooted,
    counts: |count, n| Counts {
        send: (count / n) * n,
        recv: (count / n) * n,
        param: count / n,
    },
    bus_factor: kind::ALLTOALL.bus_factor,
    in_place: |_, _| (0, 0),
    expected: |ctx: &Ctx, rank, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, rank * p + j % p))
    },
};
