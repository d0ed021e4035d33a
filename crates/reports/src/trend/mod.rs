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

mod assemble;
pub mod drift;
mod figures;
pub mod history;
mod nights;
pub mod series;

use assemble::{assemble, Accumulator};
use figures::{caption, dist_figure, plot_order, series_figure, slug};
use nights::{date_from_documents, default_dist, read_night, Curve, NightData};

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;

use crate::bundle::{Bundle, SignatureInfo, ToolInfo};
use crate::clock::PhaseClock;
use crate::compare::{self, Point};
use crate::sign;
use crate::templates::Templates;
use verdict::error::{Error, Result};
use verdict::input::{self, BadInput};
use verdict::profile;
use verdict::tables;

use drift::Rule;
use history::Night;

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
    /// Ceilings on what is read, per night (and for the baseline).
    pub limits: input::Limits,
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
    /// The night whose window first drifted: when the trend would have said so.
    pub flagged_on: String,
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
    /// The pair's figure; for a node, the figure its pairs got worst at (and those pairs).
    pub metric: String,
    pub first_night: String,
    pub first: f64,
    pub last_night: String,
    pub last: f64,
    /// Signed change, %.
    pub change_pct: f64,
    /// The change the worse way (latency up, bandwidth down), %.
    pub worse_pct: f64,
    /// `worse_pct` less the median of the same figure over every pair: how much worse
    /// than the fabric as a whole, what the lists sort by (for a node: the median over its
    /// pairs, at the figure where that is largest).
    pub beyond_fabric_pct: f64,
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

/// `--since` and `--until` as times, the first not after the second.
fn range(opts: &Options) -> Result<(Option<SystemTime>, Option<SystemTime>)> {
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
    Ok((since, until))
}

/// Every night of the history with its date (from its name, else its documents),
/// oldest first.
fn dated_nights(opts: &Options) -> Result<Vec<(Night, SystemTime)>> {
    let mut all: Vec<(Night, SystemTime)> = Vec::new();
    for n in history::discover(&opts.history)? {
        let when = match n.when {
            Some(w) => w,
            None => date_from_documents(&n, opts.skip_bad, &opts.limits)?,
        };
        all.push((n, when));
    }
    all.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.id.cmp(&b.0.id)));
    Ok(all)
}

/// The nights between `since` and `until`; none is a usage error naming the history's
/// own range.
fn within(
    all: &[(Night, SystemTime)],
    (since, until): (Option<SystemTime>, Option<SystemTime>),
) -> Result<Vec<&(Night, SystemTime)>> {
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
    Ok(in_range)
}

/// The nights folded in, oldest first, with regressions replayed as the nightly job
/// decides them: against the last night that passed and did not regress.
#[derive(Default)]
struct Replay {
    acc: Accumulator,
    inputs: Vec<InputRef>,
    skipped: Vec<BadInput>,
    curves: Vec<Curve>,
    last_good: Option<(String, BTreeMap<String, Point>)>,
    /// The first night's points (the baseline when it is the history's first).
    first_points: Option<BTreeMap<String, Point>>,
}

impl Replay {
    /// Night `i` folded in: compared with the last good night, its new regressions
    /// named, and it becomes the last good night when it passed without one.
    fn fold(&mut self, opts: &Options, i: usize, mut nd: NightData) {
        if let Some((id, points)) = &self.last_good {
            let cmp = compare::compare_points(points, &nd.points, opts.tolerance_pct, opts.sigmas);
            nd.row.compared_with = Some(id.clone());
            nd.row.regressed = cmp
                .rows
                .iter()
                .filter(|r| r.verdict == "regressed")
                .map(|r| r.key.clone())
                .collect();
        }
        let before = self.acc.rows.last().map(|r| &r.regressed);
        nd.row.new_regressions = nd
            .row
            .regressed
            .iter()
            .filter(|k| before.is_none_or(|b| !b.contains(k)))
            .cloned()
            .collect();
        if !nd.row.failed() && nd.row.regressed.is_empty() && nd.row.files > 0 {
            self.last_good = Some((nd.row.id.clone(), nd.points.clone()));
        }
        if i == 0 {
            self.first_points = Some(nd.points.clone());
        }
        if let Some((c, p99)) = nd.curve.take() {
            self.curves.push((i, c, p99));
        }
        self.inputs.append(&mut nd.inputs);
        self.skipped.append(&mut nd.skipped);
        self.acc.add(nd);
    }
}

/// Reads the nights in range (a few ahead in parallel) and folds them in order.
fn replay(
    opts: &Options,
    profile: Option<&profile::Profile>,
    in_range: &[&(Night, SystemTime)],
    dist: &Option<(String, Option<u64>)>,
) -> Result<Replay> {
    let progress = std::io::stderr().is_terminal();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let read = |i: usize| {
        let (n, when) = in_range[i];
        read_night(n, *when, profile, dist, opts.skip_bad, &opts.limits)
    };
    let mut r = Replay::default();
    let mut fold = |i: usize, nd: NightData| -> Result<()> {
        if progress && (i.is_multiple_of(30) || i + 1 == in_range.len()) {
            eprintln!(
                "aggregate: trend: night {} of {}: {}",
                i + 1,
                in_range.len(),
                nd.row.id
            );
        }
        r.fold(opts, i, nd);
        Ok(())
    };
    nights::read_in_order(in_range.len(), workers, &read, &mut fold)?;
    Ok(r)
}

/// The delivery baseline: `--baseline`, else the history's first night (read again
/// when `--since` left it out).
fn baseline(
    opts: &Options,
    profile: Option<&profile::Profile>,
    first: &Night,
    r: &mut Replay,
) -> Result<(BTreeMap<String, Point>, String)> {
    if let Some(p) = &opts.baseline {
        let set = input::load_with(std::slice::from_ref(p), opts.skip_bad, &opts.limits)
            .map_err(|e| e.context("--baseline"))?;
        let t = tables::build(&set, profile.and_then(|p| p.line_rate_gbit_s));
        return Ok((series::night_points(&t), p.display().to_string()));
    }
    let pts = if first.id == r.acc.rows[0].id {
        r.first_points.take().unwrap_or_default()
    } else {
        read_night(
            first,
            first.when.unwrap_or(SystemTime::UNIX_EPOCH),
            None,
            &None,
            opts.skip_bad,
            &opts.limits,
        )?
        .points
    };
    Ok((
        pts,
        format!("the first night of the history ({})", first.id),
    ))
}

/// Plots: flagged series first, then a headline per test (up to `--max-plots`); and the
/// distribution across nights.
fn write_plots(
    bundle: &mut Bundle,
    opts: &Options,
    trend: &Trend,
    dist: &Option<(String, Option<u64>)>,
    curves: Vec<Curve>,
) -> Result<(Vec<PlotOut>, Option<DistOut>)> {
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
    Ok((plots_out, distribution))
}

/// Runs `aggregate trend`: the nights in range replayed, drift judged against the
/// baseline, plotted, rendered and signed.
pub fn run(opts: &Options) -> Result<Outcome> {
    check_options(opts)?;
    let range = range(opts)?;
    let profile = opts.profile.as_deref().map(profile::load).transpose()?;
    let templates = Templates::load(opts.templates.as_deref())?;
    let key = opts.sign.as_deref().map(sign::read_private).transpose()?;
    let mut bundle = Bundle::prepare(&opts.out, opts.force, OWNED)?;
    let mut clock = PhaseClock::new();

    let all = dated_nights(opts)?;
    let in_range = within(&all, range)?;
    let dist = opts
        .dist
        .clone()
        .or_else(|| default_dist(&in_range[0].0, opts.skip_bad, &opts.limits));
    clock.lap("discover");
    let mut r = replay(opts, profile.as_ref(), &in_range, &dist)?;
    clock.lap("read nights");
    let (baseline_points, baseline_source) = baseline(opts, profile.as_ref(), &all[0].0, &mut r)?;
    let trend = assemble(
        opts,
        profile.as_ref(),
        r.acc,
        &baseline_points,
        baseline_source,
        r.inputs,
        r.skipped,
    );
    clock.lap("drift");
    let (plots_out, distribution) = write_plots(&mut bundle, opts, &trend, &dist, r.curves)?;
    clock.lap("plots");

    let signature = key.as_ref().map(|k| SignatureInfo::of(k, &opts.identity));
    let ctx = Context {
        title: opts.title.clone().unwrap_or_else(|| {
            format!(
                "Fabric trend {} .. {}",
                &trend.nights[0].date[..10],
                &trend.nights[trend.nights.len() - 1].date[..10]
            )
        }),
        generated_at: results::provenance::now_rfc3339(),
        tool: ToolInfo::this(),
        trend: &trend,
        plots: &plots_out,
        distribution: distribution.as_ref(),
        flagged_series: trend.series.iter().filter(|s| s.flagged).count(),
        inputs: trend.inputs.len(),
        signature,
    };
    let fingerprint = bundle.finish(
        &["trend.html", "trend.md"],
        &templates,
        &ctx,
        &trend,
        key.as_ref().map(|k| (k, opts.identity.as_str())),
        &mut clock,
    )?;
    Ok(Outcome {
        trend,
        dir: opts.out.clone(),
        fingerprint,
    })
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
            limits: input::Limits::default(),
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
