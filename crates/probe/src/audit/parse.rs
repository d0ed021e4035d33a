//! Parsers of the tools' outputs, each saying which tool version its format is from.

use std::collections::BTreeMap;

use results::audit::{Buffer, Ets, Fec, Module, Pfc, Thresholds};
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
/// congestion (ECN, CNP), retransmission and PHY/FEC errors, link downs. An mlx5 port
/// has a thousand counters; these are the few that tell of loss.
pub fn relevant_counter(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "pause",
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

/// `-0.66` from `0.8585 mW / -0.66 dBm`; mW values convert (`10 log10 mW`).
fn dbm(value: &str) -> Option<f64> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if let Some(i) = words.iter().position(|w| *w == "dBm") {
        if i > 0 {
            return match words[i - 1] {
                "-inf" => Some(f64::NEG_INFINITY),
                w => w.parse().ok(),
            };
        }
    }
    let i = words.iter().position(|w| *w == "mW")?;
    mw_to_dbm(words.get(i.checked_sub(1)?)?.parse().ok()?)
}

fn mw_to_dbm(mw: f64) -> Option<f64> {
    Some(if mw <= 0.0 {
        f64::NEG_INFINITY
    } else {
        10.0 * mw.log10()
    })
}

/// `Laser tx bias current (Channel 1)` -> 1 (both `(Channel N)` and `(Chan N)` forms).
fn channel(key: &str) -> Option<usize> {
    let open = key.rfind('(')?;
    let inner = key[open + 1..].trim_end_matches(')');
    inner.split_whitespace().last()?.parse().ok()
}

/// `ethtool -m IF` text (ethtool before 6.14; sff-8636/qsfp.c, sfpdiag.c, cmis.c print
/// `%-41s : value` lines): identifier, vendor, temperature, per-channel rx/tx power and
/// bias, and the `Laser rx power {high,low} {alarm,warning} threshold` lines.
pub fn ethtool_module_text(text: &str) -> Result<Module, String> {
    let mut m = Module::default();
    let mut rx: BTreeMap<usize, f64> = BTreeMap::new();
    let mut tx: BTreeMap<usize, f64> = BTreeMap::new();
    let mut bias: BTreeMap<usize, f64> = BTreeMap::new();
    let mut t = Thresholds::default();
    let mut any = false;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(" : ").or_else(|| line.split_once(":")) else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let kl = k.to_ascii_lowercase();
        any = true;
        if kl == "identifier" {
            m.identifier = Some(v.to_string());
        } else if kl == "vendor name" {
            m.vendor = Some(v.to_string());
        } else if kl == "vendor pn" {
            m.part_number = Some(v.to_string());
        } else if kl == "module temperature" {
            m.temperature_c = v.split_whitespace().next().and_then(|w| w.parse().ok());
        } else if kl.contains("threshold") && (kl.contains("rx power") || kl.contains("receiver")) {
            let val = dbm(v);
            let slot = match (kl.contains("high"), kl.contains("alarm")) {
                (true, true) => &mut t.high_alarm,
                (false, true) => &mut t.low_alarm,
                (true, false) => &mut t.high_warning,
                (false, false) => &mut t.low_warning,
            };
            *slot = val;
        } else if (kl.starts_with("rcvr signal")
            || kl.starts_with("receiver signal")
            || kl.starts_with("rx power"))
            && !kl.contains("alarm")
            && !kl.contains("warning")
        {
            if let (Some(c), Some(p)) = (channel(k), dbm(v)) {
                rx.insert(c, p);
            } else if let Some(p) = dbm(v) {
                rx.insert(1, p);
            }
        } else if kl.starts_with("transmit avg optical power")
            || kl.starts_with("laser output power")
        {
            if let Some(p) = dbm(v) {
                tx.insert(channel(k).unwrap_or(1), p);
            }
        } else if kl.starts_with("laser tx bias current")
            || kl.starts_with("laser bias current")
                && !kl.contains("alarm")
                && !kl.contains("warning")
        {
            if let Some(ma) = v.split_whitespace().next().and_then(|w| w.parse().ok()) {
                bias.insert(channel(k).unwrap_or(1), ma);
            }
        }
    }
    if !any {
        return Err("ethtool -m printed nothing to read".into());
    }
    m.rx_power_dbm = rx.into_values().collect();
    m.tx_power_dbm = tx.into_values().collect();
    m.tx_bias_ma = bias.into_values().collect();
    if t != Thresholds::default() {
        m.rx_power_thresholds = Some(t);
    }
    Ok(m)
}

/// `ethtool --json -m IF` (ethtool >= 6.14, module_info.json): `[{"identifier":..,
/// "vendor_name":..,"vendor_pn":..,"module_temperature":45.3,"rx_power":{"values":[mW..],
/// "type":".."},"transmit_avg_optical_power":[mW..],"laser_tx_bias_current":[mA..],
/// "laser_rx_power":{"high_alarm_threshold":mW,..}}]`. Powers are mW: converted to dBm.
pub fn ethtool_module_json(json: &str) -> Result<Module, String> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("not ethtool's module JSON: {e}"))?;
    let o = v
        .as_array()
        .and_then(|a| a.first())
        .ok_or("ethtool printed no module")?;
    let text = |k: &str| o.get(k).and_then(|v| v.as_str().map(str::to_string));
    let mw_list = |v: Option<&Value>| -> Vec<f64> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_f64)
                    .filter_map(mw_to_dbm)
                    .collect()
            })
            .unwrap_or_default()
    };
    let th = o.get("laser_rx_power").map(|t| {
        let g = |k: &str| t.get(k).and_then(Value::as_f64).and_then(mw_to_dbm);
        Thresholds {
            high_alarm: g("high_alarm_threshold"),
            low_alarm: g("low_alarm_threshold"),
            high_warning: g("high_warning_threshold"),
            low_warning: g("low_warning_threshold"),
        }
    });
    Ok(Module {
        identifier: text("identifier_description").or_else(|| text("identifier")),
        vendor: text("vendor_name"),
        part_number: text("vendor_pn"),
        temperature_c: o.get("module_temperature").and_then(Value::as_f64),
        rx_power_dbm: mw_list(o.get("rx_power").and_then(|r| r.get("values"))),
        tx_power_dbm: mw_list(o.get("transmit_avg_optical_power")),
        tx_bias_ma: o
            .get("laser_tx_bias_current")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default(),
        rx_power_thresholds: th,
    })
}

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
    fn module_text_reads_lanes_and_thresholds() {
        let t = "\tIdentifier                                : 0x11 (QSFP28)\n\
                 \tVendor name                               : Mellanox\n\
                 \tModule temperature                        : 45.30 degrees C / 113.54 degrees F\n\
                 \tRcvr signal avg optical power(Channel 1)  : 0.9720 mW / -0.12 dBm\n\
                 \tRcvr signal avg optical power(Channel 2)  : 0.0000 mW / -inf dBm\n\
                 \tLaser rx power low alarm threshold        : 0.0407 mW / -13.90 dBm\n\
                 \tLaser rx power low warning threshold      : 0.0813 mW / -10.90 dBm\n";
        let m = ethtool_module_text(t).unwrap();
        assert_eq!(m.rx_power_dbm[0], -0.12);
        assert!(m.rx_power_dbm[1].is_infinite());
        let th = m.rx_power_thresholds.unwrap();
        assert_eq!(th.low_alarm, Some(-13.9));
        assert_eq!(th.low_warning, Some(-10.9));
        assert_eq!(m.temperature_c, Some(45.3));
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
