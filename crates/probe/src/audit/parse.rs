//! Parsers of the tools' outputs, each saying which tool version its format is from.

use std::collections::BTreeMap;

use results::audit::{Buffer, Ets, Fec, Pfc};
use serde::Deserialize;
use serde_json::Value;

/// `dcb -j -s pfc show dev IF` (iproute2 >= 5.11, dcb/dcb_pfc.c):
/// `{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,..],"requests":[..],
/// "indications":[..]}`; `requests`/`indications` only with `-s`.
pub fn dcb_pfc(json: &str) -> Result<Pfc, String> {
    #[derive(Deserialize)]
    struct Raw {
        pfc_cap: Option<u32>,
        delay: Option<u32>,
        prio_pfc: Vec<bool>,
        #[serde(default)]
        requests: Vec<u64>,
        #[serde(default)]
        indications: Vec<u64>,
    }
    let r: Raw = serde_json::from_str(json).map_err(|e| format!("not dcb's PFC JSON: {e}"))?;
    Ok(Pfc {
        enabled: r.prio_pfc,
        pfc_cap: r.pfc_cap,
        delay: r.delay,
        requests: r.requests,
        indications: r.indications,
    })
}

/// `dcb -j ets show dev IF` (iproute2 >= 5.11, dcb/dcb_ets.c): `{"willing":false,
/// "ets_cap":8,"cbs":false,"tc_bw":[..],"pg_bw":[..],"tc_tsa":["ets","strict",..],
/// "prio_tc":[..],"reco_tc_bw":..}`.
pub fn dcb_ets(json: &str) -> Result<Ets, String> {
    #[derive(Deserialize)]
    struct Raw {
        willing: Option<bool>,
        #[serde(default)]
        tc_bw: Vec<u8>,
        #[serde(default)]
        tc_tsa: Vec<String>,
        #[serde(default)]
        prio_tc: Vec<u8>,
    }
    let r: Raw = serde_json::from_str(json).map_err(|e| format!("not dcb's ETS JSON: {e}"))?;
    Ok(Ets {
        prio_tc: r.prio_tc,
        tc_bw: r.tc_bw,
        tc_tsa: r.tc_tsa,
        willing: r.willing,
    })
}

/// `dcb -j app show dev IF` (iproute2 >= 5.12, dcb/dcb_app.c): `{"dscp_prio":[[26,3],..]}`
/// among other selectors. Since iproute2 6.5 each pair may carry an extra string
/// (`[26,3," "]`): the first two integers are taken, anything after them ignored.
pub fn dcb_app_dscp(json: &str) -> Result<BTreeMap<u8, u8>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("not dcb's APP JSON: {e}"))?;
    let mut map = BTreeMap::new();
    let Some(pairs) = v.get("dscp_prio") else {
        return Ok(map);
    };
    for pair in pairs.as_array().ok_or("dscp_prio is not a list")? {
        let nums: Vec<u64> = pair
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        match nums.as_slice() {
            [d, p, ..] if *d < 64 && *p < 8 => {
                map.insert(*d as u8, *p as u8);
            }
            _ => return Err(format!("dscp_prio pair {pair} is not [dscp, priority]")),
        }
    }
    Ok(map)
}

/// `dcb -j dcbx show dev IF` (iproute2 >= 5.12): `{"host":true,"ieee":true}`, a key per
/// DCBX capability bit that is set.
pub fn dcb_dcbx(json: &str) -> Result<Vec<String>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("not dcb's DCBX JSON: {e}"))?;
    let obj = v.as_object().ok_or("dcbx is not an object")?;
    Ok(obj
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .map(|(k, _)| k.clone())
        .collect())
}

/// `dcb -j buffer show dev IF` (iproute2 >= 5.11): `{"prio_buffer":[..],
/// "buffer_size":[..bytes..],"total_size":N}`.
pub fn dcb_buffer(json: &str) -> Result<Buffer, String> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        prio_buffer: Vec<u8>,
        #[serde(default)]
        buffer_size: Vec<u64>,
        total_size: Option<u64>,
    }
    let r: Raw = serde_json::from_str(json).map_err(|e| format!("not dcb's buffer JSON: {e}"))?;
    Ok(Buffer {
        prio_buffer: r.prio_buffer,
        buffer_size_bytes: r.buffer_size,
        total_size_bytes: r.total_size,
    })
}

/// `dcb -V`: `dcb utility, iproute2-6.1.0`.
pub fn dcb_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with("iproute2"))
        .map(|w| w.trim_end_matches(',').to_string())
}

/// `ethtool --version`: `ethtool version 6.1`.
pub fn ethtool_version(text: &str) -> Option<String> {
    text.split_whitespace().nth(2).map(str::to_string)
}

/// Whether an ethtool version (`6.1`, `6.14`) prints `-m` as JSON (6.14 and later).
pub fn module_json_since(version: &str) -> bool {
    let mut it = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (major, minor) >= (6, 14)
}

/// `ethtool --json -I --show-fec IF` (JSON since ethtool 5.13, netlink/fec.c):
/// `[{"ifname":"eth2","config":["Auto","RS"],"active":["RS"],"statistics":{
/// "corrected_blocks":{"total":N,"lanes":[..]},"uncorrectable_blocks":{"total":N},
/// "corrected_bits":{"total":N}}}]`; statistics only where the driver gives them.
pub fn ethtool_fec(json: &str) -> Result<Fec, String> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("not ethtool's FEC JSON: {e}"))?;
    let o = v
        .as_array()
        .and_then(|a| a.first())
        .ok_or("ethtool printed no interface")?;
    let strings = |k: &str| -> Vec<String> {
        o.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let stat = |k: &str| {
        o.get("statistics").and_then(|s| s.get(k)).and_then(|s| {
            s.get("total")
                .and_then(Value::as_u64)
                .or_else(|| s.as_u64())
        })
    };
    Ok(Fec {
        configured: strings("config"),
        active: strings("active"),
        corrected_blocks: stat("corrected_blocks"),
        uncorrectable_blocks: stat("uncorrectable_blocks"),
        corrected_bits: stat("corrected_bits"),
    })
}

/// Driver counters worth keeping in a document: pause and PFC, discards and drops,
/// congestion (ECN, CNP), retransmission and PHY/FEC errors, link downs, and the bits
/// received a BER is over. An mlx5 port has a thousand counters; these are the few that
/// tell of loss. bnxt_en names its PFC time `pfc_pri{p}_{rx,tx}_duration_us` and its bits
/// received `rx_bits`.
pub fn relevant_counter(name: &str) -> bool {
    if name == "rx_bits" {
        return true;
    }
    const WORDS: &[&str] = &[
        "pause",
        "pfc",
        "discard",
        "drop",
        "storm",
        "ecn",
        "cnp",
        "retrans",
        "fec",
        "corrected",
        "symbol",
        "crc",
        "phy",
        "link_down",
        "out_of",
        "buffer",
        "err",
    ];
    let n = name.to_ascii_lowercase();
    WORDS.iter().any(|w| n.contains(w))
}

pub use super::module_eeprom::{ethtool_module_json, ethtool_module_text};

/// `Max locked memory  8388608  8388608  bytes` (or `unlimited`) from `/proc/self/limits`:
/// the soft limit, what `getrlimit(RLIMIT_MEMLOCK)` returns; `Ok(None)` = unlimited.
pub fn memlock(limits: &str) -> Result<Option<u64>, String> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .ok_or("no `Max locked memory` line")?;
    let soft = line
        .trim_start_matches("Max locked memory")
        .split_whitespace()
        .next()
        .ok_or("no soft limit")?;
    if soft == "unlimited" {
        return Ok(None);
    }
    soft.parse()
        .map(Some)
        .map_err(|_| format!("soft limit `{soft}` is not a number"))
}

/// `KEY=VALUE` lines of `/etc/nccl.conf` (comments `#`).
pub fn nccl_conf(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| k.starts_with("NCCL_"))
        .collect()
}

/// MLNX_OFED / DOCA mlx5_ib's `/sys/class/infiniband/DEV/tc/PORT/traffic_class`
/// (`traffic_class_show`): `Global tclass=%d\n` once a global class is written, then one
/// line per per-destination rule; nothing at all while neither is set.
pub fn nic_traffic_class(text: &str) -> Result<results::audit::NicTrafficClass, String> {
    let mut out = results::audit::NicTrafficClass::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.strip_prefix("Global tclass=") {
            Some(v) => {
                let v = v.trim();
                out.global =
                    Some(v.parse::<u8>().map_err(|_| {
                        format!("`Global tclass={v}` is not a traffic class (0..255)")
                    })?);
            }
            None => out.rules.push(line.to_string()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dcb_json_parses_and_app_pairs_are_read_leniently() {
        let p = dcb_pfc(r#"{"pfc_cap":8,"macsec_bypass":false,"delay":7,"prio_pfc":[false,false,false,true,false,false,false,false],"requests":[0,0,0,18342,0,0,0,0],"indications":[0,0,0,977,0,0,0,0]}"#).unwrap();
        assert_eq!(p.priorities(), [3]);
        assert_eq!(p.requests[3], 18342);
        let m = dcb_app_dscp(r#"{"dscp_prio":[[26,3," "],[48,6," "],[0,0]]}"#).unwrap();
        assert_eq!(m.get(&26), Some(&3));
        assert_eq!(m.get(&48), Some(&6));
        assert!(dcb_app_dscp(r#"{"dscp_prio":[[99,3]]}"#).is_err());
        assert_eq!(
            dcb_dcbx(r#"{"host":true,"ieee":true}"#).unwrap(),
            ["host", "ieee"]
        );
    }

    #[test]
    fn memlock_and_versions() {
        assert_eq!(
            memlock("Max locked memory         8388608              8388608              bytes\n")
                .unwrap(),
            Some(8388608)
        );
        assert_eq!(
            memlock("Max locked memory         unlimited            unlimited            bytes\n")
                .unwrap(),
            None
        );
        assert_eq!(
            dcb_version("dcb utility, iproute2-6.1.0\n").as_deref(),
            Some("iproute2-6.1.0")
        );
        assert!(!module_json_since("6.1") && module_json_since("6.14"));
    }
}
