//! Expert-parallel dispatch and combine (DeepEP's and UCCL-EP's benchmarks, over MPI):
//! dispatch sends each token's hidden vector to the ranks holding its top-k experts
//! (FP8: hidden bytes plus hidden/128 scales of 4 bytes per copy), combine returns each
//! expert rank's weighted outputs (BF16) and the owner sums them. Both are irregular
//! all-to-alls whose counts come from the router (`route`); the count exchange that
//! precedes them is timed apart. Sizes are tokens per rank.

use anyhow::{bail, Result};

pub mod memory;
pub mod route;

/// `--routing`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Routing {
    Uniform,
    /// At most G nodes per token (DeepEP's high-throughput routing: 4).
    Nodes(u32),
    /// Zipf-skewed expert popularity, exponent S.
    Zipf(f64),
    /// Rank 0's experts weigh R times the others.
    Hot(f64),
}

impl Routing {
    pub fn parse(s: &str) -> Result<Self, String> {
        let num = |v: &str, what: &str| -> Result<f64, String> {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("--routing {what}: '{v}' is not a number"))?;
            if !(x > 0.0 && x.is_finite()) {
                return Err(format!("--routing {what}: must be a positive number"));
            }
            Ok(x)
        };
        match s.split_once(':') {
            None if s == "uniform" => Ok(Routing::Uniform),
            Some(("node", g)) => g
                .parse::<u32>()
                .ok()
                .filter(|&g| g > 0)
                .map(Routing::Nodes)
                .ok_or_else(|| {
                    format!("--routing node:G: '{g}' is not a node count of at least 1")
                }),
            Some(("zipf", v)) => Ok(Routing::Zipf(num(v, "zipf:S")?)),
            Some(("hot", v)) => Ok(Routing::Hot(num(v, "hot:R")?)),
            _ => Err(format!(
                "unknown routing '{s}': choose uniform, node:G (at most G nodes per token), zipf:S \
                 (Zipf-skewed experts) or hot:R (rank 0 gets R times the traffic)"
            )),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Routing::Uniform => "uniform".into(),
            Routing::Nodes(g) => format!("node:{g}"),
            Routing::Zipf(s) => format!("zipf:{s}"),
            Routing::Hot(r) => format!("hot:{r}"),
        }
    }
}

/// `--ep-variant`: how the MPI backend moves the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// One `MPI_Alltoallv` over all ranks.
    Flat,
    /// Rail-aligned: inside the node first (to the local rank of the destination), then
    /// across nodes between ranks of the same local index (one NIC talks to its rail).
    TwoStage,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Flat => "flat",
            Variant::TwoStage => "two_stage",
        }
    }
}

/// The payload of one copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// One byte per element plus one float32 scale per 128 elements (DeepEP's FP8).
    Fp8,
    /// Two bytes per element.
    Bf16,
}

impl Payload {
    pub fn name(self) -> &'static str {
        match self {
            Payload::Fp8 => "fp8",
            Payload::Bf16 => "bf16",
        }
    }

    /// Bytes of one copy of a token of `hidden` elements.
    pub fn bytes_per_copy(self, hidden: usize) -> usize {
        match self {
            Payload::Fp8 => hidden + hidden.div_ceil(128) * 4,
            Payload::Bf16 => 2 * hidden,
        }
    }
}

/// One expert-parallel collective (its row lives in `colls/`).
pub struct EpCollective {
    pub name: &'static str,
    pub payload: Payload,
    /// Combine runs the dispatch's exchange backwards (counts swapped).
    pub backwards: bool,
}

/// What the EP options say, validated.
#[derive(Debug, Clone)]
pub struct EpPlan {
    pub collectives: Vec<&'static EpCollective>,
    /// Tokens per rank, one entry per size.
    pub tokens: Vec<u64>,
    pub routing: Routing,
    pub seed: u64,
    pub topk: u32,
    pub experts: u32,
    pub hidden: u64,
    /// Ranks per node; `None`: the team's ranks / its hosts (ranks of a node consecutive).
    pub ranks_per_node: Option<u32>,
    pub variant: Variant,
}

impl std::fmt::Debug for EpCollective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Sizes given in bytes become tokens of the dispatch payload (at least one).
pub fn tokens_of_bytes(bytes: u64, hidden: u64) -> u64 {
    (bytes / Payload::Fp8.bytes_per_copy(hidden as usize) as u64).max(1)
}

pub fn check_hidden(hidden: u64) -> Result<()> {
    if hidden == 0 || !hidden.is_multiple_of(128) {
        bail!("--hidden {hidden}: must be a positive multiple of 128 (one FP8 scale per 128 elements)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routings_parse_and_bytes_follow_deepep() {
        assert_eq!(Routing::parse("uniform"), Ok(Routing::Uniform));
        assert_eq!(Routing::parse("node:4"), Ok(Routing::Nodes(4)));
        assert_eq!(Routing::parse("zipf:1.2"), Ok(Routing::Zipf(1.2)));
        assert_eq!(Routing::parse("hot:3"), Ok(Routing::Hot(3.0)));
        for bad in ["node:0", "zipf:-1", "hot:x", "skewed"] {
            assert!(Routing::parse(bad).is_err(), "{bad}");
        }
        // DeepEP: FP8 copy of hidden 7168 = 7168 + 56 * 4 = 7392 B; BF16 = 14336 B.
        assert_eq!(Payload::Fp8.bytes_per_copy(7168), 7392);
        assert_eq!(Payload::Bf16.bytes_per_copy(7168), 14336);
        assert_eq!(tokens_of_bytes(7392 * 10, 7168), 10);
        assert!(check_hidden(100).is_err());
    }
}
