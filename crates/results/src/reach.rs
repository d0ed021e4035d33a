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
}
