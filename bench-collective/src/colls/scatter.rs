//! Scatter: the root's buffer of n blocks, block r to rank r. The size is the root's whole
//! buffer; (n-1)/n of it leaves the root.

use super::{shape, Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

pub const SCATTER: Collective = Collective {
    name: kind::SCATTER.name,
    primitive: Primitive::Scatter,
    reduces: kind::SCATTER.reduces,
    rooted: kind::SCATTER.rooted,
    param: shape::per_rank,
    alg_blocks: shape::all,
    bus_factor: kind::SCATTER.bus_factor,
    expected: |ctx: &Ctx, rank, j| Some(ctx.input(ctx.root, rank * ctx.counts.param + j)),
};
