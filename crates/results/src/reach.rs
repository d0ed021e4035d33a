//! An isolation sweep (`bench-lat --pattern isolation`): every rank tried to reach every
//! other on the data fabric, the way a tenant's job would, and wrote down what happened.
//! Judged against the tenants: inside a tenant every attempt must reach, across tenants
//! none may.

use serde::{Deserialize, Serialize};

/// One isolation sweep.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReachRun {
    /// How long one attempt waited for an answer, ms.
    pub timeout_ms: u64,
    /// The methods tried for every pair (`tcp`, `icmp`).
    pub methods: Vec<String>,
    /// `aligned` (rail r tries rail r of every other node) or `all` (every address).
    pub rail_mode: String,
    /// Every rank's data address.
    pub endpoints: Vec<ReachEndpoint>,
    /// Every attempt, one per ordered pair and method.
    pub attempts: Vec<ReachAttempt>,
    /// Where the tenants the sweep labelled its endpoints with came from (`--tenants`), if
    /// any; `aggregate` judges against its own `--tenants` or plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants_source: Option<String>,
}

/// One rank's address on the data fabric.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReachEndpoint {
    pub rank: u32,
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// The interface holding `address` (`rail0`, `ens1f0np0.101`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    pub address: String,
    /// The TCP port its listener answered on.
    pub port: u16,
    /// The tenant `--tenants` put its node in, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// What one attempt saw.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ReachOutcome {
    /// The peer answered (TCP: connected and the listener said who it is; ICMP: an echo
    /// reply from the address).
    Reached,
    /// A TCP connection was made but another rank's listener answered (overlapping
    /// addresses across tenants): the packet crossed into someone's network.
    ReachedOther,
    /// The peer's host refused the connection (TCP reset): the network delivered it.
    Refused,
    /// The network said there is no way (ICMP unreachable, no route).
    Unreachable,
    /// No answer within the timeout.
    TimedOut,
    /// The attempt could not be made (no permission for ICMP, local error): judged nothing.
    Error,
}

impl ReachOutcome {
    /// Whether the fabric carried the attempt to a host: what isolation must prevent.
    pub fn delivered(self) -> bool {
        matches!(
            self,
            ReachOutcome::Reached | ReachOutcome::ReachedOther | ReachOutcome::Refused
        )
    }

    /// Whether the attempt says anything about reach (an `Error` does not).
    pub fn judged(self) -> bool {
        self != ReachOutcome::Error
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReachOutcome::Reached => "reached",
            ReachOutcome::ReachedOther => "reached_other",
            ReachOutcome::Refused => "refused",
            ReachOutcome::Unreachable => "unreachable",
            ReachOutcome::TimedOut => "timed_out",
            ReachOutcome::Error => "error",
        }
    }
}

/// One attempt of one rank toward another.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReachAttempt {
    pub from: u32,
    pub to: u32,
    /// `tcp` or `icmp`.
    pub method: String,
    pub outcome: ReachOutcome,
    /// Time to the answer (or to giving up), ms.
    pub ms: f64,
    /// The error text, or the rank that answered in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Whether a pair of nodes is meant to reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// One tenant: every attempt must reach.
    Reach,
    /// Two tenants: no attempt may be delivered.
    Isolated,
    /// A node of no tenant: nothing is promised, nothing judged.
    Unknown,
}

/// One ordered pair whose attempts broke what its tenants promise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairFinding {
    pub from: ReachEndpoint,
    pub to: ReachEndpoint,
    /// The attempts at fault: `tcp reached`, `icmp timed_out (no echo reply)`.
    pub attempts: Vec<String>,
}

/// What the attempts between two tenants (or inside one) came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Block {
    /// Ordered rank pairs with at least one judged attempt.
    pub pairs: u64,
    /// Of those, pairs with any attempt delivered.
    pub delivered: u64,
    /// Of those, pairs with every attempt reaching its peer.
    pub reached: u64,
}

/// An isolation sweep judged against tenants.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Judged {
    /// Cross-tenant pairs with an attempt delivered: isolation breaches.
    pub breaches: Vec<PairFinding>,
    /// Same-tenant pairs with an attempt that did not reach its peer.
    pub unreached: Vec<PairFinding>,
    /// (from tenant, to tenant) -> what its pairs came to.
    pub blocks: std::collections::BTreeMap<(String, String), Block>,
    /// Ordered pairs whose attempts all judged nothing (errors).
    pub unjudged: u64,
    /// Nodes of the sweep that belong to no tenant (their pairs judged nothing).
    pub untenanted: std::collections::BTreeSet<String>,
}

/// Pairs judged inside tenants and across them, of a tenant-by-tenant picture: (inside,
/// across).
pub fn inside_and_across(
    blocks: &std::collections::BTreeMap<(String, String), Block>,
) -> (u64, u64) {
    blocks.iter().fold((0, 0), |(i, x), ((a, b), blk)| {
        if a == b {
            (i + blk.pairs, x)
        } else {
            (i, x + blk.pairs)
        }
    })
}

impl ReachRun {
    /// Judges every ordered pair's attempts: `tenant_of` names a node's tenant.
    pub fn judge<'a>(&self, tenant_of: impl Fn(&str) -> Option<&'a str>) -> Judged {
        let mut by_pair: std::collections::BTreeMap<(u32, u32), Vec<&ReachAttempt>> =
            std::collections::BTreeMap::new();
        for a in &self.attempts {
            by_pair.entry((a.from, a.to)).or_default().push(a);
        }
        let ranks: std::collections::HashMap<u32, &ReachEndpoint> =
            self.endpoints.iter().map(|e| (e.rank, e)).collect();
        let endpoint = |r: u32| ranks.get(&r).copied();
        let mut out = Judged::default();
        for ((from, to), attempts) in by_pair {
            let (Some(f), Some(t)) = (endpoint(from), endpoint(to)) else {
                continue;
            };
            let (Some(tf), Some(tt)) = (tenant_of(&f.node), tenant_of(&t.node)) else {
                for e in [f, t] {
                    if tenant_of(&e.node).is_none() {
                        out.untenanted.insert(e.node.clone());
                    }
                }
                continue;
            };
            let judged: Vec<&&ReachAttempt> =
                attempts.iter().filter(|a| a.outcome.judged()).collect();
            if judged.is_empty() {
                out.unjudged += 1;
                continue;
            }
            let delivered = judged.iter().any(|a| a.outcome.delivered());
            let reached = judged.iter().all(|a| a.outcome == ReachOutcome::Reached);
            let blk = out
                .blocks
                .entry((tf.to_string(), tt.to_string()))
                .or_default();
            blk.pairs += 1;
            blk.delivered += u64::from(delivered);
            blk.reached += u64::from(reached);
            let finding = |pick: &dyn Fn(ReachOutcome) -> bool| PairFinding {
                from: f.clone(),
                to: t.clone(),
                attempts: judged
                    .iter()
                    .filter(|a| pick(a.outcome))
                    .map(|a| described(a))
                    .collect(),
            };
            if tf != tt && delivered {
                out.breaches.push(finding(&|o| o.delivered()));
            } else if tf == tt && !reached {
                out.unreached.push(finding(&|o| o != ReachOutcome::Reached));
            }
        }
        out
    }
}

/// `tcp reached`, `icmp timed_out (no echo reply)`.
fn described(a: &ReachAttempt) -> String {
    match &a.detail {
        Some(d) => format!("{} {} ({d})", a.method, a.outcome.as_str()),
        None => format!("{} {}", a.method, a.outcome.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_delivered() {
        assert!(ReachOutcome::Refused.delivered());
        assert!(ReachOutcome::ReachedOther.delivered());
        assert!(!ReachOutcome::TimedOut.delivered());
        assert!(!ReachOutcome::Unreachable.delivered());
        assert!(!ReachOutcome::Error.judged());
        let a = ReachAttempt {
            from: 0,
            to: 1,
            method: "tcp".into(),
            outcome: ReachOutcome::ReachedOther,
            ms: 0.5,
            detail: None,
        };
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains("\"reached_other\""), "{text}");
    }

    fn ep(rank: u32, node: &str) -> ReachEndpoint {
        ReachEndpoint {
            rank,
            node: node.into(),
            address: format!("198.18.0.{}", rank + 10),
            ..Default::default()
        }
    }

    fn at(from: u32, to: u32, method: &str, outcome: ReachOutcome) -> ReachAttempt {
        ReachAttempt {
            from,
            to,
            method: method.into(),
            outcome,
            ms: 1.0,
            detail: None,
        }
    }

    #[test]
    fn a_crossing_is_a_breach_and_a_miss_inside_is_unreached() {
        use ReachOutcome::*;
        let run = ReachRun {
            endpoints: vec![ep(0, "a1"), ep(1, "a2"), ep(2, "b1"), ep(3, "x")],
            attempts: vec![
                at(0, 1, "tcp", Reached),
                at(0, 1, "icmp", Reached),
                at(1, 0, "tcp", TimedOut),
                at(0, 2, "tcp", TimedOut),
                at(0, 2, "icmp", Reached),
                at(2, 0, "tcp", Unreachable),
                at(1, 2, "tcp", Error),
                at(0, 3, "tcp", Reached),
            ],
            ..Default::default()
        };
        let tenant = |n: &str| match n {
            "a1" | "a2" => Some("a"),
            "b1" => Some("b"),
            _ => None,
        };
        let j = run.judge(tenant);
        assert_eq!(j.breaches.len(), 1);
        assert_eq!(j.breaches[0].from.node, "a1");
        assert_eq!(j.breaches[0].to.node, "b1");
        assert_eq!(j.breaches[0].attempts, ["icmp reached"]);
        assert_eq!(j.unreached.len(), 1);
        assert_eq!(j.unreached[0].from.node, "a2");
        assert_eq!(j.unjudged, 1, "an attempt that errored judged nothing");
        assert!(j.untenanted.contains("x"));
        let ab = j.blocks[&("a".to_string(), "b".to_string())];
        assert_eq!((ab.pairs, ab.delivered), (1, 1));
        assert_eq!(inside_and_across(&j.blocks), (2, 2));
    }
}
