//! EP combine: every expert rank returns, for each token it received, the gate-weighted
//! sum of its experts' outputs in BF16 (2 bytes per element), the dispatch's exchange
//! run backwards; the owner adds the copies up: out[t] = sum_j w[t,j] * y_j.

use crate::ep::{EpCollective, Payload};

pub const EP_COMBINE: EpCollective = EpCollective {
    name: results::collective::EP_COMBINE,
    payload: Payload::Bf16,
    backwards: true,
};
