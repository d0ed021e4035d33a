//! A port's P_Key table, as the host sees it (`/sys/class/infiniband/DEV/ports/N/pkeys/I`,
//! one hex value per index) and as the SM side reads it (`smpquery pkeys`, infiniband-diags:
//! eight values a line after the first index of the line, then `N pkeys capacity for this
//! port`). Index 0 is where the default partition lives; `0x0000` is an empty slot. Bit 15
//! of each key is the port's membership (1 full, 0 limited). The judgment against a
//! tenant is `results::tenants::Tenant::pkey_findings`.

/// A port's P_Key table: (index, raw 16-bit key) of every slot in use, and the table's
/// size where the tool says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PkeyTable {
    /// (index, raw 16-bit key; the top bit is full membership) of every slot in use.
    pub entries: Vec<(u16, u16)>,
    /// How many slots the table has, where the tool says it.
    pub capacity: Option<u32>,
}

impl PkeyTable {
    /// The raw keys in use, in index order.
    pub fn keys(&self) -> Vec<u16> {
        self.entries.iter().map(|e| e.1).collect()
    }
}

/// `smpquery pkeys` output.
pub fn parse_smpquery(text: &str) -> Result<PkeyTable, String> {
    let mut t = PkeyTable::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(cap) = line.strip_suffix("pkeys capacity for this port") {
            t.capacity = cap.trim().parse().ok();
            continue;
        }
        let (first, values) = line
            .split_once(':')
            .ok_or_else(|| format!("line {}: {line:?} is not `INDEX: KEY ...`", n + 1))?;
        let first: u16 = first
            .trim()
            .parse()
            .map_err(|_| format!("line {}: {first:?} is not an index", n + 1))?;
        for (i, v) in values.split_whitespace().enumerate() {
            let key =
                results::tenants::parse_pkey(v).map_err(|e| format!("line {}: {e}", n + 1))?;
            if key & 0x7fff != 0 {
                t.entries.push((first + i as u16, key));
            }
        }
    }
    if t.entries.is_empty() && t.capacity.is_none() {
        return Err("no P_Key line: is this `smpquery pkeys` output?".into());
    }
    Ok(t)
}

/// The table from its slots (`/sys/class/infiniband/DEV/ports/N/pkeys/I`: index, the
/// slot file's text), in any order; the audit reads them through its source.
pub fn from_slots(slots: &[(u16, String)]) -> Result<PkeyTable, String> {
    let mut t = PkeyTable {
        capacity: Some(slots.len() as u32),
        ..Default::default()
    };
    for (index, text) in slots {
        let key = results::tenants::parse_pkey(text).map_err(|e| format!("slot {index}: {e}"))?;
        if key & 0x7fff != 0 {
            t.entries.push((*index, key));
        }
    }
    t.entries.sort_unstable();
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_slots_are_read_in_index_order() {
        let slots: Vec<(u16, String)> = [
            (10, "0x0002\n"),
            (0, "0xffff\n"),
            (2, "0x0000\n"),
            (1, "0x8001\n"),
        ]
        .into_iter()
        .map(|(i, v)| (i, v.to_string()))
        .collect();
        let t = from_slots(&slots).unwrap();
        assert_eq!(t.entries, [(0, 0xffff), (1, 0x8001), (10, 0x0002)]);
        assert_eq!(t.capacity, Some(4));
    }

    #[test]
    fn garbage_is_refused_with_its_line() {
        assert!(parse_smpquery("").is_err());
        let e = parse_smpquery("   0: 0x7fff 0xzz").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }
}
