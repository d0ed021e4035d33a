//! EP dispatch: each token's hidden vector, in FP8 (hidden bytes plus hidden/128 float32
//! scales), to every rank holding one of its top-k experts, one copy per destination
//! rank (DeepEP's high-throughput deduplication). Run by `ep_run`, not the nccl-tests
//! harness: its counts come from the router.

use crate::ep::{EpCollective, Payload};

pub const EP_DISPATCH: EpCollective = EpCollective {
    name: results::collective::EP_DISPATCH,
    payload: Payload::Fp8,
    backwards: false,
};
