//! The router: which experts each token of each rank selects, reproducible from the seed
//! alone, so that every rank can recompute any other rank's routing (the check does) and
//! an independent implementation of this specification (the integration test has one)
//! gives the same selections. The specification, in full (docs/load.md repeats it):
//!
//! - Random numbers: SplitMix64, one stream per rank, initial state
//!   `seed ^ (rank * 0xD1B54A32D192ED03)` (wrapping); `next()` adds 0x9E3779B97F4A7C15 to
//!   the state and mixes it (Steele, Lea, Flood 2014); a uniform number in [0, 1) is
//!   `(next() >> 11) * 2^-53`.
//! - Experts `0 .. E` live on ranks in blocks: expert e on rank `e / (E / R)`; rank r on
//!   node `r / ranks_per_node`.
//! - Expert weights: 1 for every expert (`uniform`, `node:G`); `1 / (e + 1)^S` (`zipf:S`:
//!   expert 0 the most popular, so the low ranks are hot); `R` for the experts of rank 0
//!   and 1 for the others (`hot:R`: rank 0 receives about R times a cold rank's copies).
//! - For each token, in order: with `node:G` and G below the node count, first G distinct
//!   nodes (draw `next() % nodes`, skip a node already drawn); the token may then select
//!   only experts on those nodes. Then top-k distinct experts: draw u, walk the allowed
//!   experts in ascending order summing weights, take the first whose running sum exceeds
//!   `u * total` (the last allowed one if rounding leaves none), skip an expert already
//!   selected, until k are selected.
//! - Selection j (in the order drawn) has gate weight 1 when j is even, 1/2 when odd
//!   (exact in BF16, so the combine check compares exactly).

use anyhow::{ensure, Result};
use base::splitmix::SplitMix64;

use super::Routing;

/// The stream rank `rank`'s routing draws from.
fn stream_of(seed: u64, rank: usize) -> SplitMix64 {
    SplitMix64::new(seed ^ (rank as u64).wrapping_mul(0xD1B5_4A32_D192_ED03))
}

/// Where experts and ranks sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub ranks: usize,
    pub ranks_per_node: usize,
    pub experts: usize,
    pub topk: usize,
}

impl Geometry {
    /// Checks that the experts divide among the ranks and the ranks among the nodes.
    pub fn new(ranks: usize, ranks_per_node: usize, experts: usize, topk: usize) -> Result<Self> {
        ensure!(
            ranks_per_node > 0 && ranks.is_multiple_of(ranks_per_node),
            "{ranks} ranks do not split into nodes of {ranks_per_node} (--ranks-per-node)"
        );
        ensure!(
            experts >= ranks && experts.is_multiple_of(ranks),
            "--experts {experts} does not divide among {ranks} ranks: use a multiple of {ranks}"
        );
        ensure!(
            topk >= 1 && topk <= experts,
            "--topk {topk} must be between 1 and --experts {experts}"
        );
        Ok(Self {
            ranks,
            ranks_per_node,
            experts,
            topk,
        })
    }

    pub fn nodes(&self) -> usize {
        self.ranks / self.ranks_per_node
    }

    pub fn rank_of(&self, expert: usize) -> usize {
        expert / (self.experts / self.ranks)
    }

    pub fn node_of_rank(&self, rank: usize) -> usize {
        rank / self.ranks_per_node
    }
}

/// One rank's routing: `experts[t * topk + j]` is token t's j-th selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankRouting {
    pub tokens: usize,
    pub topk: usize,
    pub experts: Vec<u32>,
}

/// The gate weight of selection `j`.
pub fn gate_weight(j: usize) -> f32 {
    if j.is_multiple_of(2) {
        1.0
    } else {
        0.5
    }
}

impl RankRouting {
    pub fn selections(&self, token: usize) -> &[u32] {
        &self.experts[token * self.topk..(token + 1) * self.topk]
    }
}

fn weights(routing: Routing, g: &Geometry) -> Vec<f64> {
    (0..g.experts)
        .map(|e| match routing {
            Routing::Uniform | Routing::Nodes(_) => 1.0,
            Routing::Zipf(s) => 1.0 / ((e + 1) as f64).powf(s),
            Routing::Hot(r) => {
                if g.rank_of(e) == 0 {
                    r
                } else {
                    1.0
                }
            }
        })
        .collect()
}

/// Refuses a routing no token can satisfy (fewer allowed experts than top-k).
pub fn check(routing: Routing, g: &Geometry) -> Result<()> {
    if let Routing::Nodes(n) = routing {
        let n = n as usize;
        let per_node = g.experts / g.nodes();
        ensure!(
            n >= 1,
            "--routing node:G needs G of at least 1 node per token"
        );
        ensure!(
            n.min(g.nodes()) * per_node >= g.topk,
            "--routing node:{n}: {} node(s) hold {} experts, fewer than --topk {}",
            n.min(g.nodes()),
            n.min(g.nodes()) * per_node,
            g.topk
        );
    }
    Ok(())
}

/// Rank `rank`'s routing of `tokens` tokens.
pub fn route(routing: Routing, seed: u64, g: &Geometry, rank: usize, tokens: usize) -> RankRouting {
    let w = weights(routing, g);
    let mut rng = stream_of(seed, rank);
    let nodes = g.nodes();
    let per_node = g.experts / nodes;
    let limit = match routing {
        Routing::Nodes(n) if (n as usize) < nodes => Some(n as usize),
        _ => None,
    };
    let mut out = Vec::with_capacity(tokens * g.topk);
    let mut allowed: Vec<usize> = (0..g.experts).collect();
    let mut chosen_nodes = Vec::new();
    for _ in 0..tokens {
        if let Some(n) = limit {
            chosen_nodes.clear();
            while chosen_nodes.len() < n {
                let node = (rng.next_u64() % nodes as u64) as usize;
                if !chosen_nodes.contains(&node) {
                    chosen_nodes.push(node);
                }
            }
            allowed.clear();
            allowed.extend((0..g.experts).filter(|e| chosen_nodes.contains(&(e / per_node))));
        }
        let total: f64 = allowed.iter().map(|&e| w[e]).sum();
        let start = out.len();
        while out.len() - start < g.topk {
            let x = rng.uniform() * total;
            let mut sum = 0.0;
            let mut pick = *allowed.last().expect("at least top-k allowed experts");
            for &e in &allowed {
                sum += w[e];
                if sum > x {
                    pick = e;
                    break;
                }
            }
            if !out[start..].contains(&(pick as u32)) {
                out.push(pick as u32);
            }
        }
    }
    RankRouting {
        tokens,
        topk: g.topk,
        experts: out,
    }
}

/// For one sender: the tokens bound for each destination rank (one copy per token and
/// destination rank, however many of its experts that rank holds), tokens ascending.
pub fn copies(r: &RankRouting, g: &Geometry) -> Vec<Vec<u32>> {
    let mut to: Vec<Vec<u32>> = vec![Vec::new(); g.ranks];
    let mut seen = Vec::with_capacity(r.topk);
    for t in 0..r.tokens {
        seen.clear();
        for &e in r.selections(t) {
            let p = g.rank_of(e as usize);
            if !seen.contains(&p) {
                seen.push(p);
                to[p].push(t as u32);
            }
        }
    }
    to
}

/// Distinct destination nodes of each token, summed over the tokens (DeepEP's count of
/// RDMA copies, the sender's own node included).
pub fn node_copies(r: &RankRouting, g: &Geometry) -> u64 {
    let mut n = 0u64;
    let mut seen = Vec::with_capacity(r.topk);
    for t in 0..r.tokens {
        seen.clear();
        for &e in r.selections(t) {
            let node = g.node_of_rank(g.rank_of(e as usize));
            if !seen.contains(&node) {
                seen.push(node);
            }
        }
        n += seen.len() as u64;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry::new(8, 4, 64, 8).unwrap()
    }

    #[test]
    fn selections_are_distinct_and_reproducible() {
        for routing in [
            Routing::Uniform,
            Routing::Nodes(1),
            Routing::Zipf(1.2),
            Routing::Hot(4.0),
        ] {
            let a = route(routing, 7, &geo(), 3, 100);
            assert_eq!(a, route(routing, 7, &geo(), 3, 100));
            assert_ne!(a, route(routing, 8, &geo(), 3, 100), "{routing:?}");
            for t in 0..100 {
                let mut s = a.selections(t).to_vec();
                s.sort();
                s.dedup();
                assert_eq!(s.len(), 8);
            }
        }
    }

    #[test]
    fn node_limit_and_skew_show() {
        let g = geo();
        let r = route(Routing::Nodes(1), 1, &g, 0, 200);
        for t in 0..200 {
            let nodes: Vec<_> = r
                .selections(t)
                .iter()
                .map(|&e| g.node_of_rank(g.rank_of(e as usize)))
                .collect();
            assert!(nodes.iter().all(|&n| n == nodes[0]), "{nodes:?}");
        }
        assert_eq!(node_copies(&r, &g), 200);
        let received = |routing| {
            let r = route(routing, 1, &g, 0, 2000);
            copies(&r, &g).iter().map(Vec::len).collect::<Vec<_>>()
        };
        let hot = received(Routing::Hot(4.0));
        assert!(hot[0] > hot[1] * 5 / 4, "{hot:?}");
        let uni = received(Routing::Uniform);
        assert!(
            uni[0] < uni[1] * 5 / 4 && uni[1] < uni[0] * 5 / 4,
            "{uni:?}"
        );
        assert!(check(Routing::Nodes(1), &Geometry::new(8, 4, 8, 8).unwrap()).is_err());
    }
}
