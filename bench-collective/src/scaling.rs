//! The communicators a run measures on. Without `--scaling`, the whole job. With it, the
//! scaling curve in one launch: sub-communicators made of whole nodes, 1, 2, 4, ... nodes
//! (hosts in the order of their lowest rank), then every node; on a single host, of 2,
//! 4, 8, ... ranks (lowest ranks first), then all. A one-rank communicator is left out
//! (a collective on one rank moves nothing). Rank 0 is in every team, so the job's rank
//! 0 is every team's rank 0 and prints and writes everything.

use serde::{Deserialize, Serialize};

/// One communicator to measure on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamSpec {
    /// Job ranks in it, ascending.
    pub members: Vec<u32>,
    /// Hosts they run on.
    pub nodes: u32,
}

impl TeamSpec {
    pub fn has(&self, rank: u32) -> bool {
        self.members.binary_search(&rank).is_ok()
    }
}

/// The teams for a job whose rank r runs on `hosts[r]`.
pub fn plan(hosts: &[String], scaling: bool) -> Vec<TeamSpec> {
    let mut order: Vec<&str> = Vec::new();
    for h in hosts {
        if !order.contains(&h.as_str()) {
            order.push(h);
        }
    }
    let whole = TeamSpec {
        members: (0..hosts.len() as u32).collect(),
        nodes: order.len() as u32,
    };
    if !scaling {
        return vec![whole];
    }
    let mut teams = Vec::new();
    if order.len() == 1 {
        let mut k = 2;
        while k < hosts.len() {
            teams.push(TeamSpec {
                members: (0..k as u32).collect(),
                nodes: 1,
            });
            k *= 2;
        }
    } else {
        let mut m = 1;
        while m < order.len() {
            let chosen = &order[..m];
            let members: Vec<u32> = (0..hosts.len() as u32)
                .filter(|&r| chosen.contains(&hosts[r as usize].as_str()))
                .collect();
            if members.len() >= 2 {
                teams.push(TeamSpec {
                    members,
                    nodes: m as u32,
                });
            }
            m *= 2;
        }
    }
    teams.push(whole);
    teams
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(spec: &[&str]) -> Vec<String> {
        spec.iter().map(|s| s.to_string()).collect()
    }

    fn sizes(t: &[TeamSpec]) -> Vec<(usize, u32)> {
        t.iter().map(|t| (t.members.len(), t.nodes)).collect()
    }

    #[test]
    fn one_host_splits_by_rank() {
        let h = hosts(&["a"; 8]);
        assert_eq!(sizes(&plan(&h, false)), [(8, 1)]);
        let t = plan(&h, true);
        assert_eq!(sizes(&t), [(2, 1), (4, 1), (8, 1)]);
        assert_eq!(t[1].members, [0, 1, 2, 3]);
        let t = plan(&hosts(&["a"; 6]), true);
        assert_eq!(sizes(&t), [(2, 1), (4, 1), (6, 1)]);
        assert_eq!(sizes(&plan(&hosts(&["a"]), true)), [(1, 1)]);
    }

    #[test]
    fn several_hosts_split_by_whole_nodes() {
        // Four nodes of two ranks, placed round-robin (rank r on node r % 4).
        let h = hosts(&["a", "b", "c", "d", "a", "b", "c", "d"]);
        let t = plan(&h, true);
        assert_eq!(sizes(&t), [(2, 1), (4, 2), (8, 4)]);
        assert_eq!(t[0].members, [0, 4]);
        assert_eq!(t[1].members, [0, 1, 4, 5]);
        assert!(t.iter().all(|t| t.has(0)), "rank 0 is in every team");
        // One rank per node: the one-node team is left out.
        let t = plan(&hosts(&["a", "b", "c"]), true);
        assert_eq!(sizes(&t), [(2, 2), (3, 3)]);
    }
}
