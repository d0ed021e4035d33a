//! `aggregate trend HISTORY...`: the nightly history as a monthly (or yearly) report.
//!
//! Night after night `compare` asks "worse than the last good night?". The people who run
//! a fabric for months also ask: is it drifting (a p99 up 2% a week never trips a 5%
//! night-to-night tolerance), which links got worse since delivery, which nights failed.
//! For every key figure (latency p50/p99 per test and size, bandwidth, CPU per 100 Gb/s,
//! link loss, collective busbw and efficiency) the trend follows its value night after
//! night beside the delivery baseline and the profile bound, finds slow drifts with a
//! fitted slope over a window ([`drift`]), marks the nights that failed the profile or
//! regressed against the last good night (the rule of `compare`, replayed as the nightly
//! job applies it), marks disturbed nights (`results::quality`), and lists the pairs and
//! nodes that changed most since the first night.
//!
//! The bundle (`trend.html` with inline SVG, `trend.md`, `summary.json`, `plots/`) is
//! signed like an acceptance report. The nights' result files are not copied (a year is
//! gigabytes): `summary.json` lists every one with its SHA-256, so the signature covers
//! exactly which evidence was read.
//!
//! One night is in memory at a time: what is kept of it is its figures, its pairs'
//! figures and one latency curve, a few hundred kilobytes, so a year of a 1024-GPU
//! cluster fits easily.

pub mod drift;
pub mod history;
pub mod series;

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::SystemTime;

use plotters::style::RGBColor;
use serde::Serialize;

use crate::bundle::Bundle;
use crate::compare::{self, Point};
use crate::error::{Error, Result};
use crate::input::{self, BadInput};
use crate::judge;
use crate::plots::{self, Figure, Marks, Shape, XAxis};
use crate::profile::{self, Profile};
use crate::report::PhaseClock;
use crate::sign;
use crate::tables;
use crate::templates::Templates;

use drift::Rule;
use history::Night;
use series::PairKey;

/// Options of `aggregate trend`.
#[derive(Debug, Clone)]
pub struct Options {
    pub history: Vec<PathBuf>,
    /// Profile whose bounds are drawn and whose verdict marks failed nights.
    pub profile: Option<String>,
    /// Delivery results (the acceptance run); default: the first night of the history.
    pub baseline: Option<PathBuf>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub rule: Rule,
    /// Night-to-night regression rule, as `compare`.
    pub tolerance_pct: f64,
    pub sigmas: f64,
    pub out: PathBuf,
    pub templates: Option<PathBuf>,
    pub sign: Option<PathBuf>,
    pub identity: String,
    pub force: bool,
    pub title: Option<String>,
    pub skip_bad: bool,
    /// Pairs and nodes listed as changed most.
    pub top: usize,
    /// Most series plotted (flagged ones first).
    pub max_plots: usize,
    /// Test (and size) whose latency distribution is overlaid over nights.
    pub dist: Option<(String, Option<u64>)>,
}

/// Names `aggregate trend` writes into its output directory.
const OWNED: &[&str] = &[
    "trend.html",
    "trend.md",
    "summary.json",
    "plots",
    sign::MANIFEST,
    sign::SIGNATURE,
    sign::ALLOWED_SIGNERS,
];

/// One night, as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NightRow {
    pub id: String,
    /// RFC 3339.
    pub date: String,
    #[serde(skip)]
    pub day: f64,
    /// `PASS`/`FAIL` against the profile; `None` without one.
    pub verdict: Option<&'static str>,
    pub failed_checks: Vec<String>,
    /// The night compared with (the last good one before it).
    pub compared_with: Option<String>,
    /// Figures that regressed against it.
    pub regressed: Vec<String>,
    /// Those of them that had not regressed the night before: what changed tonight.
    pub new_regressions: Vec<String>,
    pub disturbed: bool,
    /// `ok`, `disturbed` or `unknown` (no quality record).
    pub quality: &'static str,
    pub quality_reasons: Vec<String>,
    pub files: usize,
    pub skipped: usize,
    /// `FAIL, 3 regressions, disturbed` or empty: what the report marks.
    pub marks: String,
}

impl NightRow {
    fn failed(&self) -> bool {
        self.verdict == Some("FAIL")
    }
}

/// A profile bound drawn beside a series.
#[derive(Debug, Clone, Serialize)]
pub struct BoundOut {
    pub symbol: &'static str,
    pub value: f64,
    pub check: String,
}

/// A drift episode of one series.
#[derive(Debug, Clone, Serialize)]
pub struct DriftOut {
    pub series: String,
    pub unit: &'static str,
    /// Nights (ids) the episode spans, and its strongest window.
    pub from: String,
    pub to: String,
    pub window_from: String,
    pub window_to: String,
    pub nights: usize,
    /// Theil-Sen slope, unit per week, and as % of the level per week.
    pub slope_per_week: f64,
    pub pct_per_week: f64,
    /// Change over the strongest window, % of its start level.
    pub change_pct: f64,
    pub z: f64,
    /// Nights of the window measured on a disturbed run.
    pub disturbed_nights: usize,
    #[serde(skip)]
    fit: (f64, f64, f64, f64),
}

/// One key figure over the nights.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesOut {
    pub key: String,
    pub group: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub metric: &'static str,
    /// One per night of the range; `None` where the night did not measure it.
    pub values: Vec<Option<f64>>,
    pub baseline: Option<f64>,
    pub bound: Option<BoundOut>,
    pub first: Option<f64>,
    pub last: Option<f64>,
    /// last against first, %.
    pub change_pct: Option<f64>,
    /// last against the baseline, %.
    pub vs_baseline_pct: Option<f64>,
    pub drifts: Vec<DriftOut>,
    pub regressed_nights: Vec<String>,
    pub over_bound_nights: Vec<String>,
    pub disturbed_nights: Vec<String>,
    pub flagged: bool,
    #[serde(skip)]
    disturbed: Vec<bool>,
    #[serde(skip)]
    facts: compare::Facts,
}

/// How a pair or a node changed between the first and the last night that measured it.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// `node-a <-> node-b`, or a node.
    pub what: String,
    /// The pair's figure; for a node, its pair figure that got worst.
    pub metric: String,
    pub first_night: String,
    pub first: f64,
    pub last_night: String,
    pub last: f64,
    /// Signed change, %.
    pub change_pct: f64,
    /// The change the worse way (latency up, bandwidth down), %: what the lists sort by.
    pub worse_pct: f64,
    /// For nodes: the pair figures behind the score.
    pub figures: usize,
}

/// A plotted series.
#[derive(Debug, Clone, Serialize)]
pub struct PlotOut {
    pub key: String,
    pub file: String,
    pub svg: String,
    pub caption: String,
}

/// Which nights the distribution plot overlays.
#[derive(Debug, Clone, Serialize)]
pub struct DistOut {
    pub of: String,
    pub nights: Vec<String>,
    pub svg: String,
}

/// A result file read, for the signed summary.
#[derive(Debug, Clone, Serialize)]
pub struct InputRef {
    pub night: String,
    pub path: String,
    pub sha256: String,
}

/// Everything `trend` found, as `summary.json` holds it.
#[derive(Debug, Serialize)]
pub struct Trend {
    /// `OK` or `FLAGGED` (a drift, a failed or a regressed night in the range).
    pub verdict: &'static str,
    pub since: Option<String>,
    pub until: Option<String>,
    pub nights: Vec<NightRow>,
    pub baseline: String,
    pub profile: Option<String>,
    pub rule: RuleOut,
    pub drifts: Vec<DriftOut>,
    pub failed_nights: usize,
    pub regressed_nights: usize,
    pub disturbed_nights: usize,
    pub series: Vec<SeriesOut>,
    pub changed_pairs: Vec<Change>,
    pub changed_nodes: Vec<Change>,
    pub skipped: Vec<BadInput>,
    pub inputs: Vec<InputRef>,
}

/// The rules applied, for the report's text.
#[derive(Debug, Clone, Serialize)]
pub struct RuleOut {
    pub window: usize,
    pub min_nights: usize,
    pub drift_pct: f64,
    pub drift_z: f64,
    pub tolerance_pct: f64,
    pub sigmas: f64,
}

/// What a finished `trend` produced.
pub struct Outcome {
    pub trend: Trend,
    pub dir: PathBuf,
    pub fingerprint: Option<String>,
}

impl Outcome {
    /// 0 when nothing is flagged, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.trend.verdict != "OK")
    }
}

/// One night's latency distribution: (night index, percentile curve, p99 in us).
type Curve = (usize, Vec<(f64, f64)>, f64);

/// What one night leaves behind once its documents are dropped.
struct NightData {
    row: NightRow,
    points: BTreeMap<String, Point>,
    pairs: BTreeMap<PairKey, f64>,
    /// (curve, p99 in us) of the distribution key.
    curve: Option<(Vec<(f64, f64)>, f64)>,
}

fn parse_limit(flag: &str, v: &Option<String>, end: bool) -> Result<Option<SystemTime>> {
    v.as_deref()
        .map(|t| {
            history::parse_when(t, end).ok_or_else(|| {
                Error::Usage(format!(
                    "{flag} {t}: not a date (give 2026-11-29, 2026-11-29T0200Z or RFC 3339)"
                ))
            })
        })
        .transpose()
}

fn check_options(o: &Options) -> Result<()> {
    for (flag, v) in [
        ("--tolerance", o.tolerance_pct),
        ("--sigmas", o.sigmas),
        ("--drift-pct", o.rule.pct),
        ("--drift-z", o.rule.z),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(Error::Usage(format!("{flag} {v}: give a number >= 0")));
        }
    }
    if o.rule.window < 3 {
        return Err(Error::Usage(format!(
            "--window {}: a slope needs at least 3 nights",
            o.rule.window
        )));
    }
    Ok(())
}

/// Earliest `started_at` of a night's documents, for nights whose name holds no date.
fn date_from_documents(n: &Night, skip_bad: bool) -> Result<SystemTime> {
    let set = input::load(std::slice::from_ref(&n.results), skip_bad)
        .map_err(|e| e.context(&format!("night {}", n.id)))?;
    set.docs
        .iter()
        .filter_map(|d| humantime::parse_rfc3339_weak(d.doc.started_at.trim_end_matches('Z')).ok())
        .min()
        .ok_or_else(|| {
            Error::Input(format!(
                "night {}: no date in its name and no readable started_at in its documents",
                n.id
            ))
        })
}

/// Reads one night and keeps what the trend needs of it.
fn read_night(
    n: &Night,
    when: SystemTime,
    profile: Option<&Profile>,
    dist: &Option<(String, Option<u64>)>,
    skip_bad: bool,
    inputs: &mut Vec<InputRef>,
    skipped: &mut Vec<BadInput>,
) -> Result<NightData> {
    let set = input::load(std::slice::from_ref(&n.results), skip_bad)
        .map_err(|e| e.context(&format!("night {}", n.id)))?;
    let line_rate = profile.and_then(|p| p.line_rate_gbit_s);
    let t = tables::build(&set.docs, line_rate);
    let verdict = profile.map(|p| judge::judge(p, &set.docs, &t));
    let mut quality = "unknown";
    let mut reasons = Vec::new();
    for d in &set.docs {
        let m = results::quality::Marks::of(&d.doc);
        if m.any_disturbed() {
            quality = "disturbed";
            for r in m.reasons() {
                if reasons.len() < 3 && !reasons.contains(r) {
                    reasons.push(r.clone());
                }
            }
        } else if m.known() && quality == "unknown" {
            quality = "ok";
        }
    }
    let curve = dist.as_ref().and_then(|(test, size)| {
        t.histograms
            .iter()
            .filter(|(k, h)| k.test == *test && !h.is_empty())
            .find(|(k, _)| size.is_none_or(|s| s == k.size))
            .map(|(_, h)| {
                (
                    plots::percentile_curve(h),
                    h.value_at_quantile_ns(0.99) as f64 / 1000.0,
                )
            })
    });
    for d in &set.docs {
        inputs.push(InputRef {
            night: n.id.clone(),
            path: d.path.display().to_string(),
            sha256: d.sha256.clone(),
        });
    }
    let files = set.docs.len();
    skipped.extend(set.skipped.iter().cloned());
    Ok(NightData {
        row: NightRow {
            id: n.id.clone(),
            date: history::stamp(when),
            day: history::days(when),
            verdict: verdict.as_ref().map(|v| v.overall),
            failed_checks: verdict
                .as_ref()
                .map(|v| {
                    v.checks
                        .iter()
                        .filter(|c| c.status != judge::Status::Pass)
                        .map(|c| c.id.clone())
                        .collect()
                })
                .unwrap_or_default(),
            compared_with: None,
            regressed: Vec::new(),
            new_regressions: Vec::new(),
            disturbed: quality == "disturbed",
            quality,
            quality_reasons: reasons,
            files,
            skipped: set.skipped.len(),
            marks: String::new(),
        },
        points: series::night_points(&t),
        pairs: series::pair_values(&set.docs),
        curve,
    })
}

/// The distribution key when none is asked for: the smallest size of the first latency
/// test of the first night that has one.
fn default_dist(n: &Night, skip_bad: bool) -> Option<(String, Option<u64>)> {
    let set = input::load(std::slice::from_ref(&n.results), skip_bad).ok()?;
    let t = tables::build(&set.docs, None);
    t.histograms
        .iter()
        .find(|(_, h)| !h.is_empty())
        .map(|(k, _)| (k.test.clone(), Some(k.size)))
}

fn pct(from: f64, to: f64) -> Option<f64> {
    (from != 0.0).then(|| (to - from) / from.abs() * 100.0)
}

/// Runs `aggregate trend`.
pub fn run(opts: &Options) -> Result<Outcome> {
    check_options(opts)?;
    let since = parse_limit("--since", &opts.since, false)?;
    let until = parse_limit("--until", &opts.until, true)?;
    if let (Some(a), Some(b)) = (since, until) {
        if a > b {
            return Err(Error::Usage(format!(
                "--since {} is after --until {}",
                opts.since.as_deref().unwrap_or(""),
                opts.until.as_deref().unwrap_or("")
            )));
        }
    }
    let profile = opts.profile.as_deref().map(profile::load).transpose()?;
    let templates = Templates::load(opts.templates.as_deref())?;
    let key = opts.sign.as_deref().map(sign::read_private).transpose()?;
    let mut bundle = Bundle::prepare(&opts.out, opts.force, OWNED)?;
    let mut clock = PhaseClock::new();

    // Every night with its date; the range.
    let mut all: Vec<(Night, SystemTime)> = Vec::new();
    for n in history::discover(&opts.history)? {
        let when = match n.when {
            Some(w) => w,
            None => date_from_documents(&n, opts.skip_bad)?,
        };
        all.push((n, when));
    }
    all.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.id.cmp(&b.0.id)));
    let first_of_history = all.first().map(|(n, _)| n.clone());
    let in_range: Vec<&(Night, SystemTime)> = all
        .iter()
        .filter(|(_, w)| since.is_none_or(|s| *w >= s) && until.is_none_or(|u| *w <= u))
        .collect();
    if in_range.is_empty() {
        return Err(Error::Usage(format!(
            "no night of the history ({} in all, {} .. {}) falls between --since and --until",
            all.len(),
            all.first().map(|n| history::stamp(n.1)).unwrap_or_default(),
            all.last().map(|n| history::stamp(n.1)).unwrap_or_default()
        )));
    }
    let dist = opts
        .dist
        .clone()
        .or_else(|| default_dist(&in_range[0].0, opts.skip_bad));
    clock.lap("discover");

    // Nights, oldest first, one in memory at a time; regressions replayed as the nightly
    // job decides them: against the last night that passed and did not regress.
    let mut inputs = Vec::new();
    let mut skipped = Vec::new();
    let mut nights: Vec<NightData> = Vec::with_capacity(in_range.len());
    let mut last_good: Option<usize> = None;
    let progress = std::io::stderr().is_terminal();
    for (i, (n, when)) in in_range.iter().enumerate() {
        if progress && (i % 30 == 0 || i + 1 == in_range.len()) {
            eprintln!(
                "aggregate: trend: night {} of {}: {}",
                i + 1,
                in_range.len(),
                n.id
            );
        }
        let mut nd = read_night(
            n,
            *when,
            profile.as_ref(),
            &dist,
            opts.skip_bad,
            &mut inputs,
            &mut skipped,
        )?;
        if let Some(g) = last_good {
            let cmp = compare::compare_points(
                &nights[g].points,
                &nd.points,
                opts.tolerance_pct,
                opts.sigmas,
            );
            nd.row.compared_with = Some(nights[g].row.id.clone());
            nd.row.regressed = cmp
                .rows
                .iter()
                .filter(|r| r.verdict == "regressed")
                .map(|r| r.key.clone())
                .collect();
        }
        let before = nights.last().map(|p| &p.row.regressed);
        nd.row.new_regressions = nd
            .row
            .regressed
            .iter()
            .filter(|k| before.is_none_or(|b| !b.contains(k)))
            .cloned()
            .collect();
        if !nd.row.failed() && nd.row.regressed.is_empty() && nd.row.files > 0 {
            last_good = Some(i);
        }
        nights.push(nd);
    }
    clock.lap("read nights");

    // The delivery baseline.
    let (baseline_points, baseline_source) = match &opts.baseline {
        Some(p) => {
            let set = input::load(std::slice::from_ref(p), opts.skip_bad)
                .map_err(|e| e.context("--baseline"))?;
            let t = tables::build(&set.docs, profile.as_ref().and_then(|p| p.line_rate_gbit_s));
            (series::night_points(&t), p.display().to_string())
        }
        None => {
            let first = first_of_history.expect("at least one night");
            let pts = if first.id == nights[0].row.id {
                nights[0].points.clone()
            } else {
                let mut ignore = (Vec::new(), Vec::new());
                read_night(
                    &first,
                    first.when.unwrap_or(SystemTime::UNIX_EPOCH),
                    None,
                    &None,
                    opts.skip_bad,
                    &mut ignore.0,
                    &mut ignore.1,
                )?
                .points
            };
            (
                pts,
                format!("the first night of the history ({})", first.id),
            )
        }
    };

    let curves: Vec<Curve> = nights
        .iter_mut()
        .enumerate()
        .filter_map(|(i, n)| n.curve.take().map(|(c, p99)| (i, c, p99)))
        .collect();
    let trend = assemble(
        opts,
        profile.as_ref(),
        nights,
        &baseline_points,
        baseline_source,
        inputs,
        skipped,
    );
    clock.lap("drift");

    // Plots: flagged series first, then a headline per test; and the distribution.
    let mut plots_out = Vec::new();
    for (i, s) in plot_order(&trend.series)
        .into_iter()
        .take(opts.max_plots)
        .enumerate()
    {
        if let Some(svg) = series_figure(s, &trend.nights) {
            let file = format!("plots/{:02}-{}.svg", i + 1, slug(&s.key));
            bundle.write(&file, svg.as_bytes(), None)?;
            plots_out.push(PlotOut {
                key: s.key.clone(),
                file,
                svg,
                caption: caption(s),
            });
        }
    }
    let distribution = dist
        .as_ref()
        .and_then(|d| dist_figure(d, &trend.nights, curves));
    if let Some(d) = &distribution {
        bundle.write("plots/distribution.svg", d.svg.as_bytes(), None)?;
    }
    clock.lap("plots");

    let signature = key.as_ref().map(|k| SignatureInfo {
        manifest: sign::MANIFEST,
        file: sign::SIGNATURE,
        namespace: sign::NAMESPACE,
        identity: opts.identity.clone(),
        fingerprint: k
            .public_key()
            .fingerprint(ssh_key::HashAlg::Sha256)
            .to_string(),
        command: sign::verify_command(&opts.identity),
    });
    let ctx = Context {
        title: opts.title.clone().unwrap_or_else(|| {
            format!(
                "Fabric trend {} .. {}",
                &trend.nights[0].date[..10],
                &trend.nights[trend.nights.len() - 1].date[..10]
            )
        }),
        generated_at: results::provenance::now_rfc3339(),
        tool: ToolInfo {
            version: results::provenance::TOOL_VERSION,
            git_commit: results::provenance::GIT_COMMIT,
        },
        trend: &trend,
        plots: &plots_out,
        distribution: distribution.as_ref(),
        flagged_series: trend.series.iter().filter(|s| s.flagged).count(),
        inputs: trend.inputs.len(),
        signature,
    };
    for name in ["trend.html", "trend.md"] {
        let text = templates.render(name, &ctx)?;
        bundle.write(name, text.as_bytes(), None)?;
    }
    let summary = serde_json::to_vec_pretty(&trend)
        .map_err(|e| Error::Output(format!("summary.json: {e}")))?;
    bundle.write("summary.json", &summary, None)?;
    clock.lap("render");
    let fingerprint = key
        .as_ref()
        .map(|k| bundle.sign(k, &opts.identity))
        .transpose()?;
    clock.lap("sign");
    Ok(Outcome {
        trend,
        dir: opts.out.clone(),
        fingerprint,
    })
}

#[derive(Serialize)]
struct ToolInfo {
    version: &'static str,
    git_commit: &'static str,
}

#[derive(Serialize)]
struct SignatureInfo {
    manifest: &'static str,
    file: &'static str,
    namespace: &'static str,
    identity: String,
    fingerprint: String,
    command: String,
}

#[derive(Serialize)]
struct Context<'a> {
    title: String,
    generated_at: String,
    tool: ToolInfo,
    trend: &'a Trend,
    plots: &'a [PlotOut],
    distribution: Option<&'a DistOut>,
    flagged_series: usize,
    inputs: usize,
    signature: Option<SignatureInfo>,
}

/// Builds every series, finds drifts, marks nights, ranks pairs and nodes.
fn assemble(
    opts: &Options,
    profile: Option<&Profile>,
    nights: Vec<NightData>,
    baseline: &BTreeMap<String, Point>,
    baseline_source: String,
    inputs: Vec<InputRef>,
    skipped: Vec<BadInput>,
) -> Trend {
    let n = nights.len();
    let keys: BTreeSet<&String> = nights.iter().flat_map(|nd| nd.points.keys()).collect();
    let mut all_series = Vec::with_capacity(keys.len());
    let ids: Vec<&str> = nights.iter().map(|nd| nd.row.id.as_str()).collect();
    let days: Vec<f64> = nights.iter().map(|nd| nd.row.day).collect();
    for key in keys {
        let meta = nights
            .iter()
            .find_map(|nd| nd.points.get(key))
            .expect("key from a night");
        let values: Vec<Option<f64>> = nights
            .iter()
            .map(|nd| {
                nd.points
                    .get(key)
                    .map(|p| p.value)
                    .filter(|v| v.is_finite())
            })
            .collect();
        let disturbed: Vec<bool> = nights
            .iter()
            .map(|nd| nd.points.get(key).is_some_and(|p| p.disturbed))
            .collect();
        let present: Vec<usize> = (0..n).filter(|i| values[*i].is_some()).collect();
        let xs: Vec<f64> = present.iter().map(|i| days[*i]).collect();
        let ys: Vec<f64> = present.iter().map(|i| values[*i].unwrap_or(0.0)).collect();
        let drifts: Vec<DriftOut> = drift::scan(&xs, &ys, meta.higher_is_better, &opts.rule)
            .into_iter()
            .map(|e| {
                let (wf, wt) = (present[e.strongest_from], present[e.strongest_to]);
                let level = e.fit.start_level.abs().max(f64::MIN_POSITIVE);
                DriftOut {
                    series: key.clone(),
                    unit: meta.unit,
                    from: ids[present[e.from]].to_string(),
                    to: ids[present[e.to]].to_string(),
                    window_from: ids[wf].to_string(),
                    window_to: ids[wt].to_string(),
                    nights: e.fit.nights,
                    slope_per_week: e.fit.slope_per_day * 7.0,
                    pct_per_week: e.fit.slope_per_day * 7.0 / level * 100.0,
                    change_pct: e.fit.change_pct,
                    z: e.fit.z,
                    disturbed_nights: (wf..=wt).filter(|i| disturbed[*i]).count(),
                    fit: (days[wf], days[wt], e.fit.start_level, e.fit.slope_per_day),
                }
            })
            .collect();
        let bound = series::bound_for(profile, meta).map(|(b, id)| BoundOut {
            symbol: b.symbol(),
            value: b.value(),
            check: id,
        });
        let over_bound_nights: Vec<String> = match &bound {
            Some(b) => (0..n)
                .filter(|i| {
                    values[*i].is_some_and(|v| match b.symbol {
                        ">=" => v < b.value,
                        _ => v > b.value,
                    })
                })
                .map(|i| ids[i].to_string())
                .collect(),
            None => Vec::new(),
        };
        let regressed_nights: Vec<String> = nights
            .iter()
            .filter(|nd| nd.row.regressed.contains(key))
            .map(|nd| nd.row.id.clone())
            .collect();
        let first = present.first().and_then(|i| values[*i]);
        let last = present.last().and_then(|i| values[*i]);
        let base = baseline.get(key).map(|p| p.value);
        all_series.push(SeriesOut {
            key: key.clone(),
            group: meta.group,
            unit: meta.unit,
            higher_is_better: meta.higher_is_better,
            metric: meta.metric,
            flagged: !drifts.is_empty()
                || !over_bound_nights.is_empty()
                || !regressed_nights.is_empty(),
            change_pct: first.zip(last).and_then(|(a, b)| pct(a, b)),
            vs_baseline_pct: base.zip(last).and_then(|(a, b)| pct(a, b)),
            baseline: base,
            first,
            last,
            values,
            bound,
            drifts,
            regressed_nights,
            over_bound_nights,
            disturbed_nights: (0..n)
                .filter(|i| disturbed[*i])
                .map(|i| ids[i].to_string())
                .collect(),
            disturbed,
            facts: meta.facts.clone(),
        });
    }
    let (changed_pairs, changed_nodes) = changes(&nights, opts.top);
    let mut rows: Vec<NightRow> = nights.into_iter().map(|nd| nd.row).collect();
    for r in &mut rows {
        let mut m = Vec::new();
        if r.failed() {
            m.push("FAIL".to_string());
        }
        if !r.regressed.is_empty() {
            let new = r.new_regressions.len();
            m.push(if new == r.regressed.len() {
                format!("{new} regression(s)")
            } else {
                format!("{} regression(s), {new} new", r.regressed.len())
            });
        }
        if r.disturbed {
            m.push("disturbed".into());
        }
        if r.files == 0 {
            m.push("no results".into());
        }
        r.marks = m.join(", ");
    }
    let mut drifts: Vec<DriftOut> = all_series
        .iter()
        .flat_map(|s| s.drifts.iter().cloned())
        .collect();
    drifts.sort_by(|a, b| b.change_pct.abs().total_cmp(&a.change_pct.abs()));
    let failed_nights = rows.iter().filter(|r| r.failed()).count();
    let regressed_nights = rows.iter().filter(|r| !r.regressed.is_empty()).count();
    Trend {
        verdict: if drifts.is_empty() && failed_nights == 0 && regressed_nights == 0 {
            "OK"
        } else {
            "FLAGGED"
        },
        since: opts.since.clone(),
        until: opts.until.clone(),
        disturbed_nights: rows.iter().filter(|r| r.disturbed).count(),
        nights: rows,
        baseline: baseline_source,
        profile: profile.map(|p| format!("{} ({})", p.name, p.source)),
        rule: RuleOut {
            window: opts.rule.window,
            min_nights: opts.rule.min_nights,
            drift_pct: opts.rule.pct,
            drift_z: opts.rule.z,
            tolerance_pct: opts.tolerance_pct,
            sigmas: opts.sigmas,
        },
        drifts,
        failed_nights,
        regressed_nights,
        series: all_series,
        changed_pairs,
        changed_nodes,
        skipped,
        inputs,
    }
}

/// Pairs and nodes ranked by how much worse they got between the first and the last
/// night that measured them.
fn changes(nights: &[NightData], top: usize) -> (Vec<Change>, Vec<Change>) {
    // (night, value) of the first and the last night that measured each pair figure.
    type Span = ((usize, f64), (usize, f64));
    let mut span: BTreeMap<&PairKey, Span> = BTreeMap::new();
    for (i, nd) in nights.iter().enumerate() {
        for (k, v) in &nd.pairs {
            span.entry(k)
                .and_modify(|e| e.1 = (i, *v))
                .or_insert(((i, *v), (i, *v)));
        }
    }
    let mut pairs: Vec<Change> = Vec::new();
    let mut by_node: BTreeMap<&str, Vec<(f64, String)>> = BTreeMap::new();
    for (k, ((fi, fv), (li, lv))) in span {
        if fi == li {
            continue;
        }
        let Some(change) = pct(fv, lv) else { continue };
        let worse = if k.higher_is_better { -change } else { change };
        let what = format!("{} <-> {}", k.initiator, k.responder);
        for node in [&k.initiator, &k.responder] {
            by_node
                .entry(node.as_str())
                .or_default()
                .push((worse, format!("{what} {}", k.metric)));
        }
        pairs.push(Change {
            what,
            metric: k.metric.clone(),
            first_night: nights[fi].row.id.clone(),
            first: fv,
            last_night: nights[li].row.id.clone(),
            last: lv,
            change_pct: change,
            worse_pct: worse,
            figures: 1,
        });
    }
    pairs.sort_by(|a, b| b.worse_pct.total_cmp(&a.worse_pct));
    pairs.truncate(top);
    // A node is as bad as the median of its pairs' changes: one bad pair is a link, all of
    // a node's pairs worse is the node.
    let mut nodes: Vec<Change> = by_node
        .into_iter()
        .map(|(node, mut v)| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            let median = v[v.len() / 2].0;
            let worst = v.last().map(|w| w.1.clone()).unwrap_or_default();
            Change {
                what: node.to_string(),
                metric: worst,
                first_night: nights.first().map(|n| n.row.id.clone()).unwrap_or_default(),
                first: 0.0,
                last_night: nights.last().map(|n| n.row.id.clone()).unwrap_or_default(),
                last: 0.0,
                change_pct: median,
                worse_pct: median,
                figures: v.len(),
            }
        })
        .collect();
    nodes.sort_by(|a, b| b.worse_pct.total_cmp(&a.worse_pct));
    nodes.truncate(top);
    (pairs, nodes)
}

/// Series to plot: drifting ones (largest change first), then those over their bound or
/// regressed, then one headline per test (smallest latency size, largest other size).
fn plot_order(series: &[SeriesOut]) -> Vec<&SeriesOut> {
    let mut out: Vec<&SeriesOut> = Vec::new();
    let mut drifting: Vec<&SeriesOut> = series.iter().filter(|s| !s.drifts.is_empty()).collect();
    drifting.sort_by(|a, b| {
        let m = |s: &SeriesOut| {
            s.drifts
                .iter()
                .map(|d| d.change_pct.abs())
                .fold(0.0, f64::max)
        };
        m(b).total_cmp(&m(a))
    });
    out.extend(drifting);
    out.extend(series.iter().filter(|s| s.drifts.is_empty() && s.flagged));
    let mut headline: BTreeMap<(String, &str), &SeriesOut> = BTreeMap::new();
    for s in series.iter().filter(|s| !s.flagged) {
        if matches!(s.metric, "latency_p50" | "collective_time") {
            continue;
        }
        let k = (
            format!(
                "{} {} {}",
                s.facts.test,
                s.facts.transport.as_deref().unwrap_or(""),
                s.facts.backend.as_deref().unwrap_or("")
            ),
            s.metric,
        );
        let better = |cur: &SeriesOut| {
            if s.metric.starts_with("latency") {
                s.facts.size < cur.facts.size
            } else {
                s.facts.size > cur.facts.size
            }
        };
        match headline.get(&k) {
            Some(cur) if !better(cur) => {}
            _ => {
                headline.insert(k, s);
            }
        }
    }
    out.extend(headline.into_values());
    out
}

fn slug(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    s.trim_matches('-').chars().take(60).collect()
}

fn caption(s: &SeriesOut) -> String {
    let mut c = format!("{} ({}), one point per night", s.key, s.unit);
    if let Some(b) = s.baseline {
        c.push_str(&format!("; baseline {}", judge::format_value(b)));
    }
    if let Some(b) = &s.bound {
        c.push_str(&format!(
            "; bound {} {} (check {})",
            b.symbol,
            judge::format_value(b.value),
            b.check
        ));
    }
    for d in &s.drifts {
        c.push_str(&format!(
            "; DRIFT {:+.1}% over {} nights to {} ({:+.2}%/week, Z {:.1})",
            d.change_pct, d.nights, d.window_to, d.pct_per_week, d.z
        ));
    }
    if !s.regressed_nights.is_empty() {
        c.push_str(&format!("; regressed on {}", s.regressed_nights.join(", ")));
    }
    c
}

const BASELINE: RGBColor = RGBColor(87, 96, 106);
const BOUND: RGBColor = RGBColor(207, 34, 46);
const FIT: RGBColor = RGBColor(191, 135, 0);
const FAILED: RGBColor = RGBColor(207, 34, 46);
const REGRESSED: RGBColor = RGBColor(188, 76, 0);
const DISTURBED: RGBColor = RGBColor(140, 149, 159);

/// One series against the nights: baseline, bound, fitted drift, marked nights.
fn series_figure(s: &SeriesOut, nights: &[NightRow]) -> Option<String> {
    let pts: Vec<(f64, f64)> = s
        .values
        .iter()
        .zip(nights)
        .filter_map(|(v, n)| v.map(|v| (n.day, v)))
        .collect();
    let mut f = Figure::new(
        &s.key,
        "night",
        &format!("{} ({})", s.metric, s.unit),
        XAxis::Date,
    );
    f.y_from_zero = false;
    f.lines.push((s.key.clone(), pts));
    if let Some(b) = s.baseline {
        f.hlines
            .push((b, format!("baseline {}", judge::format_value(b)), BASELINE));
    }
    if let Some(b) = &s.bound {
        f.hlines.push((
            b.value,
            format!("bound {} {}", b.symbol, judge::format_value(b.value)),
            BOUND,
        ));
    }
    for d in &s.drifts {
        let (x0, x1, level, slope) = d.fit;
        f.guides.push((
            (
                format!("drift {:+.1}%", d.change_pct),
                vec![(x0, level), (x1, level + slope * (x1 - x0))],
            ),
            FIT,
        ));
    }
    let at = |pred: &dyn Fn(usize, &NightRow) -> bool| -> Vec<(f64, f64)> {
        nights
            .iter()
            .enumerate()
            .filter(|(i, n)| pred(*i, n))
            .filter_map(|(i, n)| s.values[i].map(|v| (n.day, v)))
            .collect()
    };
    let failed = at(&|_, n| n.failed());
    if !failed.is_empty() {
        f.marks.push(Marks {
            label: "failed night".into(),
            points: failed,
            color: FAILED,
            shape: Shape::Dot,
        });
    }
    let regressed = at(&|_, n| s.regressed_nights.contains(&n.id));
    if !regressed.is_empty() {
        f.marks.push(Marks {
            label: "regressed".into(),
            points: regressed,
            color: REGRESSED,
            shape: Shape::Cross,
        });
    }
    let disturbed = at(&|i, _| s.disturbed[i]);
    if !disturbed.is_empty() {
        f.marks.push(Marks {
            label: "disturbed run".into(),
            points: disturbed,
            color: DISTURBED,
            shape: Shape::Ring,
        });
    }
    plots::render(&f)
}

/// The latency distribution of one test and size, several nights overlaid: the first,
/// the last, the one with the worst p99, and others spread between (five at most).
fn dist_figure(
    d: &(String, Option<u64>),
    nights: &[NightRow],
    curves: Vec<Curve>,
) -> Option<DistOut> {
    if curves.is_empty() {
        return None;
    }
    let worst = curves
        .iter()
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|c| c.0);
    let idx: Vec<usize> = curves.iter().map(|c| c.0).collect();
    let mut pick: Vec<usize> = plots::spread(idx, 4);
    pick.extend(worst);
    pick.sort_unstable();
    pick.dedup();
    let chosen: Vec<(String, Vec<(f64, f64)>)> = curves
        .into_iter()
        .filter(|c| pick.contains(&c.0))
        .map(|(i, c, _)| (nights[i].date[..10].to_string(), c))
        .collect();
    let of = match d.1 {
        Some(s) => format!("{} {}", d.0, crate::tables::size_label(s)),
        None => d.0.clone(),
    };
    let names = chosen.iter().map(|c| c.0.clone()).collect();
    let svg =
        plots::distribution_figure(&format!("Latency by percentile, {of}, by night"), chosen)?;
    Some(DistOut {
        of,
        nights: names,
        svg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use synth::history::{self as synth_history, Shape};

    fn options(history: &std::path::Path, out: &std::path::Path) -> Options {
        Options {
            history: vec![history.to_path_buf()],
            profile: None,
            baseline: None,
            since: None,
            until: None,
            rule: Rule::default(),
            tolerance_pct: 5.0,
            sigmas: 3.0,
            out: out.to_path_buf(),
            templates: None,
            sign: None,
            identity: "fabcheck".into(),
            force: false,
            title: None,
            skip_bad: false,
            top: 5,
            max_plots: 8,
            dist: None,
        }
    }

    #[test]
    fn a_flat_history_flags_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let h = tmp.path().join("history");
        synth_history::write(&h, &Shape::default()).unwrap();
        let o = run(&options(&h, &tmp.path().join("out"))).unwrap();
        let t = &o.trend;
        assert_eq!(t.nights.len(), 14);
        assert!(t.drifts.is_empty(), "{:#?}", t.drifts);
        assert_eq!((t.failed_nights, t.regressed_nights), (0, 0));
        assert_eq!(t.verdict, "OK");
        assert_eq!(o.exit_code(), 0);
        assert!(tmp.path().join("out/trend.html").is_file());
    }

    #[test]
    fn a_slow_drift_and_a_bad_night_are_both_flagged() {
        let tmp = tempfile::tempdir().unwrap();
        let h = tmp.path().join("history");
        let shape = Shape {
            latency_drift: 0.01,
            bad_nights: vec![9],
            ..Shape::default()
        };
        synth_history::write(&h, &shape).unwrap();
        let o = run(&options(&h, &tmp.path().join("out"))).unwrap();
        let t = &o.trend;
        for d in &t.drifts {
            eprintln!("{} {:.1}% z {:.1}", d.series, d.change_pct, d.z);
        }
        for n in &t.nights {
            eprintln!("{} {:?} {}", n.id, n.regressed, n.marks);
        }
        assert!(t.drifts.iter().any(|d| d.series.contains("latency p99")));
        assert!(
            t.drifts.iter().all(|d| d.series.contains("latency")),
            "{:#?}",
            t.drifts
        );
        assert_eq!(t.regressed_nights, 1);
        assert_eq!(o.exit_code(), 1);
    }
}
