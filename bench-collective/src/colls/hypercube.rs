//! HyperCube: an AllGather made of point-to-point exchanges by recursive doubling
//! (log2(n) steps, partner rank ^ 2^k, the blocks exchanged doubling each step), as
//! nccl-tests' hypercube test: it shows what the fabric gives a bandwidth-bound exchange
//! pattern other than the library's rings and trees. Power-of-two rank counts only.
//! algbw counts the n-1 blocks a rank receives; busbw = algbw.

use super::{Collective, Ctx};
use results::collective as kind;
use transport::collective::Primitive;

/// Blocks are whole multiples of this many elements (nccl-tests' alignment).
const ALIGN: usize = 4;

pub const HYPERCUBE: Collective = Collective {
    name: kind::HYPERCUBE.name,
    primitive: Primitive::HyperCube,
    reduces: kind::HYPERCUBE.reduces,
    rooted: kind::HYPERCUBE.rooted,
    param: |count, ranks, _| count / (ALIGN * ranks) * ALIGN,
    alg_blocks: |ranks| ranks - 1,
    bus_factor: kind::HYPERCUBE.bus_factor,
    expected: |ctx: &Ctx, _, j| {
        let p = ctx.counts.param;
        Some(ctx.input(j / p, j % p))
    },
};
