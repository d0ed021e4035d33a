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

/// The split the options ask for: across two tenants when they name them, else GPCNeT's.
pub fn of(nodes: &[Node], opts: &super::Options) -> Result<Split, String> {
    match &opts.tenants {
        Some(t) => split_tenants(nodes, opts.seed, t),
        None => split(nodes, opts.seed, opts.canaries),
    }
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
    Ok(Split {
        ring: order,
        groups: groups(cong),
    })
}

/// The congestors in up to four groups of at least two nodes each, the patterns in turn.
fn groups(cong: Vec<Node>) -> Vec<(String, Vec<Node>)> {
    let ngroups = (cong.len() / 2).clamp(1, 4);
    let mut groups: Vec<(String, Vec<Node>)> = (0..ngroups)
        .map(|g| (PATTERNS[g % PATTERNS.len()].to_string(), Vec::new()))
        .collect();
    for (i, node) in cong.into_iter().enumerate() {
        groups[i % ngroups].1.push(node);
    }
    groups
}

/// Canaries from one tenant, congestors from another (noisy neighbours): every node of
/// the canary tenant is a canary (the ring in the seed's order), every node of the
/// congestor tenant a congestor (its groups from the seed as GPCNeT's are). A node of
/// neither tenant is refused: the run is launched on the two tenants' nodes only, so a
/// third tenant's node neither loads the fabric nor is counted.
pub fn split_tenants(nodes: &[Node], seed: u64, t: &TenantRoles) -> Result<Split, String> {
    let mut ring = Vec::new();
    let mut cong = Vec::new();
    for n in nodes {
        // With --include-local a node is `host#rank`: its tenant is its host's.
        let host = n.name.split('#').next().unwrap_or(&n.name);
        if t.canary_nodes.iter().any(|h| h == host) {
            ring.push(n.clone());
        } else if t.congestor_nodes.iter().any(|h| h == host) {
            cong.push(n.clone());
        } else {
            return Err(format!(
                "node {host} is in neither tenant {:?} nor {:?}: launch the run on their nodes only",
                t.canary, t.congestor
            ));
        }
    }
    for (name, side, role) in [
        (&t.canary, &ring, "canaries"),
        (&t.congestor, &cong, "congestors"),
    ] {
        if side.len() < 2 {
            return Err(format!(
                "tenant {name:?} has {} node(s) in this run: at least 2 {role} are needed \
                 (launch the run on more of its nodes, or --include-local to count every rank as a node)",
                side.len()
            ));
        }
    }
    let mut rng = SplitMix64::new(seed);
    rng.shuffle(&mut ring);
    rng.shuffle(&mut cong);
    Ok(Split {
        ring,
        groups: groups(cong),
    })
}

/// Two tenants' roles in a noisy-neighbour run, with their nodes' host names (resolved
/// from the tenants file at the edge, so every rank and agent gets the same lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRoles {
    /// The tenant whose nodes are the canaries (the one that may be crowded out).
    pub canary: String,
    /// The canary tenant's nodes (host names).
    pub canary_nodes: Vec<String>,
    /// The tenant whose nodes are the congestors (the noisy neighbour).
    pub congestor: String,
    /// The congestor tenant's nodes (host names).
    pub congestor_nodes: Vec<String>,
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

    /// Across two tenants: every canary is the canary tenant's, every congestor the other's,
    /// the same for a seed; a node of neither, or one node of a tenant, is refused.
    #[test]
    fn across_two_tenants_the_roles_follow_the_tenants() {
        let ns = nodes(&hosts(8), false);
        let t = TenantRoles {
            canary: "acme".into(),
            canary_nodes: ["h00", "h03", "h05"].map(String::from).to_vec(),
            congestor: "globex".into(),
            congestor_nodes: ["h01", "h02", "h04", "h06", "h07"]
                .map(String::from)
                .to_vec(),
        };
        let s = split_tenants(&ns, 3, &t).unwrap();
        assert_eq!(s, split_tenants(&ns, 3, &t).unwrap());
        let mut ring: Vec<&str> = s.ring.iter().map(|n| n.name.as_str()).collect();
        ring.sort();
        assert_eq!(ring, ["h00", "h03", "h05"]);
        let mut cong: Vec<&str> = s
            .groups
            .iter()
            .flat_map(|g| g.1.iter().map(|n| n.name.as_str()))
            .collect();
        cong.sort();
        assert_eq!(cong, ["h01", "h02", "h04", "h06", "h07"]);
        assert_eq!(s.groups.len(), 2);
        let mut other = t.clone();
        other.congestor_nodes.pop();
        let e = split_tenants(&ns, 3, &other).unwrap_err();
        assert!(e.contains("node h07 is in neither tenant"), "{e}");
        let mut lone = t.clone();
        lone.canary_nodes = vec!["h00".into()];
        lone.congestor_nodes.extend(["h03".into(), "h05".into()]);
        let e = split_tenants(&ns, 3, &lone).unwrap_err();
        assert!(e.contains("tenant \"acme\" has 1 node(s)"), "{e}");
    }

    #[test]
    fn too_few_nodes_is_refused() {
        assert!(split(&nodes(&hosts(3), false), 1, 20).is_err());
    }
}
