//! An `ibnetdiscover` output as the plan: the fabric as built, taken as the golden one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::*;
use crate::natural::natural_cmp;

pub use crate::ibnet::{IbNode, IbPort};

/// Switch name from an NVIDIA node description (`MF0;NAME:MODEL/U1`), else the whole
/// description (as topograph's `pkg/ib/ib.go` reads it).
pub fn switch_name(desc: &str) -> String {
    if let Some((_, rest)) = desc.split_once(';') {
        if let Some((name, _)) = rest.split_once(':') {
            if !name.is_empty() && !name.contains(';') {
                return name.to_string();
            }
        }
    }
    desc.trim().to_string()
}

/// `g0n0 rail0` / `a08-p1-dgx-04-c01 mlx5_5` / `hostname HCA-1`: host and NIC of a CA's
/// node description (the NIC is the last word; a one-word description is the host alone,
/// its NIC named after the node id).
pub fn ca_name(desc: &str, id: &str) -> (String, String) {
    match desc.trim().rsplit_once(' ') {
        Some((h, n)) if !h.trim().is_empty() => (h.trim().to_string(), n.to_string()),
        _ => (desc.trim().to_string(), id.to_string()),
    }
}

/// The node blocks of `ibnetdiscover` text output (read by [`crate::ibnet`]); the error
/// names the file and line.
pub fn parse_ibnetdiscover(file: &str, text: &str) -> Result<Vec<IbNode>> {
    let nodes = crate::ibnet::parse_nodes(text).map_err(|e| PlanError(format!("{file} {e}")))?;
    if nodes.is_empty() {
        return Err(PlanError(format!(
            "{file}: no Switch or Ca block; is this the output of ibnetdiscover (not -p, not --cache)?"
        )));
    }
    Ok(nodes)
}

/// An `ibnetdiscover` output as the plan ("as built" taken as golden): switches with CAs
/// are leaves, the others spines (core above spines); each CA port a NIC (rail: the host's
/// NICs in natural name order), port = the leaf's port number; switch links counted.
pub fn import_ibnetdiscover(file: &str, text: &str) -> Result<FabricPlan> {
    let nodes = parse_ibnetdiscover(file, text)?;
    let by_id: HashMap<&str, &IbNode> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let desc = |n: &IbNode| n.desc.clone().unwrap_or_else(|| n.id.clone());
    let sw_name = |n: &IbNode| switch_name(&desc(n));
    let mut plan = FabricPlan {
        version: 1,
        ..Default::default()
    };
    let mut host_nics: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    let mut leaves = BTreeSet::new();
    for n in nodes.iter().filter(|n| !n.switch) {
        let (host, nic) = ca_name(&desc(n), &n.id);
        for p in &n.ports {
            let Some(peer) = by_id.get(p.peer_id.as_str()) else {
                continue;
            };
            if !peer.switch {
                continue;
            }
            leaves.insert(peer.id.clone());
            let nic = if n.ports.len() > 1 {
                format!("{nic}/{}", p.port)
            } else {
                nic.clone()
            };
            host_nics.entry(host.clone()).or_default().push((
                nic,
                sw_name(peer),
                p.peer_port.to_string(),
            ));
        }
    }
    let mut link_counts: BTreeMap<(String, String), u32> = BTreeMap::new();
    let mut above: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for n in nodes.iter().filter(|n| n.switch) {
        for p in &n.ports {
            let Some(peer) = by_id.get(p.peer_id.as_str()).filter(|x| x.switch) else {
                continue;
            };
            if seen.contains(&(peer.id.clone(), p.peer_port))
                || !seen.insert((n.id.clone(), p.port))
            {
                continue;
            }
            let (a, b) = (sw_name(n), sw_name(peer));
            above.entry(a.clone()).or_default().insert(b.clone());
            above.entry(b.clone()).or_default().insert(a.clone());
            let k = if a <= b { (a, b) } else { (b, a) };
            *link_counts.entry(k).or_default() += 1;
        }
    }
    let leaf_names: BTreeSet<String> = nodes
        .iter()
        .filter(|n| leaves.contains(&n.id))
        .map(sw_name)
        .collect();
    for n in nodes.iter().filter(|n| n.switch) {
        let name = sw_name(n);
        let tier = if leaf_names.contains(&name) {
            Tier::Leaf
        } else if above
            .get(&name)
            .is_some_and(|peers| peers.iter().all(|p| !leaf_names.contains(p)))
        {
            Tier::Core
        } else {
            Tier::Spine
        };
        if plan.switch.iter().all(|s| s.name != name) {
            plan.switch.push(PlanSwitch {
                name,
                tier,
                group: None,
                rail: None,
                rack: None,
            });
        }
    }
    for (host, mut nics) in host_nics {
        nics.sort_by(|x, y| natural_cmp(&x.0, &y.0));
        for (rail, (nic, sw, port)) in nics.into_iter().enumerate() {
            plan.nic.push(PlanNic {
                node: host.clone(),
                nic,
                rail: rail as u32,
                switch: sw,
                port: Some(port),
                rate_gbit_s: None,
            });
        }
    }
    plan.link = link_counts
        .into_iter()
        .map(|((a, b), count)| PlanLink {
            a,
            b,
            count,
            rate_gbit_s: None,
        })
        .collect();
    Ok(plan)
}
