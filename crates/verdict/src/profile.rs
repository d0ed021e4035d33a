//! Delivery profiles: the thresholds a contract names, as TOML (`profiles/*.toml`,
//! reference in `docs/profiles.md`). Each `[[check]]` selects result rows, reads one metric
//! from them and bounds it from below (`min`) or above (`max`).

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::metric::{Metric, RowKind};

/// Values of a check's `memory` selector.
pub const MEMORY_CLASSES: &[&str] = &["host", "cuda", "mixed", "any"];

/// A size given as bytes (`65536`) or as users type it (`"64K"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeSpec {
    Bytes(u64),
    Text(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: String,
    #[serde(default)]
    description: String,
    /// Link rate of one port, 10^9 bit/s: drawn on the bandwidth plot and used for
    /// collective efficiency when a result carries no link rate.
    line_rate_gbit_s: Option<f64>,
    /// Another profile (a built-in name or a path) whose figures this one takes: its
    /// `[[check]]`s and tables named by `keep`, its `[matrix]` and line rate unless given
    /// here. A nightly profile is the contract's checks a night can run, the figures kept
    /// in one home.
    extends: Option<String>,
    /// With `extends`: the base's check ids to keep, exactly or as `prefix*`; a table is
    /// kept by its checks' prefix (`inventory-*`, `lossless-*`, `load-*`, `isolation-*`).
    keep: Option<Vec<String>>,
    #[serde(default)]
    check: Vec<RawCheck>,
    matrix: Option<MatrixSettings>,
    inventory: Option<InventorySpec>,
    lossless: Option<LosslessSpec>,
    load: Option<LoadSpec>,
    isolation: Option<IsolationSpec>,
}

/// `[matrix]`: how the node-by-node matrix of a sweep is judged and its suspects named.
/// Every key is optional; `docs/profiles.md` explains each.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MatrixSettings {
    /// A link whose bandwidth is under this share of its rail's median is low.
    pub bw_below_median: f64,
    /// A link whose p50 latency is over this multiple of its rail's median is high.
    pub latency_above_median: f64,
    /// The same for p99 latency (off unless set).
    pub latency_p99_above_median: Option<f64>,
    /// A node (or one NIC of it) whose share of low or failed links reaches this is the
    /// suspect, rather than each of its links.
    pub suspect_share: f64,
    /// A node needs this many measured links to be named; with fewer its bad links are
    /// named instead (two nodes cannot tell which end is bad).
    pub min_links: u32,
    /// When more than this share of a rail's nodes are suspects on it, the rail itself
    /// (its switch or its configuration) is named instead.
    pub rail_share: f64,
    /// Known-good partners given to each suspect in `suspects.pairs`.
    pub retest_partners: u32,
    /// Worst links listed per test and size.
    pub worst_links: u32,
}

impl Default for MatrixSettings {
    fn default() -> Self {
        MatrixSettings {
            bw_below_median: 0.9,
            latency_above_median: 1.5,
            latency_p99_above_median: None,
            suspect_share: 0.75,
            min_links: 2,
            rail_share: 0.5,
            retest_partners: 2,
            worst_links: 20,
        }
    }
}

/// `[inventory]`: what every RDMA port must show. Each key given becomes a check
/// (`inventory-KEY`) that names every port that differs.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InventorySpec {
    /// Port state must contain this (`ACTIVE`).
    pub port_state: Option<String>,
    /// Physical state must contain this (`LinkUp`).
    pub phys_state: Option<String>,
    /// Port rate, 10^9 bit/s, exactly (a link that trained lower is the fault).
    pub rate_gbit_s: Option<f64>,
    /// PCIe link width of the adapter, at least (x16).
    pub pcie_width: Option<u32>,
    /// PCIe link speed of the adapter, GT/s, at least (16 for Gen4).
    pub pcie_speed_gt_s: Option<f64>,
    /// Active MTU of the port, bytes, exactly.
    pub active_mtu: Option<u32>,
    /// MTU of the netdev behind a RoCE port, exactly.
    pub netdev_mtu: Option<u32>,
    /// `"same"`: one firmware version on every adapter; anything else: that version.
    pub firmware: Option<String>,
    /// Largest rise of any error counter of a port allowed over the runs (0: none),
    /// from the counter deltas of the result rows and from the inventories of the
    /// documents in time order.
    pub error_counters_max_rise: Option<i64>,
    /// Counters judged by `error_counters_max_rise` (default: the error counters
    /// listed in docs/profiles.md).
    pub error_counters: Option<Vec<String>>,
    /// Devices the expectations apply to (default: those the ranks measured with, or
    /// every RDMA device where no rank names one).
    pub devices: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    id: String,
    description: String,
    metric: String,
    unit: String,
    min: Option<f64>,
    max: Option<f64>,
    tool: Option<String>,
    test: Option<String>,
    transport: Option<String>,
    collective: Option<String>,
    backend: Option<String>,
    size: Option<SizeSpec>,
    min_size: Option<SizeSpec>,
    max_size: Option<SizeSpec>,
    pair: Option<String>,
    memory: Option<String>,
    bidirectional: Option<bool>,
    #[serde(default)]
    each_pair: bool,
    /// scaling_efficiency only: the communicator size the others are compared with.
    base_ranks: Option<u32>,
}

/// A validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub line_rate_gbit_s: Option<f64>,
    pub checks: Vec<Check>,
    /// Where it was read from (for the report).
    pub source: String,
    /// How the node-by-node matrix is judged (`[matrix]`).
    pub matrix: MatrixSettings,
    /// What every port must show (`[inventory]`).
    pub inventory: Option<InventorySpec>,
    /// What the nodes' lossless-configuration audits must show (`[lossless]`).
    pub lossless: Option<LosslessSpec>,
    /// Bounds on the fabric under load (`[load]`), relative to its own quiet figures.
    pub load: Option<LoadSpec>,
    /// What the isolation sweep must show against the tenants (`[isolation]`).
    pub isolation: Option<IsolationSpec>,
}

/// Which bound a check sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Measured value must be at least this.
    Min(f64),
    /// Measured value must be at most this.
    Max(f64),
}

impl Bound {
    pub fn value(self) -> f64 {
        match self {
            Bound::Min(v) | Bound::Max(v) => v,
        }
    }
    pub fn holds(self, measured: f64) -> bool {
        match self {
            Bound::Min(v) => measured >= v,
            Bound::Max(v) => measured <= v,
        }
    }
    pub fn symbol(self) -> &'static str {
        match self {
            Bound::Min(_) => ">=",
            Bound::Max(_) => "<=",
        }
    }
}

/// Which rows a check looks at. `None` matches anything.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    pub tool: Option<String>,
    pub test: Option<String>,
    pub transport: Option<String>,
    pub collective: Option<String>,
    pub backend: Option<String>,
    pub min_size: Option<u64>,
    pub max_size: Option<u64>,
    /// Substring of the pair label (`host-a <-> host-b`) or of either host name.
    pub pair: Option<String>,
    /// Where the point-to-point buffers lived: `host` (both sides; the default), `cuda`
    /// (GPU memory on both sides: GPUDirect over verbs, staged over tcp), `mixed`, `any`.
    pub memory: Option<String>,
    /// Bandwidth rows measured in both directions at once (`true`) or one (`false`).
    pub bidirectional: Option<bool>,
    /// Judge every pair on its own (the worst pair decides) instead of the merged data.
    pub each_pair: bool,
}

impl Selector {
    /// The one size the selector takes (`size = ...`, or a range of one), if so.
    pub fn size_exact(&self) -> Option<u64> {
        self.min_size.filter(|m| Some(*m) == self.max_size)
    }

    pub fn size_ok(&self, size: u64) -> bool {
        self.min_size.is_none_or(|m| size >= m) && self.max_size.is_none_or(|m| size <= m)
    }

    /// Human form for reports: `send_lat tcp 2..64 B`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for v in [
            &self.tool,
            &self.test,
            &self.collective,
            &self.transport,
            &self.backend,
        ]
        .into_iter()
        .flatten()
        {
            parts.push(v.clone());
        }
        if let Some(m) = &self.memory {
            parts.push(format!("{m} memory"));
        }
        match self.bidirectional {
            Some(true) => parts.push("bidirectional".into()),
            Some(false) => parts.push("one direction".into()),
            None => {}
        }
        let fs = results::units::format_size;
        match (self.min_size, self.max_size) {
            (Some(a), Some(b)) if a == b => parts.push(format!("size {}", fs(a))),
            (Some(a), Some(b)) => parts.push(format!("sizes {}..{}", fs(a), fs(b))),
            (Some(a), None) => parts.push(format!("sizes >= {}", fs(a))),
            (None, Some(b)) => parts.push(format!("sizes <= {}", fs(b))),
            (None, None) => parts.push("all sizes".into()),
        }
        match &self.pair {
            Some(p) => parts.push(format!("pair {p}")),
            None if self.each_pair => parts.push("each pair".into()),
            None => parts.push("all pairs".into()),
        }
        parts.join(", ")
    }
}

/// One validated check.
#[derive(Debug, Clone)]
pub struct Check {
    pub id: String,
    pub description: String,
    pub metric: Metric,
    pub unit: &'static str,
    pub bound: Bound,
    pub select: Selector,
    /// For `scaling_efficiency`: the base communicator size (default: the smallest that
    /// spans two nodes, else the smallest).
    pub base_ranks: Option<u32>,
}

/// Reads a profile: a path to a TOML file, or the name of one shipped with fabcheck
/// (`roce-100g`, `loopback-demo`), looked up in `profiles/` beside the working directory
/// and then among the profiles built into the binary.
pub fn load(name_or_path: &str) -> Result<Profile> {
    load_at_depth(name_or_path, 0)
}

/// Where a profile named on the command line (or by `extends`) is: a file, the shipped
/// file in `profiles/` beside the working directory, or a built-in one.
enum Located {
    File(std::path::PathBuf),
    Builtin(&'static str, &'static str),
}

fn locate(name_or_path: &str) -> Option<Located> {
    let path = Path::new(name_or_path);
    if path.exists() {
        return Some(Located::File(path.to_path_buf()));
    }
    let local = Path::new("profiles").join(format!("{name_or_path}.toml"));
    if local.exists() {
        return Some(Located::File(local));
    }
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name_or_path)
        .map(|&(n, text)| Located::Builtin(n, text))
}

fn load_at_depth(name_or_path: &str, depth: usize) -> Result<Profile> {
    match locate(name_or_path) {
        Some(Located::File(path)) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Error::Profile(format!("{}: cannot read: {e}", path.display())))?;
            parse_at_depth(&text, &path.display().to_string(), depth)
        }
        Some(Located::Builtin(n, text)) => {
            parse_at_depth(text, &format!("built-in profile {n}"), depth)
        }
        None => Err(Error::Profile(format!(
            "no profile file {name_or_path} and no built-in profile of that name (built in: {})",
            BUILTIN.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The profiles shipped in `profiles/`, compiled in so the binary works anywhere.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "roce-100g",
        include_str!("../../../profiles/roce-100g.toml"),
    ),
    (
        "roce-100g-nightly",
        include_str!("../../../profiles/roce-100g-nightly.toml"),
    ),
    (
        "ib-ndr-400g",
        include_str!("../../../profiles/ib-ndr-400g.toml"),
    ),
    (
        "loopback-demo",
        include_str!("../../../profiles/loopback-demo.toml"),
    ),
    (
        "loopback-demo-mpi",
        include_str!("../../../profiles/loopback-demo-mpi.toml"),
    ),
    (
        "loopback-demo-cluster",
        include_str!("../../../profiles/loopback-demo-cluster.toml"),
    ),
];

/// Parses and validates profile text; `source` names it in every error.
pub fn parse(text: &str, source: &str) -> Result<Profile> {
    parse_at_depth(text, source, 0)
}

/// The tables `keep` can keep, by their checks' prefix.
const TABLES: [&str; 4] = ["inventory", "lossless", "load", "isolation"];

/// A profile extends at most this many others in a chain (a loop is caught by it).
const MAX_EXTENDS: usize = 4;

fn parse_at_depth(text: &str, source: &str, depth: usize) -> Result<Profile> {
    let mut raw: RawProfile = toml::from_str(text)
        .map_err(|e| Error::Profile(format!("{source}: {}", e.to_string().trim_end())))?;
    let err = |key: String, msg: String| Error::Profile(format!("{source}: key `{key}`: {msg}"));
    let base = base_of(&mut raw, depth, &err)?;
    let tables = raw.inventory.is_some()
        || raw.lossless.is_some()
        || raw.load.is_some()
        || raw.isolation.is_some();
    if raw.check.is_empty() && !tables && base.is_none() {
        return Err(err(
            "check".into(),
            "the profile has no [[check]] and no [inventory], [lossless], [load] or [isolation] \
             table: a profile without checks proves nothing"
                .into(),
        ));
    }
    if let Some(r) = raw.line_rate_gbit_s {
        if !(r.is_finite() && r > 0.0) {
            return Err(err(
                "line_rate_gbit_s".into(),
                format!("{r} is not a positive rate"),
            ));
        }
    }
    let kept = base.as_ref().map(|b| b.checks.clone()).unwrap_or_default();
    let mut seen: HashSet<String> = kept.iter().map(|c| c.id.clone()).collect();
    let own = raw
        .check
        .into_iter()
        .enumerate()
        .map(|(i, c)| read_check(i, c, &mut seen, &err))
        .collect::<Result<Vec<_>>>()?;
    let checks = kept.into_iter().chain(own).collect();
    let base = base.unwrap_or_else(Profile::empty);
    let matrix = raw.matrix.unwrap_or(base.matrix);
    check_matrix(&matrix, &err)?;
    check_load(raw.load.as_ref(), &err)?;
    check_inventory(raw.inventory.as_ref(), &err)?;
    check_lossless(raw.lossless.as_ref(), &err)?;
    if raw.isolation == Some(IsolationSpec::default()) {
        return Err(err(
            "isolation".into(),
            "the [isolation] table sets no bound: give breaches_max, unreached_max, partition_findings_max or neighbour_impact_max".into(),
        ));
    }
    Ok(Profile {
        name: raw.name,
        description: raw.description,
        line_rate_gbit_s: raw.line_rate_gbit_s.or(base.line_rate_gbit_s),
        checks,
        source: source.to_string(),
        matrix,
        inventory: raw.inventory.or(base.inventory),
        lossless: raw.lossless.or(base.lossless),
        load: raw.load.or(base.load),
        isolation: raw.isolation.or(base.isolation),
    })
}

/// The base profile of `extends`, cut to what `keep` names (its own tables then override
/// the base's). `keep` without `extends`, or `extends` without `keep`, is refused: the
/// first keeps nothing, the second would copy a contract silently.
fn base_of(raw: &mut RawProfile, depth: usize, err: ErrAt) -> Result<Option<Profile>> {
    let (extends, keep) = match (raw.extends.take(), raw.keep.take()) {
        (None, None) => return Ok(None),
        (Some(e), Some(k)) => (e, k),
        (None, Some(_)) => {
            return Err(err(
                "keep".into(),
                "needs `extends`: the profile to keep checks of".into(),
            ))
        }
        (Some(_), None) => {
            return Err(err(
                "keep".into(),
                "`extends` needs `keep`, the base's check ids to keep (`prefix*` allowed): \
                 to take every check, name the base profile itself"
                    .into(),
            ))
        }
    };
    if depth >= MAX_EXTENDS {
        return Err(err(
            "extends".into(),
            format!("more than {MAX_EXTENDS} profiles extend one another (a loop?): {extends}"),
        ));
    }
    // The base's own errors name the base; only its absence is said here.
    if locate(&extends).is_none() {
        return Err(err(
            "extends".into(),
            format!("no profile file {extends} and no built-in profile of that name"),
        ));
    }
    let base = load_at_depth(&extends, depth + 1)?;
    let matches = |p: &str, id: &str| match p.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => id == p,
    };
    // A table is kept by the prefix of its checks' ids (`lossless-*` keeps [lossless]).
    let keeps_table = |p: &str, name: &str| matches(p, &format!("{name}-*"));
    let table = |name: &str| keep.iter().any(|p| keeps_table(p, name));
    if let Some(p) = keep.iter().find(|p| {
        !base.checks.iter().any(|c| matches(p, &c.id)) && !TABLES.iter().any(|t| keeps_table(p, t))
    }) {
        return Err(err(
            "keep".into(),
            format!(
                "`{p}` names no check of {extends} (its checks: {}; its tables as inventory-*, lossless-*, load-*, isolation-*)",
                base.checks.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    Ok(Some(Profile {
        checks: base
            .checks
            .into_iter()
            .filter(|c| keep.iter().any(|p| matches(p, &c.id)))
            .collect(),
        inventory: base.inventory.filter(|_| table("inventory")),
        lossless: base.lossless.filter(|_| table("lossless")),
        load: base.load.filter(|_| table("load")),
        isolation: base.isolation.filter(|_| table("isolation")),
        ..base
    }))
}

impl Profile {
    /// No checks, no tables, the default matrix: what a profile without a base extends.
    fn empty() -> Profile {
        Profile {
            name: String::new(),
            description: String::new(),
            line_rate_gbit_s: None,
            checks: Vec::new(),
            source: String::new(),
            matrix: MatrixSettings::default(),
            inventory: None,
            lossless: None,
            load: None,
            isolation: None,
        }
    }
}

/// Builds a profile error naming the key (`err(key, message)`).
type ErrAt<'a> = &'a dyn Fn(String, String) -> Error;

/// One `[[check]]`: its id unique, its metric known and its unit the metric's, exactly
/// one bound, a size or a size range, and only the selectors its metric's rows have.
fn read_check(i: usize, c: RawCheck, seen: &mut HashSet<String>, err: ErrAt) -> Result<Check> {
    let key = |k: &str| format!("check[{i}].{k} (id \"{}\")", c.id);
    if c.id.trim().is_empty() {
        return Err(err(format!("check[{i}].id"), "empty id".into()));
    }
    if !seen.insert(c.id.clone()) {
        return Err(err(key("id"), "duplicate id".into()));
    }
    let (metric, unit) = metric_of(&c, &key, err)?;
    let bound = bound_of(&c, &key, err)?;
    let (min_size, max_size) = size_range(&c, &key, err)?;
    check_selectors(&c, metric, &key, err)?;
    Ok(Check {
        base_ranks: c.base_ranks,
        id: c.id,
        description: c.description,
        metric,
        unit,
        bound,
        select: Selector {
            tool: c.tool,
            test: c.test,
            transport: c.transport,
            collective: c.collective,
            backend: c.backend,
            min_size,
            max_size,
            pair: c.pair,
            memory: c.memory,
            bidirectional: c.bidirectional,
            each_pair: c.each_pair,
        },
    })
}

/// A check's metric and its unit, which must be the metric's own.
fn metric_of(
    c: &RawCheck,
    key: &dyn Fn(&str) -> String,
    err: ErrAt,
) -> Result<(Metric, &'static str)> {
    let (metric, unit) = Metric::parse(&c.metric).ok_or_else(|| {
        err(
            key("metric"),
            format!(
                "unknown metric `{}`; known: {}",
                c.metric,
                crate::metric::ALL
                    .iter()
                    .map(|m| m.0)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    if c.unit != unit {
        return Err(err(
            key("unit"),
            format!("metric {} is measured in {unit}, not {}", c.metric, c.unit),
        ));
    }
    Ok((metric, unit))
}

/// Exactly one of `min` and `max`, a finite number.
fn bound_of(c: &RawCheck, key: &dyn Fn(&str) -> String, err: ErrAt) -> Result<Bound> {
    let bound = match (c.min, c.max) {
        (Some(v), None) => Bound::Min(v),
        (None, Some(v)) => Bound::Max(v),
        _ => return Err(err(key("min"), "give exactly one of `min` or `max`".into())),
    };
    if !bound.value().is_finite() {
        return Err(err(key("min/max"), "bound is not a finite number".into()));
    }
    Ok(bound)
}

/// `size` (an exact size) or a `min_size`/`max_size` range, in bytes or with a unit.
fn size_range(
    c: &RawCheck,
    key: &dyn Fn(&str) -> String,
    err: ErrAt,
) -> Result<(Option<u64>, Option<u64>)> {
    let size = |k: &str, s: &Option<SizeSpec>| -> Result<Option<u64>> {
        match s {
            None => Ok(None),
            Some(SizeSpec::Bytes(b)) => Ok(Some(*b)),
            Some(SizeSpec::Text(t)) => results::units::parse_size(t)
                .map(Some)
                .map_err(|e| err(key(k), e)),
        }
    };
    let exact = size("size", &c.size)?;
    let (mut min_size, mut max_size) = (
        size("min_size", &c.min_size)?,
        size("max_size", &c.max_size)?,
    );
    if let Some(s) = exact {
        if min_size.is_some() || max_size.is_some() {
            return Err(err(
                key("size"),
                "give `size` or a `min_size`/`max_size` range, not both".into(),
            ));
        }
        min_size = Some(s);
        max_size = Some(s);
    }
    if let (Some(a), Some(b)) = (min_size, max_size) {
        if a > b {
            return Err(err(key("min_size"), format!("{a} is above max_size {b}")));
        }
    }
    Ok((min_size, max_size))
}

/// Only the selectors the metric's rows have: memory on pair rows, `bidirectional` on
/// bandwidth rows, `collective` on collective rows, `base_ranks` on scaling efficiency.
fn check_selectors(
    c: &RawCheck,
    metric: Metric,
    key: &dyn Fn(&str) -> String,
    err: ErrAt,
) -> Result<()> {
    if let Some(m) = &c.memory {
        if !MEMORY_CLASSES.contains(&m.as_str()) {
            return Err(err(
                key("memory"),
                format!(
                    "unknown memory `{m}`; known: {} (host: both sides host memory, cuda: \
                     both GPU memory, mixed: one of each, any: every row)",
                    MEMORY_CLASSES.join(", ")
                ),
            ));
        }
        if metric.rows() == RowKind::Collective {
            return Err(err(
                key("memory"),
                format!(
                    "metric {} reads collective rows, which have no memory selector",
                    c.metric
                ),
            ));
        }
    }
    if c.bidirectional.is_some()
        && !matches!(
            metric.rows(),
            RowKind::Bandwidth | RowKind::Counters | RowKind::Any
        )
    {
        return Err(err(
            key("bidirectional"),
            format!("metric {} does not read bandwidth rows", c.metric),
        ));
    }
    if c.collective.is_some() && !matches!(metric.rows(), RowKind::Collective | RowKind::Any) {
        return Err(err(
            key("collective"),
            format!("metric {} is not a collective metric", c.metric),
        ));
    }
    if let Some(b) = c.base_ranks {
        if metric != Metric::ScalingEfficiency {
            return Err(err(
                key("base_ranks"),
                "only a scaling_efficiency check has a base communicator size".into(),
            ));
        }
        if b < 2 {
            return Err(err(
                key("base_ranks"),
                format!("{b}: a collective needs at least 2 ranks"),
            ));
        }
    }
    Ok(())
}

/// `[matrix]`: shares in (0, 1], ratios above 1, at least one link.
fn check_matrix(m: &MatrixSettings, err: ErrAt) -> Result<()> {
    let in_range = |key: &str, v: f64, lo: f64, hi: f64| {
        if v.is_finite() && v > lo && v <= hi {
            Ok(())
        } else {
            Err(err(
                format!("matrix.{key}"),
                format!("{v} is outside ({lo}, {hi}]"),
            ))
        }
    };
    in_range("bw_below_median", m.bw_below_median, 0.0, 1.0)?;
    in_range("latency_above_median", m.latency_above_median, 0.999, 1e6)?;
    if let Some(v) = m.latency_p99_above_median {
        in_range("latency_p99_above_median", v, 0.999, 1e6)?;
    }
    in_range("suspect_share", m.suspect_share, 0.0, 1.0)?;
    in_range("rail_share", m.rail_share, 0.0, 1.0)?;
    if m.min_links == 0 {
        return Err(err("matrix.min_links".into(), "must be at least 1".into()));
    }
    Ok(())
}

/// `[load]`: at least one bound, each positive, Jain's index at most 1.
fn check_load(load: Option<&LoadSpec>, err: ErrAt) -> Result<()> {
    if let Some(l) = load {
        if l == &LoadSpec::default() {
            return Err(err(
                "load".into(),
                "the [load] table sets no bound: give at least one key".into(),
            ));
        }
        for (key, v) in l.bounds() {
            if !(v.is_finite() && v > 0.0) {
                return Err(err(
                    format!("load.{key}"),
                    format!("{v}: must be a positive number"),
                ));
            }
        }
        if l.incast_fairness_min.is_some_and(|v| v > 1.0) {
            return Err(err(
                "load.incast_fairness_min".into(),
                "Jain's index is at most 1".into(),
            ));
        }
    }
    Ok(())
}

/// `[inventory]`: at least one expectation; counters named with a bound.
fn check_inventory(inventory: Option<&InventorySpec>, err: ErrAt) -> Result<()> {
    if let Some(inv) = inventory {
        if inv == &InventorySpec::default() {
            return Err(err(
                "inventory".into(),
                "the [inventory] table sets no expectation: give at least one key".into(),
            ));
        }
        if inv.error_counters.is_some() && inv.error_counters_max_rise.is_none() {
            return Err(err(
                "inventory.error_counters".into(),
                "names counters but no error_counters_max_rise bound".into(),
            ));
        }
    }
    Ok(())
}

/// `[lossless]`: only facets the audit compares.
fn check_lossless(lossless: Option<&LosslessSpec>, err: ErrAt) -> Result<()> {
    if let Some(same) = lossless.and_then(|l| l.same.as_ref()) {
        if let Some(bad) = same.iter().find(|f| !LOSSLESS_FACETS.contains(&f.as_str())) {
            return Err(err(
                "lossless.same".into(),
                format!(
                    "{bad:?} is not a facet the audit compares; the facets are {}",
                    LOSSLESS_FACETS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The facets of a port `[lossless].same` may name: compared across every Ethernet port
/// (diagnosis::audit reads each). An unknown name is refused when the profile is read: taken,
/// it would judge nothing and read MISSING with a hint about the audit, not the typo.
pub const LOSSLESS_FACETS: &[&str] = &[
    "pfc", "trust", "dscp_map", "cnp_dscp", "dcqcn", "fec", "mtu", "firmware", "nccl",
];

/// `[lossless]` of a profile (docs/profiles.md).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LosslessSpec {
    /// Priorities that must carry PFC, exactly (RoCE usually `[3]`).
    pub lossless_priorities: Option<Vec<u8>>,
    /// Facets every Ethernet port must show the same (default: all of [`LOSSLESS_FACETS`]).
    pub same: Option<Vec<String>>,
    /// The suite's DSCP lands on one of the lossless priorities on every port.
    #[serde(default)]
    pub suite_dscp_lossless: bool,
    /// ECN (notification and reaction point) on every lossless priority.
    #[serde(default)]
    pub ecn_on_lossless: bool,
    /// Every lane's receive power at or above its module's low warning threshold.
    #[serde(default)]
    pub rx_power_above_warning: bool,
    /// No lane's receive power more than this many dB below the median of every audited
    /// lane of the cluster (same optics, same reach: a dirty or bent link stands out long
    /// before it crosses its own warning).
    pub rx_power_outlier_db: Option<f64>,
}

/// `[load]` of a profile (docs/profiles.md): bounds on `bench-congestion` runs, each
/// against the same cluster's quiet figures. Each key given is one check (`load-*`).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// Every canary test's impact on the mean (loaded over isolated latency, isolated
    /// over loaded bandwidth) at most this.
    pub impact_mean_max: Option<f64>,
    /// The same on the 99th percentile (bandwidth: its low tail).
    pub impact_p99_max: Option<f64>,
    /// Jain's fairness index of every incast round's senders at least this.
    pub incast_fairness_min: Option<f64>,
    /// Every incast round's aggregate at least this percentage of the receiver's line rate.
    pub incast_line_rate_min_pct: Option<f64>,
    /// The victim flow's bandwidth alone over during the incast at most this.
    pub victim_bandwidth_impact_max: Option<f64>,
    /// The victim's 8 B p99 during the incast over alone at most this.
    pub victim_latency_impact_max: Option<f64>,
    /// Every expert-parallel run's scale-out bandwidth per rank (`ep_network_bw`) at least
    /// this percentage of the same cluster's pairwise bandwidth (the all-pairs sweep's
    /// median one-way pair between nodes at its largest size), not a fixed number.
    pub ep_network_of_pairwise_min_pct: Option<f64>,
}

/// `[isolation]` of a profile (docs/tenants.md): what `bench-lat --pattern isolation` must
/// show against the tenants (`aggregate --tenants`, else the plan's `[[tenant]]` tables).
/// Each key given is one check (`isolation-*`); a count of ordered rank pairs (a node and its rail: one pair per rail between two nodes).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IsolationSpec {
    /// Pairs of two tenants with an attempt the fabric delivered (a breach), at most this.
    pub breaches_max: Option<u64>,
    /// Pairs of one tenant with an attempt that did not reach its peer, at most this.
    pub unreached_max: Option<u64>,
    /// InfiniBand ports whose P_Key table breaks their tenant's promise (its partition
    /// missing or with the wrong membership, another tenant's, the default as a full
    /// member), at most this.
    pub partition_findings_max: Option<u64>,
    /// Noisy neighbours: each canary test's impact factor (loaded against isolated) when
    /// another tenant's nodes run the congestors, at most this, per ordered pair of tenants
    /// (`bench-congestion --canary-tenant A --congestor-tenant B`); a bandwidth test also at
    /// most 100 / the canary tenant's `ets_share_percent`.
    pub neighbour_impact_max: Option<f64>,
}

impl LoadSpec {
    /// The keys given, by name.
    fn bounds(&self) -> Vec<(&'static str, f64)> {
        [
            ("impact_mean_max", self.impact_mean_max),
            ("impact_p99_max", self.impact_p99_max),
            ("incast_fairness_min", self.incast_fairness_min),
            ("incast_line_rate_min_pct", self.incast_line_rate_min_pct),
            (
                "victim_bandwidth_impact_max",
                self.victim_bandwidth_impact_max,
            ),
            ("victim_latency_impact_max", self.victim_latency_impact_max),
            (
                "ep_network_of_pairwise_min_pct",
                self.ep_network_of_pairwise_min_pct,
            ),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
name = "t"
[[check]]
id = "lat"
description = "small messages"
metric = "latency_p99"
unit = "us"
max = 5.0
test = "send_lat"
max_size = "64"
"#;

    #[test]
    fn shipped_profiles_parse() {
        for (name, text) in BUILTIN {
            let p = parse(text, name).unwrap_or_else(|e| panic!("{e}"));
            assert!(!p.checks.is_empty());
        }
    }

    /// The nightly takes roce-100g's figures, never its own copies: every kept check is
    /// the contract's, bound for bound; what a night cannot run is left out.
    #[test]
    fn the_nightly_profile_is_the_contracts_checks_a_night_runs() {
        let night = load("roce-100g-nightly").unwrap();
        let contract = load("roce-100g").unwrap();
        for c in &night.checks {
            let same = contract.checks.iter().find(|k| k.id == c.id).unwrap();
            assert_eq!(same.bound, c.bound, "{}", c.id);
            assert_eq!(
                format!("{:?}", same.select),
                format!("{:?}", c.select),
                "{}",
                c.id
            );
        }
        let ids: Vec<&str> = night.checks.iter().map(|c| c.id.as_str()).collect();
        assert!(!ids.contains(&"allreduce-scaling"), "{ids:?}");
        assert!(
            ids.contains(&"sweep-no-suspect") && ids.contains(&"write-bw-large"),
            "{ids:?}"
        );
        assert_eq!(night.checks.len(), contract.checks.len() - 1);
        assert!(night.load.is_none(), "the load stage is the delivery's");
        assert_eq!(night.inventory, contract.inventory);
        assert_eq!(night.lossless, contract.lossless);
        assert_eq!(night.matrix, contract.matrix);
        assert_eq!(night.line_rate_gbit_s, contract.line_rate_gbit_s);
    }

    #[test]
    fn extends_and_keep_are_refused_when_they_say_nothing_certain() {
        let base = "name = \"n\"\nextends = \"roce-100g\"\n";
        let e = parse(base, "n.toml").unwrap_err().to_string();
        assert!(e.contains("`extends` needs `keep`"), "{e}");
        let e = parse("name = \"n\"\nkeep = [\"sweep-*\"]\n", "n.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs `extends`"), "{e}");
        let e = parse(
            &format!("{base}keep = [\"sweep-*\", \"swep-*\"]\n"),
            "n.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`swep-*` names no check of roce-100g"), "{e}");
        let e = parse(&format!("{base}keep = [\"lat\"]\n"), "n.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`lat` names no check"), "{e}");
        // Its own check may not take a kept check's id.
        let own = format!(
            "{base}keep = [\"sweep-*\"]\n{}",
            OK.replace("name = \"t\"", "")
                .replace("\"lat\"", "\"sweep-coverage\"")
        );
        let e = parse(&own, "n.toml").unwrap_err().to_string();
        assert!(e.contains("duplicate id"), "{e}");
        let e = parse(
            "name = \"n\"\nextends = \"nosuch\"\nkeep = [\"a\"]\n",
            "n.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no built-in profile of that name"), "{e}");
    }

    #[test]
    fn a_derived_profile_adds_checks_and_overrides_tables() {
        let text = format!(
            "name = \"n\"\nextends = \"roce-100g\"\nkeep = [\"sweep-coverage\", \"lossless-*\"]\n{}\n[matrix]\nbw_below_median = 0.8\n",
            OK.replace("name = \"t\"", "")
        );
        let p = parse(&text, "n.toml").unwrap();
        let ids: Vec<&str> = p.checks.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["sweep-coverage", "lat"]);
        assert!(p.lossless.is_some() && p.inventory.is_none());
        assert_eq!(p.matrix.bw_below_median, 0.8);
        assert_eq!(p.line_rate_gbit_s, Some(100.0));
    }

    #[test]
    fn a_small_profile_parses() {
        let p = parse(OK, "t.toml").unwrap();
        assert_eq!(p.checks[0].bound, Bound::Max(5.0));
        assert_eq!(p.checks[0].select.max_size, Some(64));
    }

    #[test]
    fn errors_name_the_source_and_key() {
        let e = parse(&OK.replace("\"us\"", "\"ms\""), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.toml") && e.contains("check[0].unit"), "{e}");
        let e = parse(&OK.replace("latency_p99", "latency_p98"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("check[0].metric"), "{e}");
        let e = parse(&OK.replace("max = 5.0", "max = 5.0\nmin = 1.0"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one"), "{e}");
        let e = parse(&OK.replace("max_size", "max_sise"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_sise") && e.contains("t.toml"), "{e}");
        let e = parse(&OK.replace("\"64\"", "\"lots\""), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("check[0].max_size"), "{e}");
        let e = parse("name = \"x\"", "t.toml").unwrap_err().to_string();
        assert!(e.contains("no [[check]]"), "{e}");
        let e = parse(&format!("{OK}base_ranks = 16\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("base_ranks") && e.contains("scaling_efficiency"),
            "{e}"
        );
        let scaling = OK
            .replace("latency_p99", "scaling_efficiency")
            .replace("\"us\"", "\"%\"")
            .replace("max = 5.0", "min = 82.0");
        assert_eq!(
            parse(&format!("{scaling}base_ranks = 16\n"), "t.toml")
                .unwrap()
                .checks[0]
                .base_ranks,
            Some(16)
        );
        let e = parse(&format!("{scaling}base_ranks = 1\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 2 ranks"), "{e}");
        let e = parse(
            &OK.replace("max_size", "memory = \"gpu\"\nmax_size"),
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("check[0].memory") && e.contains("cuda"), "{e}");
        let p = parse(
            &OK.replace("max_size", "memory = \"cuda\"\nmax_size"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(p.checks[0].select.memory.as_deref(), Some("cuda"));
        assert!(p.checks[0].select.describe().contains("cuda memory"));
    }

    #[test]
    fn a_load_table_is_read_and_bad_bounds_are_refused() {
        let p = parse(
            &format!("{OK}[load]\nimpact_mean_max = 1.5\nincast_fairness_min = 0.9\n"),
            "t.toml",
        )
        .unwrap();
        let l = p.load.unwrap();
        assert_eq!(l.impact_mean_max, Some(1.5));
        assert_eq!(l.incast_fairness_min, Some(0.9));
        assert_eq!(l.impact_p99_max, None);
        for (body, says) in [
            ("", "sets no bound"),
            ("impact_mean_max = -1\n", "load.impact_mean_max"),
            ("incast_fairness_min = 1.2\n", "at most 1"),
            ("impact_mean = 1.5\n", "impact_mean"),
        ] {
            let e = parse(&format!("{OK}[load]\n{body}"), "t.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(says) && e.contains("t.toml"), "{body}: {e}");
        }
        let roce = load("roce-100g").unwrap();
        assert!(roce.load.is_some_and(|l| l.impact_mean_max.is_some()));
    }

    #[test]
    fn an_unknown_lossless_facet_is_refused() {
        let p = parse(
            &format!("{OK}[lossless]\nsame = [\"pfc\", \"mtu\"]\n"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(p.lossless.unwrap().same.unwrap(), ["pfc", "mtu"]);
        let e = parse(
            &format!("{OK}[lossless]\nsame = [\"pfc\", \"ecn\"]\n"),
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("lossless.same") && e.contains("\"ecn\"") && e.contains("dcqcn"),
            "{e}"
        );
    }
}
