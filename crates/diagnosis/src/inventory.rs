//! The fabric inventory across documents: every RDMA port of every host as the runs saw
//! it (state, rate, MTU, firmware, PCIe link, error counters), the checks of a profile's
//! `[inventory]` table (each names every port that differs), and for a suspect, how its
//! ports differ from the other nodes' ports of the same device.
//!
//! A link that trained at a lower rate, an adapter at PCIe x8, mixed firmware or an MTU
//! left at 1500 explain a slow link without a byte sent; Meta's GCM compares such facts
//! with a manifest. Here the manifest is the profile, and for suspects the majority.

use std::collections::{BTreeMap, HashMap};

use results::natural::natural_cmp;
use verdict::input::Loaded;
use verdict::judge::{port_outcome, Outcome, PortCheck};
use verdict::profile::InventorySpec;

/// One port as the documents saw it (the latest document's facts; counters from the
/// first and the latest).
#[derive(Debug, Clone, Default)]
pub struct Port {
    pub host: String,
    pub device: String,
    pub port: u32,
    pub state: String,
    pub phys_state: Option<String>,
    pub rate: String,
    pub rate_gbit_s: Option<f64>,
    pub active_mtu: Option<u32>,
    pub netdev_mtu: Option<u32>,
    pub netdev_speed_mbit_s: Option<u64>,
    pub firmware: Option<String>,
    pub pcie_width: Option<u32>,
    pub pcie_max_width: Option<u32>,
    pub pcie_speed_gt_s: Option<f64>,
    pub pcie_max_speed_gt_s: Option<f64>,
    pub numa_node: Option<i32>,
    pub counters_first: BTreeMap<String, i64>,
    pub counters_last: BTreeMap<String, i64>,
    /// A rank measured with this device.
    pub measured: bool,
}

impl Port {
    /// `node0003:mlx5_2 port 1`.
    pub fn name(&self) -> String {
        format!("{}:{} port {}", self.host, self.device, self.port)
    }

    /// Rise of `counter` between the first and the latest inventory.
    fn rise(&self, counter: &str) -> i64 {
        match (
            self.counters_first.get(counter),
            self.counters_last.get(counter),
        ) {
            (Some(a), Some(b)) => b.saturating_sub(*a),
            _ => 0,
        }
    }
}

/// Every port of every host, in host (natural), device and port order.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub ports: Vec<Port>,
}

/// Reads the ports out of every document's host facts, documents in time order.
pub fn collect(docs: &[Loaded]) -> Inventory {
    let mut order: Vec<&Loaded> = docs.iter().collect();
    order.sort_by(|a, b| a.doc.started_at.cmp(&b.doc.started_at));
    let mut ports: BTreeMap<(String, String, u32), Port> = BTreeMap::new();
    let mut used: std::collections::HashSet<(String, String)> = Default::default();
    for d in order {
        let mut seen_here: std::collections::HashSet<(String, String, u32)> = Default::default();
        for h in &d.doc.hosts {
            if let Some(dev) = &h.device {
                used.insert((h.hostname.clone(), dev.clone()));
            }
            for dev in &h.rdma_devices {
                for p in &dev.ports {
                    let key = (h.hostname.clone(), dev.name.clone(), p.port);
                    if !seen_here.insert(key.clone()) {
                        continue;
                    }
                    let pci = dev.pci.as_ref();
                    let entry = ports.entry(key).or_insert_with(|| Port {
                        counters_first: p.counters.clone(),
                        ..Default::default()
                    });
                    *entry = Port {
                        host: h.hostname.clone(),
                        device: dev.name.clone(),
                        port: p.port,
                        state: p.state.clone(),
                        phys_state: p.phys_state.clone(),
                        rate: p.rate.clone(),
                        rate_gbit_s: p.rate_gbit_s,
                        active_mtu: p.active_mtu,
                        netdev_mtu: p.netdev_mtu,
                        netdev_speed_mbit_s: p.netdev_speed_mbit_s,
                        firmware: dev.fw_ver.clone(),
                        pcie_width: pci.and_then(|x| x.current_width),
                        pcie_max_width: pci.and_then(|x| x.max_width),
                        pcie_speed_gt_s: pci.and_then(|x| x.current_speed_gt_s),
                        pcie_max_speed_gt_s: pci.and_then(|x| x.max_speed_gt_s),
                        numa_node: dev.numa_node,
                        counters_first: std::mem::take(&mut entry.counters_first),
                        counters_last: p.counters.clone(),
                        measured: false,
                    };
                }
            }
        }
    }
    let mut ports: Vec<Port> = ports.into_values().collect();
    for p in &mut ports {
        p.measured = used.contains(&(p.host.clone(), p.device.clone()));
    }
    ports.sort_by(|a, b| {
        natural_cmp(&a.host, &b.host)
            .then_with(|| natural_cmp(&a.device, &b.device))
            .then(a.port.cmp(&b.port))
    });
    Inventory { ports }
}

fn num(v: f64) -> String {
    verdict::judge::format_value(v)
}

/// One fact of a port, as text (for comparing and showing), by name.
type Fact = (&'static str, fn(&Port) -> Option<String>);

const FACTS: &[Fact] = &[
    ("state", |p| Some(p.state.clone()).filter(|s| !s.is_empty())),
    ("physical state", |p| p.phys_state.clone()),
    ("rate", |p| Some(p.rate.clone()).filter(|s| !s.is_empty())),
    ("active MTU", |p| p.active_mtu.map(|v| v.to_string())),
    ("netdev MTU", |p| p.netdev_mtu.map(|v| v.to_string())),
    ("netdev speed", |p| {
        p.netdev_speed_mbit_s.map(|v| format!("{v} Mb/s"))
    }),
    ("firmware", |p| p.firmware.clone()),
    ("PCIe width", |p| p.pcie_width.map(|v| format!("x{v}"))),
    ("PCIe speed", |p| {
        p.pcie_speed_gt_s.map(|v| format!("{} GT/s", num(v)))
    }),
];

impl Inventory {
    /// The ports of `host` (and of `device`, when given).
    pub fn of<'a>(
        &'a self,
        host: &'a str,
        device: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Port> {
        self.ports
            .iter()
            .filter(move |p| p.host == host && device.is_none_or(|d| d == p.device))
    }

    /// How the ports of `host` (`device`) differ from the other hosts' ports of the same
    /// device: each fact against the value most other hosts show, and the PCIe link
    /// against its own maximum. Empty when nothing differs or nothing is known.
    pub fn differences(&self, host: &str, device: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.of(host, device) {
            let others: Vec<&Port> = self
                .ports
                .iter()
                .filter(|o| o.host != p.host && o.device == p.device && o.port == p.port)
                .collect();
            for (name, get) in FACTS {
                let Some(mine) = get(p) else { continue };
                let mut counts: HashMap<String, usize> = HashMap::new();
                for o in &others {
                    if let Some(v) = get(o) {
                        *counts.entry(v).or_default() += 1;
                    }
                }
                let common = counts
                    .into_iter()
                    .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
                if let Some((v, n)) = common {
                    if v != mine {
                        out.push(format!(
                            "{}:{} {name} {mine} (others: {v} on {n} host(s))",
                            p.host, p.device
                        ));
                    }
                }
            }
            if let (Some(w), Some(m)) = (p.pcie_width, p.pcie_max_width) {
                if w < m {
                    out.push(format!("{}:{} PCIe link at x{w} of x{m}", p.host, p.device));
                }
            }
            if let (Some(s), Some(m)) = (p.pcie_speed_gt_s, p.pcie_max_speed_gt_s) {
                if s < m {
                    out.push(format!(
                        "{}:{} PCIe link at {} of {} GT/s",
                        p.host,
                        p.device,
                        num(s),
                        num(m)
                    ));
                }
            }
        }
        out
    }

    /// Non-zero error counters of the ports of `host` (`device`), absolute, as the
    /// latest inventory read them.
    pub fn error_counters(&self, host: &str, device: Option<&str>) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for p in self.of(host, device) {
            for (k, v) in &p.counters_last {
                if *v != 0 && verdict::rows::is_error_counter(k) {
                    out.insert(format!("{}:{k}", p.device), *v);
                }
            }
        }
        out
    }
}

/// A port that does not show what the profile expects, and what it shows.
struct Miss {
    port: String,
    shows: String,
}

/// Judges one expectation over `ports`: `fact` reads what a port shows (`None`: not
/// reported), `ok` decides.
fn expect(
    id: &str,
    description: String,
    bound: String,
    ports: &[&Port],
    fact: impl Fn(&Port) -> Option<String>,
    ok: impl Fn(&Port) -> Option<bool>,
) -> Outcome {
    let mut judged = 0;
    let mut misses: Vec<Miss> = Vec::new();
    for p in ports {
        let Some(good) = ok(p) else { continue };
        judged += 1;
        if !good {
            misses.push(Miss {
                port: p.name(),
                shows: fact(p).unwrap_or_else(|| "nothing".into()),
            });
        }
    }
    let check = PortCheck {
        id: format!("inventory-{id}"),
        description,
        metric: "inventory",
        selector: "every RDMA port the runs measured with",
        bound,
        none_judged: "no port reports this: run the benchmarks on RDMA devices (TCP runs carry no port inventory)",
    };
    let misses = misses
        .into_iter()
        .map(|m| format!("{}: {}", m.port, m.shows))
        .collect();
    port_outcome(check, judged, misses)
}

/// The checks of a profile's `[inventory]` table, in a fixed order. `row_errors` gives
/// the error-counter deltas the result rows recorded per (host, device).
pub fn checks(
    spec: &InventorySpec,
    inv: &Inventory,
    row_errors: &BTreeMap<(String, String), BTreeMap<String, verdict::rows::ErrorSum>>,
) -> Vec<Outcome> {
    let any_measured = inv.ports.iter().any(|p| p.measured);
    let ports: Vec<&Port> = inv
        .ports
        .iter()
        .filter(|p| match &spec.devices {
            Some(list) => list.contains(&p.device),
            None => !any_measured || p.measured,
        })
        .collect();
    let mut out = Vec::new();
    if let Some(want) = &spec.port_state {
        out.push(expect(
            "port-state",
            format!("Every port's state is {want}"),
            format!("state {want}"),
            &ports,
            |p| Some(p.state.clone()),
            |p| (!p.state.is_empty()).then(|| p.state.contains(want.as_str())),
        ));
    }
    if let Some(want) = &spec.phys_state {
        out.push(expect(
            "phys-state",
            format!("Every port's physical state is {want}"),
            format!("physical state {want}"),
            &ports,
            |p| p.phys_state.clone(),
            |p| p.phys_state.as_ref().map(|s| s.contains(want.as_str())),
        ));
    }
    if let Some(want) = spec.rate_gbit_s {
        out.push(expect(
            "rate",
            format!("Every port trained at {} Gb/s", num(want)),
            format!("= {} Gb/s", num(want)),
            &ports,
            |p| Some(p.rate.clone()),
            |p| p.rate_gbit_s.map(|r| (r - want).abs() <= want * 0.005),
        ));
    }
    out.extend(adapter_checks(spec, &ports));
    if let Some(want) = &spec.firmware {
        out.push(firmware(want, &ports));
    }
    if let Some(max) = spec.error_counters_max_rise {
        out.push(error_counters(spec, max, &ports, row_errors));
    }
    out
}

/// The adapters' PCIe link (width, speed) and the ports' MTUs (active, netdev), as the
/// profile asks for them.
fn adapter_checks(spec: &InventorySpec, ports: &[&Port]) -> Vec<Outcome> {
    let mut out = Vec::new();
    if let Some(want) = spec.pcie_width {
        out.push(expect(
            "pcie-width",
            format!("Every adapter's PCIe link at x{want} or wider"),
            format!(">= x{want}"),
            ports,
            |p| {
                p.pcie_width.map(|w| match p.pcie_max_width {
                    Some(m) => format!("x{w} (max x{m})"),
                    None => format!("x{w}"),
                })
            },
            |p| p.pcie_width.map(|w| w >= want),
        ));
    }
    if let Some(want) = spec.pcie_speed_gt_s {
        out.push(expect(
            "pcie-speed",
            format!("Every adapter's PCIe link at {} GT/s or faster", num(want)),
            format!(">= {} GT/s", num(want)),
            ports,
            |p| p.pcie_speed_gt_s.map(|s| format!("{} GT/s", num(s))),
            |p| p.pcie_speed_gt_s.map(|s| s + 1e-9 >= want),
        ));
    }
    if let Some(want) = spec.active_mtu {
        out.push(expect(
            "active-mtu",
            format!("Every port's active MTU is {want}"),
            format!("= {want} B"),
            ports,
            |p| p.active_mtu.map(|m| format!("{m} B")),
            |p| p.active_mtu.map(|m| m == want),
        ));
    }
    if let Some(want) = spec.netdev_mtu {
        out.push(expect(
            "netdev-mtu",
            format!("Every RoCE port's netdev MTU is {want}"),
            format!("= {want} B"),
            ports,
            |p| p.netdev_mtu.map(|m| format!("{m} B")),
            |p| p.netdev_mtu.map(|m| m == want),
        ));
    }
    out
}

/// `firmware`: every adapter on `want`, or with `same` on the version most run.
fn firmware(want: &str, ports: &[&Port]) -> Outcome {
    let expected = if want == "same" {
        // The version most adapters run; the others differ.
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in ports {
            if let Some(f) = &p.firmware {
                *counts.entry(f.as_str()).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(f, _)| f.to_string())
    } else {
        Some(want.to_string())
    };
    let bound = match (want, &expected) {
        ("same", Some(v)) => format!("one version on every adapter ({v} on most)"),
        ("same", None) => "one version on every adapter".into(),
        (v, _) => format!("= {v}"),
    };
    expect(
        "firmware",
        if want == "same" {
            "One firmware version on every adapter".into()
        } else {
            format!("Every adapter runs firmware {want}")
        },
        bound,
        ports,
        |p| p.firmware.clone(),
        |p| {
            p.firmware
                .as_ref()
                .map(|f| expected.as_deref().is_some_and(|e| e == f))
        },
    )
}

/// `error-counters`: the link error counters' rise on every port over the runs (the
/// counters' own deltas plus those the result rows recorded), at most `max`.
fn error_counters(
    spec: &InventorySpec,
    max: i64,
    ports: &[&Port],
    row_errors: &BTreeMap<(String, String), BTreeMap<String, verdict::rows::ErrorSum>>,
) -> Outcome {
    let names: Vec<String> = spec.error_counters.clone().unwrap_or_else(|| {
        results::pma::ERROR_FIELDS
            .iter()
            .map(|(n, _)| n.to_string())
            .collect()
    });
    // A field at its ceiling no longer counts: its rise is unknown, so the port cannot
    // show that it meets the bound (a 16-bit error counter pegged at 65535 is a finding
    // on a delivery day in any case). So for a row's delta that was only a lower bound
    // (cleared or pegged during a run): under the bound it proves nothing.
    let rises = |p: &Port| -> Option<Vec<String>> {
        let rows = row_errors.get(&(p.host.clone(), p.device.clone()));
        if p.counters_last.is_empty() && rows.is_none() {
            return None;
        }
        let mut v = Vec::new();
        for n in &names {
            let row = rows.and_then(|m| m.get(n)).copied().unwrap_or_default();
            let r = p.rise(n).saturating_add(row.delta);
            let pegged = results::pma::width(n)
                .zip(results::pma::ceiling(n))
                .filter(|(_, top)| p.counters_last.get(n) == Some(top));
            if let Some((bits, top)) = pegged {
                v.push(format!(
                    "{n} at its {bits}-bit ceiling {top} (rises unseen: at least +{r}; clear the counters, perfquery -x -R, and measure again)"
                ));
            } else if row.at_least {
                v.push(if r > max {
                    format!("{n} at least +{r}")
                } else {
                    format!(
                        "{n} at least +{r} (cleared or at its ceiling during a run: the rise is unknown; measure again without clearing the counters)"
                    )
                });
            } else if r > max {
                v.push(format!("{n} +{r}"));
            }
        }
        Some(v)
    };
    expect(
        "error-counters",
        format!("Link error counters rise by at most {max} on every port over the runs"),
        format!("rise <= {max}"),
        ports,
        |p| rises(p).map(|v| v.join(", ")),
        |p| rises(p).map(|v| v.is_empty()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth::sweep::{sweep_doc, Fault, InventoryFault, SweepSpec};
    use verdict::judge::Status;

    fn loaded(doc: &results::Document) -> Loaded {
        Loaded::from_text("s.json", &serde_json::to_string(doc).unwrap()).unwrap()
    }

    fn spec() -> InventorySpec {
        InventorySpec {
            port_state: Some("ACTIVE".into()),
            phys_state: Some("LinkUp".into()),
            rate_gbit_s: Some(100.0),
            pcie_width: Some(16),
            pcie_speed_gt_s: Some(16.0),
            active_mtu: Some(4096),
            netdev_mtu: Some(9000),
            firmware: Some("same".into()),
            error_counters_max_rise: Some(0),
            ..Default::default()
        }
    }

    fn by_id<'a>(v: &'a [Outcome], id: &str) -> &'a Outcome {
        v.iter()
            .find(|o| o.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    }

    #[test]
    fn a_healthy_inventory_passes_every_expectation() {
        let inv = collect(&[loaded(&sweep_doc(&SweepSpec::bandwidth(4, 2)))]);
        assert_eq!(inv.ports.len(), 8);
        let out = checks(&spec(), &inv, &BTreeMap::new());
        assert_eq!(out.len(), 9);
        for o in &out {
            assert_eq!(o.status, Status::Pass, "{o:?}");
            assert_eq!(o.observations, 8);
        }
        assert!(inv.differences("node0001", None).is_empty());
    }

    #[test]
    fn each_check_names_the_one_port_that_differs() {
        let mut s = SweepSpec::bandwidth(5, 2);
        let on = |node, rail, what| Fault::Inventory { node, rail, what };
        s.faults = vec![
            on(1, 0, InventoryFault::PcieWidth(8)),
            on(2, 1, InventoryFault::RateGbit(50.0)),
            on(3, 0, InventoryFault::Firmware("22.36.1010".into())),
            on(4, 1, InventoryFault::PortDown),
            on(0, 1, InventoryFault::Mtu(1024)),
        ];
        let inv = collect(&[loaded(&sweep_doc(&s))]);
        let out = checks(&spec(), &inv, &BTreeMap::new());
        let failing = |id: &str, port: &str| {
            let o = by_id(&out, id);
            assert_eq!(o.status, Status::Fail, "{o:?}");
            assert_eq!(o.measured, Some(1.0), "{o:?}");
            assert!(o.worst_at.starts_with(port), "{id}: {}", o.worst_at);
        };
        failing(
            "inventory-pcie-width",
            "node0001:mlx5_0 port 1: x8 (max x16)",
        );
        failing("inventory-rate", "node0002:mlx5_1 port 1: 50 Gb/sec");
        failing("inventory-firmware", "node0003:mlx5_0 port 1: 22.36.1010");
        failing("inventory-port-state", "node0004:mlx5_1 port 1: 1: DOWN");
        failing(
            "inventory-phys-state",
            "node0004:mlx5_1 port 1: 3: Disabled",
        );
        failing("inventory-active-mtu", "node0000:mlx5_1 port 1: 1024 B");
        assert_eq!(by_id(&out, "inventory-pcie-speed").status, Status::Pass);
        let d = inv.differences("node0001", None);
        assert!(
            d.iter().any(|x| x.contains("PCIe width x8 (others: x16")),
            "{d:?}"
        );
        assert!(
            d.iter().any(|x| x.contains("PCIe link at x8 of x16")),
            "{d:?}"
        );
        assert!(inv.differences("node0001", Some("mlx5_1")).is_empty());
    }

    fn sum(delta: i64, at_least: bool) -> verdict::rows::ErrorSum {
        verdict::rows::ErrorSum { delta, at_least }
    }

    #[test]
    fn rising_error_counters_are_found_across_documents_and_rows() {
        let first = sweep_doc(&SweepSpec::bandwidth(3, 1));
        let mut later_spec = SweepSpec::bandwidth(3, 1);
        later_spec.faults = vec![Fault::Inventory {
            node: 2,
            rail: 0,
            what: InventoryFault::SymbolErrors(12),
        }];
        let mut later = sweep_doc(&later_spec);
        later.started_at = "2026-01-02T00:00:00Z".into();
        let inv = collect(&[loaded(&later), loaded(&first)]);
        let spec = InventorySpec {
            error_counters_max_rise: Some(0),
            ..Default::default()
        };
        let out = checks(&spec, &inv, &BTreeMap::new());
        assert_eq!(out[0].status, Status::Fail);
        assert_eq!(out[0].worst_at, "node0002:mlx5_0 port 1: symbol_error +12");
        let mut rows = BTreeMap::new();
        rows.insert(
            ("node0001".to_string(), "mlx5_0".to_string()),
            [("link_downed".to_string(), sum(1, false))]
                .into_iter()
                .collect(),
        );
        let out = checks(&spec, &inv, &rows);
        assert!(out[0]
            .worst_at
            .contains("node0001:mlx5_0 port 1: link_downed +1"));
        // A row's lower bound: over the bound it fails as "at least"; under it (a counter
        // cleared in a run, its delta then 0 or more) it proves nothing and fails too.
        rows.insert(
            ("node0000".to_string(), "mlx5_0".to_string()),
            [
                ("link_downed".to_string(), sum(3, true)),
                ("port_rcv_errors".to_string(), sum(0, true)),
            ]
            .into_iter()
            .collect(),
        );
        let out = checks(&spec, &inv, &rows);
        assert!(
            out[0].worst_at.contains(
                "node0000:mlx5_0 port 1: link_downed at least +3, port_rcv_errors at least +0 (cleared or at its ceiling during a run"
            ),
            "{}",
            out[0].worst_at
        );
        let lax = InventorySpec {
            error_counters_max_rise: Some(5),
            ..Default::default()
        };
        let out = checks(&lax, &inv, &rows);
        assert!(
            out[0].worst_at.contains("link_downed at least +3 (cleared")
                && !out[0].worst_at.contains("node0001"),
            "{}",
            out[0].worst_at
        );
        // A field pegged at its ceiling in both inventories rose by 0 as far as anyone can
        // see: the port cannot show that it meets the bound, and the text says why.
        let mut pegged = [first.clone(), later.clone()];
        for d in &mut pegged {
            for h in &mut d.hosts {
                if h.hostname == "node0000" {
                    for dev in &mut h.rdma_devices {
                        for p in &mut dev.ports {
                            p.counters.insert("symbol_error".into(), 65_535);
                        }
                    }
                }
            }
        }
        let inv = collect(&[loaded(&pegged[1]), loaded(&pegged[0])]);
        let out = checks(&spec, &inv, &BTreeMap::new());
        assert_eq!(out[0].status, Status::Fail);
        assert!(
            out[0].worst_at.contains(
                "node0000:mlx5_0 port 1: symbol_error at its 16-bit ceiling 65535 (rises unseen: at least +0"
            ),
            "{}",
            out[0].worst_at
        );
        // Without RDMA ports nothing can be judged: MISSING, never PASS.
        let tcp = SweepSpec {
            transport: "tcp".into(),
            ..SweepSpec::bandwidth(3, 1)
        };
        let inv = collect(&[loaded(&sweep_doc(&tcp))]);
        assert_eq!(
            checks(&spec, &inv, &BTreeMap::new())[0].status,
            Status::Missing
        );
    }
}
