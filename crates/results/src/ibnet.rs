//! `ibnetdiscover`'s text, the one reader of it: the node blocks (for the plan importer,
//! `fabric_plan`) and every cable once (for discovery, `Document.fabric`).
//!
//! The text format (infiniband-diags 44; the same syntax ibsim reads as its fabric file):
//! a node header `Switch|Ca|Rt <ports> "<id>"  # "<node description>" ...`, then one line per
//! connected port. A switch port line is `[p] "<peer id>"[pp](peer port guid)  # "<peer
//! description>" lid N 4xNDR`; a CA port line puts the local port guid first:
//! `[p](guid) "<peer id>"[pp]  # lid N lmc 0 "<peer description>" lid N 4xNDR`. Ids look like
//! `S-<node guid>` / `H-<node guid>`; in hand-written ibsim files they are plain names. Each
//! cable appears twice (once from each end) and is kept once.

use std::collections::{BTreeMap, BTreeSet};

use crate::discovery::FabricLink;

/// One node block (`Switch`, `Ca`/`Hca` or `Rt`).
#[derive(Debug, Clone, PartialEq)]
pub struct IbNode {
    pub switch: bool,
    /// The node id as printed (`S-...`, `H-...`, or an ibsim name).
    pub id: String,
    /// The node description, when the header carries one.
    pub desc: Option<String>,
    /// The node GUID (`0x` and 16 hex digits), from the `switchguid=`/`caguid=` line or
    /// the id.
    pub guid: Option<String>,
    pub ports: Vec<IbPort>,
}

/// One port line of a node block.
#[derive(Debug, Clone, PartialEq)]
pub struct IbPort {
    pub port: u32,
    /// The peer's node id as printed.
    pub peer_id: String,
    pub peer_port: u32,
    /// The peer's node description (the last quoted string of the comment), empty when
    /// none is printed.
    pub peer_desc: String,
    /// Width and speed as trained (`4X`, `NDR`), from the last word of the comment.
    pub link: Option<(String, String)>,
}

/// The description every SHARP Aggregation Node prints: a CA inside each Quantum switch of
/// a UFM-managed fabric, on the switch's extra internal port (41 on a 40-port MQM8700). It
/// is neither a host nor a cable of the fabric.
pub const AGGREGATION_NODE: &str = "Mellanox Technologies Aggregation Node";

/// Whether a node description is a SHARP Aggregation Node's.
pub fn is_aggregation_node(desc: &str) -> bool {
    desc.trim() == AGGREGATION_NODE
}

/// The switch's own name in an NVIDIA node description (`MF0;NAME:MODEL/U1`, as UFM and
/// the switch OS set it), else the whole description (as topograph's `pkg/ib/ib.go` reads
/// it).
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

/// The name of every switch of `nodes` (by node id): its own name from the description
/// ([`switch_name`]) when that names it alone, else its node id (`S-<GUID>`, ibnetdiscover's
/// id for it). A switch is its GUID; the description is a label, and an unmanaged
/// switch's factory default (`Quantum Mellanox Technologies`, the same on every one)
/// names none of them: taken as the name, every such switch would merge into one and the
/// cables between them become self-links. A name with blanks is not a switch's name
/// either (discovery tells hosts, `node nic`, by their blank).
pub fn switch_names(nodes: &[IbNode]) -> BTreeMap<String, String> {
    let own = |n: &IbNode| switch_name(n.desc.as_deref().unwrap_or(&n.id));
    let mut uses: BTreeMap<String, usize> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.switch) {
        *uses.entry(own(n)).or_default() += 1;
    }
    nodes
        .iter()
        .filter(|n| n.switch)
        .map(|n| {
            let name = own(n);
            let alone = uses.get(&name) == Some(&1)
                && !name.is_empty()
                && !name.contains(char::is_whitespace);
            (n.id.clone(), if alone { name } else { n.id.clone() })
        })
        .collect()
}

/// The first `"..."` string in `s` and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let a = s.find('"')?;
    let rest = &s[a + 1..];
    let b = rest.find('"')?;
    Some((&rest[..b], &rest[b + 1..]))
}

/// `[12]` at the start of `s`: the number and the rest.
fn bracket(s: &str) -> Option<(u32, &str)> {
    let s = s.strip_prefix('[')?;
    let (n, rest) = s.split_once(']')?;
    Some((n.trim().parse().ok()?, rest))
}

/// `(guid)` at the start of `s` (after blanks): dropped.
fn skip_paren(s: &str) -> &str {
    let t = s.trim_start();
    match t.strip_prefix('(').and_then(|r| r.split_once(')')) {
        Some((_, rest)) => rest,
        None => t,
    }
}

/// `4xNDR` -> (`4X`, `NDR`).
pub fn split_width_speed(token: &str) -> Option<(String, String)> {
    let (w, s) = token.split_once(['x', 'X'])?;
    if w.is_empty() || !w.chars().all(|c| c.is_ascii_digit()) || s.is_empty() {
        return None;
    }
    Some((format!("{w}X"), s.to_string()))
}

/// The node GUID an id names: `S-0002c903006e1430` -> `0x0002c903006e1430`.
fn guid_of_id(id: &str) -> Option<String> {
    normalize_guid(id.strip_prefix("S-").or_else(|| id.strip_prefix("H-"))?)
}

/// One spelling for a GUID, whichever tool printed it: `0x` and 16 lower-case hex digits
/// (`switchguid=0x200000` and smpquery's `0x0000000000200000` are the same node).
pub fn normalize_guid(g: &str) -> Option<String> {
    let hex = g.strip_prefix("0x").unwrap_or(g);
    (!hex.is_empty() && hex.len() <= 16 && hex.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| format!("0x{:0>16}", hex.to_ascii_lowercase()))
}

/// Every node block, in order. The error names the line.
pub fn parse_nodes(text: &str) -> Result<Vec<IbNode>, String> {
    let mut nodes: Vec<IbNode> = Vec::new();
    let mut pending_guid: Option<String> = None;
    for (no, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(g) = t
            .strip_prefix("switchguid=")
            .or_else(|| t.strip_prefix("caguid="))
            .or_else(|| t.strip_prefix("routerguid="))
        {
            pending_guid = normalize_guid(g.split('(').next().unwrap_or(g));
            continue;
        }
        let kind = t.split_whitespace().next().unwrap_or("");
        if matches!(kind, "Switch" | "Ca" | "Hca" | "Rt") {
            let (id, rest) = quoted(t).ok_or_else(|| {
                format!("line {}: a node header without a quoted id: {t}", no + 1)
            })?;
            let desc = rest
                .split_once('#')
                .and_then(|(_, c)| quoted(c))
                .map(|(d, _)| d.to_string());
            let guid = pending_guid.take().or_else(|| guid_of_id(id));
            nodes.push(IbNode {
                switch: kind == "Switch",
                id: id.to_string(),
                desc,
                guid,
                ports: Vec::new(),
            });
            continue;
        }
        if let Some((port, rest)) = bracket(t) {
            let node = nodes
                .last_mut()
                .ok_or_else(|| format!("line {}: a port line before any node header", no + 1))?;
            let rest = skip_paren(rest);
            let (peer, after) = quoted(rest)
                .ok_or_else(|| format!("line {}: a port line without a peer id: {t}", no + 1))?;
            let (peer_port, after) = bracket(after.trim_start()).ok_or_else(|| {
                format!("line {}: a port line without the peer port: {t}", no + 1)
            })?;
            let comment = after.split_once('#').map_or("", |(_, c)| c);
            // The peer's description is the last quoted string of the comment.
            let mut peer_desc = String::new();
            let mut c = comment;
            while let Some((q, r)) = quoted(c) {
                peer_desc = q.to_string();
                c = r;
            }
            let link = comment
                .split_whitespace()
                .last()
                .and_then(split_width_speed);
            node.ports.push(IbPort {
                port,
                peer_id: peer.to_string(),
                peer_port,
                peer_desc,
                link,
            });
            continue;
        }
        // vendid=, devid=, sysimgguid= and ibsim's `include`/`do` lines carry nothing here.
    }
    Ok(nodes)
}

/// Every cable of the fabric, once, ordered; ends ordered by (GUID, port). A switch is
/// named as the plan importer names it ([`switch_names`]), a CA by its node description
/// (`host nic`). The cable from a switch to its own Aggregation Node is inside the switch
/// and left out.
pub fn links(text: &str) -> Result<Vec<FabricLink>, String> {
    let nodes = parse_nodes(text)?;
    let by_id: BTreeMap<&str, &IbNode> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let sw_names = switch_names(&nodes);
    let internal = |id: &str, desc: &str| {
        is_aggregation_node(desc)
            || by_id
                .get(id)
                .and_then(|n| n.desc.as_deref())
                .is_some_and(is_aggregation_node)
    };
    let ident = |id: &str| -> (String, String) {
        match by_id.get(id) {
            Some(n) => (
                n.guid.clone().unwrap_or_else(|| id.to_string()),
                sw_names.get(id).cloned().unwrap_or_else(|| {
                    n.desc
                        .as_deref()
                        .map_or_else(|| id.to_string(), |d| d.trim().to_string())
                }),
            ),
            None => (
                guid_of_id(id).unwrap_or_else(|| id.to_string()),
                id.to_string(),
            ),
        }
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        let (ag, an) = ident(&n.id);
        // A peer whose own block is missing (a partial discovery) is named by its id,
        // its GUID read from the id.
        if n.desc.as_deref().is_some_and(is_aggregation_node) {
            continue;
        }
        for port in &n.ports {
            if internal(&port.peer_id, &port.peer_desc) {
                continue;
            }
            let (p, pp) = (port.port, port.peer_port);
            let (bg, bn) = ident(&port.peer_id);
            let (a, b) = if (ag.as_str(), p) <= (bg.as_str(), pp) {
                ((ag.clone(), an.clone(), p), (bg, bn, pp))
            } else {
                ((bg, bn, pp), (ag.clone(), an.clone(), p))
            };
            if !seen.insert((a.0.clone(), a.2, b.0.clone(), b.2)) {
                continue;
            }
            let (width, speed) = port.link.clone().unzip();
            out.push(FabricLink {
                a_guid: a.0,
                a_name: a.1,
                a_port: a.2,
                b_guid: b.0,
                b_name: b.1,
                b_port: b.2,
                width,
                speed,
            });
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NARROW: &str = include_str!("fixtures/ibnetdiscover-44-narrow-uplink.txt");

    fn names(l: &FabricLink) -> String {
        format!(
            "{}[{}]-{}[{}] {}{}",
            l.a_name,
            l.a_port,
            l.b_name,
            l.b_port,
            l.width.as_deref().unwrap_or("?"),
            l.speed.as_deref().unwrap_or("?")
        )
    }

    #[test]
    fn ibsim_fabric_every_cable_once_with_width() {
        // ibnetdiscover 44 under ibsim on tests/fabric/ibsim/narrow-uplink.net: 8 HCA
        // cables and 4 uplinks, leaf-g0 port 10 to spine1 at 1X.
        let links = links(NARROW).unwrap();
        assert_eq!(links.len(), 12, "{links:#?}");
        let all: Vec<String> = links.iter().map(names).collect();
        assert!(
            all.contains(&"leaf-g0[10]-spine1[1] 1XSDR".to_string()),
            "{all:#?}"
        );
        assert_eq!(all.iter().filter(|s| s.ends_with("4XSDR")).count(), 11);
        assert!(
            all.contains(&"g0n1[1]-leaf-g0[2] 4XSDR".to_string())
                || all.contains(&"leaf-g0[2]-g0n1[1] 4XSDR".to_string()),
            "{all:#?}"
        );
        let up = links
            .iter()
            .find(|l| l.b_name == "spine1" && l.a_name == "leaf-g0")
            .unwrap();
        assert_eq!(up.a_guid, "0x0000000000200000");
        assert_eq!(
            normalize_guid("0x2C5E").as_deref(),
            Some("0x0000000000002c5e")
        );
    }

    #[test]
    fn real_switch_and_ca_lines() {
        // Lines of NVIDIA/topograph tests/output/ibnetdiscover/example.out (a real cluster,
        // as quoted in the field note), with the peers' own blocks absent.
        let text = "switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)\n\
Switch\t65 \"S-2c5eab0300b87b40\"\t\t# \"MF0;A09-P1-IBLEAF-04-04:MQM9701/U1\" enhanced port 0 lid 73 lmc 0\n\
[1]\t\"H-e09d7303007a4bd8\"[1](e09d7303007a4bd8) \t\t# \"a08-p1-dgx-04-c01 mlx5_5\" lid 647 4xNDR\n\
[35]\t\"S-2c5eab0300c26280\"[32]\t\t# \"MF0;A10-P1-IBSPINE-02:MQM9701/U1\" lid 236 4xNDR\n\
\n\
caguid=0xe09d7303007a5a68\n\
Ca\t1 \"H-e09d7303007a5a68\"\t\t# \"a08-p1-dgx-04-c17 mlx5_5\"\n\
[1](e09d7303007a5a68) \t\"S-2c5eab0300b87b40\"[17]\t\t# lid 657 lmc 0 \"MF0;A09-P1-IBLEAF-04-04:MQM9701/U1\" lid 73 4xNDR\n";
        let links = links(text).unwrap();
        assert_eq!(links.len(), 3, "{links:#?}");
        let spine = links
            .iter()
            .find(|l| l.a_guid == "0x2c5eab0300c26280" || l.b_guid == "0x2c5eab0300c26280")
            .unwrap();
        assert_eq!(spine.width.as_deref(), Some("4X"));
        assert_eq!(spine.speed.as_deref(), Some("NDR"));
        let ca = links
            .iter()
            .find(|l| {
                l.a_name == "a08-p1-dgx-04-c17 mlx5_5" || l.b_name == "a08-p1-dgx-04-c17 mlx5_5"
            })
            .unwrap();
        assert!(ca.a_port == 17 || ca.b_port == 17);
    }

    #[test]
    fn broken_input_names_the_line() {
        let e = links("[1] \"x\"[1]\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("before any node"), "{e}");
        let e = links("Switch 8 \"a\"\n[1] \"b\"\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("peer port"), "{e}");
        assert_eq!(
            split_width_speed("4xNDR"),
            Some(("4X".into(), "NDR".into()))
        );
        assert_eq!(split_width_speed("lmc"), None);
    }
}
