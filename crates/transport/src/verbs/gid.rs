//! The GID table of a port, and which entry to use.
//!
//! On RoCE the GID is the packet's source address: each IP address of the netdev appears
//! in the table once per RoCE version (v1: raw Ethernet, one L2 segment; v2: UDP/IP,
//! routable). perftest's default, kept here, is the RoCE v2 GID that maps an IPv4
//! address (`::ffff:a.b.c.d`); index 0 is usually the IPv6 link-local GID, so assuming 0
//! breaks routed fabrics and Soft-RoCE alike. The table is read from sysfs
//! (`ports/N/gids/I` and `ports/N/gid_attrs/types/I`), plain files, so this module has no
//! unsafe code and is tested without a device.

use std::path::Path;

use anyhow::{bail, Result};

/// One used entry of the GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    pub index: u32,
    /// As sysfs prints it: eight groups of four hex digits.
    pub gid: String,
    /// `RoCE v2`, `RoCE v1`, `IB/RoCE v1`; `None` when the driver does not say (InfiniBand).
    pub kind: Option<String>,
}

impl GidEntry {
    /// `::ffff:a.b.c.d`: the GID of an IPv4 address.
    pub fn is_ipv4_mapped(&self) -> bool {
        self.gid.starts_with("0000:0000:0000:0000:0000:ffff:")
    }

    pub fn is_roce_v2(&self) -> bool {
        self.kind.as_deref() == Some("RoCE v2")
    }

    /// The IPv4 address of an IPv4-mapped GID, for messages.
    pub fn ipv4(&self) -> Option<String> {
        if !self.is_ipv4_mapped() {
            return None;
        }
        let hex: String = self.gid[30..].chars().filter(|c| *c != ':').collect();
        let v = u32::from_str_radix(&hex, 16).ok()?;
        Some(std::net::Ipv4Addr::from(v).to_string())
    }

    /// `1 (::ffff:10.99.0.1, RoCE v2)`.
    pub fn describe(&self) -> String {
        let addr = self
            .ipv4()
            .map_or(self.gid.clone(), |ip| format!("::ffff:{ip}"));
        match &self.kind {
            Some(k) => format!("{} ({addr}, {k})", self.index),
            None => format!("{} ({addr})", self.index),
        }
    }
}

const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// Parses the table from `port_dir` (`/sys/class/infiniband/DEV/ports/N`): used entries
/// only (unused ones read as all zeros, or fail to read their type).
pub fn read_table(port_dir: &Path) -> Vec<GidEntry> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(port_dir.join("gids")) else {
        return out;
    };
    for e in dir.flatten() {
        let Some(index) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(gid) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let gid = gid.trim().to_string();
        if gid.is_empty() || gid == ZERO_GID {
            continue;
        }
        let kind =
            std::fs::read_to_string(port_dir.join("gid_attrs/types").join(index.to_string()))
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty());
        out.push(GidEntry { index, gid, kind });
    }
    out.sort_by_key(|g| g.index);
    out
}

/// perftest's default: the first RoCE v2 GID mapping an IPv4 address; else the first
/// RoCE v2 GID; else the first used entry.
pub fn default_index(table: &[GidEntry]) -> Option<u32> {
    table
        .iter()
        .find(|g| g.is_roce_v2() && g.is_ipv4_mapped())
        .or_else(|| table.iter().find(|g| g.is_roce_v2()))
        .or_else(|| table.first())
        .map(|g| g.index)
}

/// Lists the usable entries for an error message.
pub fn list(table: &[GidEntry]) -> String {
    if table.is_empty() {
        return "none (is an IP address configured on the port's netdev?)".into();
    }
    table
        .iter()
        .map(GidEntry::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a `-x` choice against the table (`table_len` from the port attributes).
pub fn validate(index: u32, table: &[GidEntry], table_len: u32, what: &str) -> Result<GidEntry> {
    if index >= table_len {
        bail!(
            "GID index {index} is out of range: {what} has a GID table of {table_len} entries \
             (0..{}); the used ones are: {}. Pick one with -x (`show_gids` or \
             /sys/class/infiniband/*/ports/*/gids list them)",
            table_len.saturating_sub(1),
            list(table)
        );
    }
    match table.iter().find(|g| g.index == index) {
        Some(g) => Ok(g.clone()),
        None => bail!(
            "GID index {index} of {what} is an unused entry (no address behind it, so no \
             packet could carry it); the used ones are: {}. Pick one of those with -x, \
             preferably a RoCE v2 GID with an IPv4-mapped address",
            list(table)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rxe_table() -> Vec<GidEntry> {
        vec![
            GidEntry {
                index: 0,
                gid: "fe80:0000:0000:0000:5054:00ff:fe12:3456".into(),
                kind: Some("RoCE v2".into()),
            },
            GidEntry {
                index: 1,
                gid: "0000:0000:0000:0000:0000:ffff:0a63:0001".into(),
                kind: Some("RoCE v2".into()),
            },
        ]
    }

    #[test]
    fn default_is_the_ipv4_mapped_roce_v2_gid_never_blindly_zero() {
        assert_eq!(default_index(&rxe_table()), Some(1));
        let mlx = vec![
            GidEntry {
                index: 2,
                gid: "0000:0000:0000:0000:0000:ffff:c0a8:0102".into(),
                kind: Some("IB/RoCE v1".into()),
            },
            GidEntry {
                index: 3,
                gid: "0000:0000:0000:0000:0000:ffff:c0a8:0102".into(),
                kind: Some("RoCE v2".into()),
            },
        ];
        assert_eq!(default_index(&mlx), Some(3));
        assert_eq!(default_index(&[]), None);
    }

    #[test]
    fn ipv4_is_decoded_for_messages() {
        assert_eq!(rxe_table()[1].ipv4().as_deref(), Some("10.99.0.1"));
        assert_eq!(rxe_table()[1].describe(), "1 (::ffff:10.99.0.1, RoCE v2)");
        assert_eq!(rxe_table()[0].ipv4(), None);
    }

    #[test]
    fn bad_indexes_are_explained() {
        let t = rxe_table();
        let e = validate(7, &t, 4, "rxe0 port 1").unwrap_err().to_string();
        assert!(e.contains("out of range") && e.contains("0..3"), "{e}");
        assert!(e.contains("1 (::ffff:10.99.0.1, RoCE v2)"), "{e}");
        let e = validate(2, &t, 4, "rxe0 port 1").unwrap_err().to_string();
        assert!(e.contains("unused entry"), "{e}");
        assert_eq!(validate(1, &t, 4, "rxe0 port 1").unwrap().index, 1);
    }

    #[test]
    fn table_is_read_from_sysfs_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("gids")).unwrap();
        std::fs::create_dir_all(p.join("gid_attrs/types")).unwrap();
        std::fs::write(
            p.join("gids/0"),
            "fe80:0000:0000:0000:5054:00ff:fe12:3456\n",
        )
        .unwrap();
        std::fs::write(p.join("gid_attrs/types/0"), "RoCE v2\n").unwrap();
        std::fs::write(
            p.join("gids/1"),
            "0000:0000:0000:0000:0000:ffff:0a63:0001\n",
        )
        .unwrap();
        std::fs::write(p.join("gid_attrs/types/1"), "RoCE v2\n").unwrap();
        std::fs::write(p.join("gids/2"), format!("{ZERO_GID}\n")).unwrap();
        let t = read_table(p);
        assert_eq!(t, rxe_table());
    }
}
