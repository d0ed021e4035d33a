//! A transceiver's diagnostics as `ethtool -m` prints them: identity, temperature, and per
//! lane the laser bias, transmitted and received optical power, with the receive-power
//! thresholds the module carries in its own EEPROM.
//!
//! Two things real modules print that a reader must not take at face value:
//! - CMIS modules (QSFP-DD, OSFP, QSFP112) print 8 channels per bank whatever their lane
//!   count (ethtool's `cmis.c`), so a 400G DR4/XDR4 module shows lanes 5-8 at `0.000 mA`
//!   and `0.0000 mW / -inf dBm`; an SFF-8636 QSFP28 run as one lane shows three such. These
//!   are not lanes, and are left out ([`Module::idle_lanes`] counts them).
//! - The threshold lines share their first words with the readings (`Laser output power
//!   high alarm threshold` beside SFP's `Laser output power`): a threshold is never a
//!   reading.
//!
//! Samples: tests/corpus/real-outputs/ethtool-m (SOURCES.md there).

use std::collections::{BTreeMap, BTreeSet};

use results::audit::{Module, Thresholds};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// One lane's readings, by channel number (1-based as ethtool prints them).
#[derive(Default)]
struct Lanes {
    rx: BTreeMap<usize, f64>,
    tx: BTreeMap<usize, f64>,
    bias: BTreeMap<usize, f64>,
    /// Channels whose receiver reports loss of signal.
    rx_los: BTreeSet<usize>,
}

impl Lanes {
    /// Channels the module reports but does not use: no laser bias, no light sent or
    /// received, no loss of signal flagged, while another channel is lit. A lane that
    /// should carry light but receives none has its loss-of-signal flag set (when the
    /// module implements it) and stays; a module with no lit channel at all is dark, not
    /// idle, and every channel stays judged.
    fn idle(&self) -> BTreeSet<usize> {
        let dark = |m: &BTreeMap<usize, f64>, c: usize| m.get(&c).is_none_or(|v| *v <= 0.0);
        let unlit = |m: &BTreeMap<usize, f64>, c: usize| m.get(&c).is_none_or(|v| !v.is_finite());
        let channels: BTreeSet<usize> = self
            .rx
            .keys()
            .chain(self.tx.keys())
            .chain(self.bias.keys())
            .copied()
            .collect();
        let quiet = |c: usize| dark(&self.bias, c) && unlit(&self.tx, c) && unlit(&self.rx, c);
        if channels.iter().all(|&c| quiet(c)) {
            return BTreeSet::new();
        }
        channels
            .into_iter()
            .filter(|&c| self.bias.contains_key(&c) || self.tx.contains_key(&c))
            .filter(|&c| quiet(c))
            .filter(|c| !self.rx_los.contains(c))
            .collect()
    }

    /// The lanes in use into `m`, the idle ones counted.
    fn into_module(mut self, m: &mut Module) {
        let idle = self.idle();
        for c in &idle {
            self.rx.remove(c);
            self.tx.remove(c);
            self.bias.remove(c);
        }
        m.idle_lanes = idle.len() as u32;
        m.rx_power_dbm = self.rx.into_values().collect();
        m.tx_power_dbm = self.tx.into_values().collect();
        m.tx_bias_ma = self.bias.into_values().collect();
    }
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

/// A loss-of-signal line: `None`, a single `Yes`/`No` (SFP), or one flag per lane
/// (`[ Yes, No, No, No ]`, ethtool's `module_show_lane_status`): the flagged channels.
fn flagged_lanes(value: &str) -> BTreeSet<usize> {
    let v = value.trim().trim_start_matches('[').trim_end_matches(']');
    v.split(',')
        .map(str::trim)
        .enumerate()
        .filter(|(_, f)| f.eq_ignore_ascii_case("yes"))
        .map(|(i, _)| i + 1)
        .collect()
}

/// `ethtool -m IF` text (ethtool before 6.14; sff-8636/qsfp.c, sfpdiag.c, cmis.c print
/// `%-41s : value` lines): identifier, vendor, temperature, per-channel rx/tx power and
/// bias, receiver loss of signal, and the `Laser rx power {high,low} {alarm,warning}
/// threshold` lines.
pub fn ethtool_module_text(text: &str) -> Result<Module, String> {
    let mut m = Module::default();
    let mut lanes = Lanes::default();
    let mut t = Thresholds::default();
    let mut any = false;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(" : ").or_else(|| line.split_once(':')) else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let kl = k.to_ascii_lowercase();
        any = true;
        let flag = kl.contains("alarm") || kl.contains("warning") || kl.contains("threshold");
        if kl == "identifier" {
            m.identifier = Some(v.to_string());
        } else if kl == "vendor name" {
            m.vendor = Some(v.to_string());
        } else if kl == "vendor pn" {
            m.part_number = Some(v.to_string());
        } else if kl == "transceiver type" {
            m.compliance.push(v.to_string());
        } else if kl == "module temperature" {
            m.temperature_c = v.split_whitespace().next().and_then(|w| w.parse().ok());
        } else if kl == "rx loss of signal" {
            lanes.rx_los = flagged_lanes(v);
        } else if kl.contains("threshold") && (kl.contains("rx power") || kl.contains("receiver")) {
            let slot = match (kl.contains("high"), kl.contains("alarm")) {
                (true, true) => &mut t.high_alarm,
                (false, true) => &mut t.low_alarm,
                (true, false) => &mut t.high_warning,
                (false, false) => &mut t.low_warning,
            };
            *slot = dbm(v);
        } else if flag {
            // Alarm and warning flags and the other thresholds: not readings.
        } else if kl.starts_with("rcvr signal")
            || kl.starts_with("receiver signal")
            || kl.starts_with("rx power")
        {
            if let Some(p) = dbm(v) {
                lanes.rx.insert(channel(k).unwrap_or(1), p);
            }
        } else if kl.starts_with("transmit avg optical power")
            || kl.starts_with("laser output power")
        {
            if let Some(p) = dbm(v) {
                lanes.tx.insert(channel(k).unwrap_or(1), p);
            }
        } else if kl.starts_with("laser tx bias current") || kl.starts_with("laser bias current") {
            if let Some(ma) = v.split_whitespace().next().and_then(|w| w.parse().ok()) {
                lanes.bias.insert(channel(k).unwrap_or(1), ma);
            }
        }
    }
    if !any {
        return Err("ethtool -m printed nothing to read".into());
    }
    lanes.into_module(&mut m);
    if t != Thresholds::default() {
        m.rx_power_thresholds = Some(t);
    }
    Ok(m)
}

/// A JSON object's members in the order printed, duplicates kept. ethtool 6.14's module
/// JSON prints `module_temperature` twice (the reading, then an object of thresholds);
/// read into a map, the last would win and the reading would be lost.
struct Members(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl Members {
    /// Every value printed under `key`, in order.
    fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.0.iter().filter(move |(k, _)| k == key).map(|(_, v)| v)
    }

    fn first<'a>(&'a self, key: &'a str) -> Option<&'a Value> {
        self.all(key).next()
    }
}

/// `ethtool --json -m IF` (ethtool >= 6.14, module_info.json): `[{"identifier":..,
/// "vendor_name":..,"vendor_pn":..,"module_temperature":45.3,"rx_power":{"values":[mW..],
/// "type":".."},"transmit_avg_optical_power":[mW..],"laser_tx_bias_current":[mA..],
/// "laser_rx_power":{"high_alarm_threshold":mW,..}}]`. Powers are mW: converted to dBm.
/// Members are read in order with duplicates kept: the first numeric
/// `module_temperature` is the reading.
pub fn ethtool_module_json(json: &str) -> Result<Module, String> {
    let modules: Vec<Members> =
        serde_json::from_str(json).map_err(|e| format!("not ethtool's module JSON: {e}"))?;
    let o = modules.first().ok_or("ethtool printed no module")?;
    let text = |k: &str| o.first(k).and_then(|v| v.as_str().map(str::to_string));
    let by_channel = |v: Option<&Value>, f: &dyn Fn(f64) -> Option<f64>| -> BTreeMap<usize, f64> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .enumerate()
                    .filter_map(|(i, x)| x.as_f64().and_then(f).map(|d| (i + 1, d)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let lanes = Lanes {
        rx: by_channel(
            o.first("rx_power").and_then(|r| r.get("values")),
            &mw_to_dbm,
        ),
        tx: by_channel(o.first("transmit_avg_optical_power"), &mw_to_dbm),
        bias: by_channel(o.first("laser_tx_bias_current"), &Some),
        rx_los: o
            .first("rx_loss_of_signal")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .enumerate()
                    .filter(|(_, f)| f.as_bool() == Some(true))
                    .map(|(i, _)| i + 1)
                    .collect()
            })
            .unwrap_or_default(),
    };
    let th = o.first("laser_rx_power").map(|t| {
        let g = |k: &str| t.get(k).and_then(Value::as_f64).and_then(mw_to_dbm);
        Thresholds {
            high_alarm: g("high_alarm_threshold"),
            low_alarm: g("low_alarm_threshold"),
            high_warning: g("high_warning_threshold"),
            low_warning: g("low_warning_threshold"),
        }
    });
    let mut m = Module {
        identifier: text("identifier_description").or_else(|| text("identifier")),
        vendor: text("vendor_name"),
        part_number: text("vendor_pn"),
        temperature_c: o.all("module_temperature").find_map(Value::as_f64),
        // The text label `Transceiver type` as ethtool's JSON names it, once a code.
        compliance: o
            .all("transceiver_type")
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        rx_power_thresholds: th,
        ..Module::default()
    };
    lanes.into_module(&mut m);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn json_keeps_the_first_temperature_of_two() {
        let j = r#"[{"identifier_description":"QSFP28","module_temperature":41.5,
            "module_temperature":{"high_alarm_threshold":75.0,"low_alarm_threshold":-5.0},
            "rx_power":{"values":[0.9,0.0,0.0,0.0],"type":"Rcvr signal avg optical power"},
            "transmit_avg_optical_power":[0.8,0.0,0.0,0.0],
            "laser_tx_bias_current":[6.5,0.0,0.0,0.0]}]"#;
        let m = ethtool_module_json(j).unwrap();
        assert_eq!(m.temperature_c, Some(41.5));
        // One lane in use, three idle: not lanes.
        assert_eq!(m.rx_power_dbm.len(), 1);
        assert_eq!(m.idle_lanes, 3);
    }

    #[test]
    fn loss_of_signal_keeps_a_dark_lane() {
        assert_eq!(flagged_lanes("None"), BTreeSet::new());
        assert_eq!(flagged_lanes("[ No, Yes, No, No ]"), BTreeSet::from([2]));
        let t = "Rx loss of signal : [ No, Yes, No, No ]\n\
                 Laser tx bias current (Channel 1) : 6.5 mA\n\
                 Laser tx bias current (Channel 2) : 0.000 mA\n\
                 Transmit avg optical power (Channel 1) : 0.8 mW / -0.97 dBm\n\
                 Transmit avg optical power (Channel 2) : 0.0000 mW / -inf dBm\n\
                 Rcvr signal avg optical power (Channel 1) : 0.9 mW / -0.46 dBm\n\
                 Rcvr signal avg optical power (Channel 2) : 0.0000 mW / -inf dBm\n";
        let m = ethtool_module_text(t).unwrap();
        assert_eq!(m.rx_power_dbm.len(), 2, "{m:?}");
        assert_eq!(m.idle_lanes, 0);
    }
}
