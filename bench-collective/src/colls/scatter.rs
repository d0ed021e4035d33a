//! Scatter: the root's buffer of n blocks, block r to rank r. The size is the root's whole
//! buffer; (n-1)/n of it leaves the root.

use super::{shape, Collective, Ctx};
use fabric::collective::Primitive;

pub const SCATTER: Collective = Collective {
    name: "scatter",
    primitive: Primitive::Scatter,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: shape::all_but_own,
    expected: |ctx: &Ctx, rank, j| Some(ctx.input(ctx.root, rank * ctx.counts.param + j)),
};
