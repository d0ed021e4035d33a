//! The seeded split of the nodes into canaries and congestor groups, and the canaries'
//! ring. Pure arithmetic on the node list: every rank computes the same split from the same
//! seed and the same gathered host names, and a later run with the seed repeats it.

use base::splitmix::SplitMix64;
use serde::{Deserialize, Serialize};

/// The congestor patterns, given to the groups in turn: GPCNeT's four, two-sided
/// all-to-all and incast, then the one-sided put incast and get broadcast (over verbs an
/// RDMA WRITE into the group's first node and an RDMA READ from it).
pub const PATTERNS: [&str; 4] = ["alltoall", "incast", "put_incast", "get_bcast"];

/// One node: its name and the world ranks on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Its host name.
    pub name: String,
    /// The world ranks on it.
    pub ranks: Vec<u32>,
}

/// GPCNeT's split of the nodes, from the seed: the canaries in a ring, the congestors in
/// their groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Canary nodes in ring order.
    pub ring: Vec<Node>,
    /// Congestor groups: pattern and nodes (the first node of an incast group receives).
    pub groups: Vec<(String, Vec<Node>)>,
}

/// Groups the ranks into nodes: by host name, or one node per rank with `include_local`
/// (every rank of one machine then stands for a node, which is how a single machine
/// rehearses the method). Nodes are ordered by name so the split depends on the set of
/// hosts, not on the launcher's rank order.
pub fn nodes(hosts: &[String], include_local: bool) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for (r, h) in hosts.iter().enumerate() {
        let name = if include_local {
            format!("{h}#{r}")
        } else {
            h.clone()
        };
        match out.iter_mut().find(|n| n.name == name) {
            Some(n) => n.ranks.push(r as u32),
            None => out.push(Node {
                name,
                ranks: vec![r as u32],
            }),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The split: `percent` of the nodes (rounded up, at least 2) are canaries, the rest
/// congestors in up to four groups of at least two nodes each.
pub fn split(nodes: &[Node], seed: u64, percent: u32) -> Result<Split, String> {
    let n = nodes.len();
    let canaries = (n * percent as usize).div_ceil(100).max(2);
    if n < canaries + 2 {
        return Err(format!(
            "{n} nodes are too few: {canaries} canaries and at least 2 congestors are needed \
             (add nodes, or --include-local to count every rank as a node)"
        ));
    }
    let mut order: Vec<Node> = nodes.to_vec();
    let mut rng = SplitMix64::new(seed);
    rng.shuffle(&mut order);
    let cong = order.split_off(canaries);
    let ngroups = (cong.len() / 2).clamp(1, 4);
    let mut groups: Vec<(String, Vec<Node>)> = (0..ngroups)
        .map(|g| (PATTERNS[g % PATTERNS.len()].to_string(), Vec::new()))
        .collect();
    for (i, node) in cong.into_iter().enumerate() {
        groups[i % ngroups].1.push(node);
    }
    Ok(Split {
        ring: order,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("h{i:02}")).collect()
    }

    #[test]
    fn same_seed_same_split_other_seed_other_split() {
        let ns = nodes(&hosts(40), false);
        let a = split(&ns, 7, 20).unwrap();
        assert_eq!(a, split(&ns, 7, 20).unwrap());
        assert_ne!(a, split(&ns, 8, 20).unwrap());
        assert_eq!(a.ring.len(), 8);
        assert_eq!(a.groups.len(), 4);
        let patterns: Vec<&str> = a.groups.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(patterns, PATTERNS);
        let total: usize = a.ring.len() + a.groups.iter().map(|g| g.1.len()).sum::<usize>();
        assert_eq!(total, 40);
    }

    #[test]
    fn ranks_of_one_host_are_one_node_unless_include_local() {
        let h = vec!["b".to_string(), "a".into(), "b".into()];
        let ns = nodes(&h, false);
        assert_eq!(ns.len(), 2);
        assert_eq!(ns[1].ranks, vec![0, 2]);
        assert_eq!(nodes(&h, true).len(), 3);
    }

    #[test]
    fn too_few_nodes_is_refused() {
        assert!(split(&nodes(&hosts(3), false), 1, 20).is_err());
    }
}
