//! Reading the nights: each night's documents are read, judged and reduced to what the
//! trend keeps of them, then dropped, so one night at a time is in memory.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::history::{self, Night};
use super::series::{self, PairKey};
use super::{InputRef, NightRow};
use crate::compare::Point;
use crate::plots;
use verdict::error::{Error, Result};
use verdict::input::{self, BadInput};
use verdict::judge;
use verdict::profile::Profile;
use verdict::tables;

/// One night's latency distribution: (night index, percentile curve, p99 in us).
pub(super) type Curve = (usize, Vec<(f64, f64)>, f64);

/// What one night leaves behind once its documents are dropped.
pub(super) struct NightData {
    pub row: NightRow,
    pub points: BTreeMap<String, Point>,
    pub pairs: BTreeMap<PairKey, f64>,
    /// (curve, p99 in us) of the distribution key.
    pub curve: Option<NightCurve>,
    /// The files read, and those left out.
    pub inputs: Vec<InputRef>,
    pub skipped: Vec<BadInput>,
}

/// Earliest `started_at` of a night's documents, for nights whose name holds no date.
pub(super) fn date_from_documents(
    n: &Night,
    skip_bad: bool,
    limits: &input::Limits,
) -> Result<SystemTime> {
    let set = input::load_with(std::slice::from_ref(&n.results), skip_bad, limits)
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

/// A latency distribution as the trend draws it: (percentile, microseconds) points and the
/// p99 in microseconds.
pub(super) type NightCurve = (Vec<(f64, f64)>, f64);

/// Reads one night and keeps what the trend needs of it.
pub(super) fn read_night(
    n: &Night,
    when: SystemTime,
    profile: Option<&Profile>,
    dist: &Option<(String, Option<u64>)>,
    skip_bad: bool,
    limits: &input::Limits,
) -> Result<NightData> {
    let set = input::load_with(std::slice::from_ref(&n.results), skip_bad, limits)
        .map_err(|e| e.context(&format!("night {}", n.id)))?;
    let line_rate = profile.and_then(|p| p.line_rate_gbit_s);
    let t = tables::build(&set, line_rate);
    let verdict = profile.map(|p| {
        let mut v = judge::judge(p, &set.docs, &t);
        crate::cluster::build(p, &set.docs).apply(&mut v);
        v
    });
    let (quality, reasons) = night_quality(&set.docs);
    let curve = distribution(&t, dist);
    let inputs = set
        .docs
        .iter()
        .map(|d| InputRef {
            night: n.id.clone(),
            path: d.path.display().to_string(),
            sha256: d.sha256.clone(),
        })
        .collect();
    let files = set.docs.len();
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
        inputs,
        skipped: set.skipped,
    })
}

/// A night's measurement quality: `disturbed` when any document was (with up to three of
/// the reasons), `ok` when one at least knew and none was, else `unknown`.
fn night_quality(docs: &[input::Loaded]) -> (&'static str, Vec<String>) {
    let mut quality = "unknown";
    let mut reasons = Vec::new();
    for d in docs {
        let m = results::quality::Marks::of(&d.doc);
        if m.any_disturbed() {
            quality = "disturbed";
            for r in m.reasons() {
                let r = verdict::escape::shorten(r, 1024);
                if reasons.len() < 3 && !reasons.contains(&r) {
                    reasons.push(r);
                }
            }
        } else if m.known() && quality == "unknown" {
            quality = "ok";
        }
    }
    (quality, reasons)
}

/// The night's latency distribution for the trend's curve (`dist`: the test and size, any
/// size when none): its percentile curve and its p99 in microseconds.
fn distribution(t: &tables::Tables, dist: &Option<(String, Option<u64>)>) -> Option<NightCurve> {
    dist.as_ref().and_then(|(test, size)| {
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
    })
}

/// The distribution key when none is asked for: the smallest size of the first latency
/// test of the first night that has one.
pub(super) fn default_dist(
    n: &Night,
    skip_bad: bool,
    limits: &input::Limits,
) -> Option<(String, Option<u64>)> {
    let set = input::load_with(std::slice::from_ref(&n.results), skip_bad, limits).ok()?;
    let t = tables::build(&set, None);
    t.histograms
        .iter()
        .find(|(_, h)| !h.is_empty())
        .map(|(k, _)| (k.test.clone(), Some(k.size)))
}

pub(super) fn pct(from: f64, to: f64) -> Option<f64> {
    (from != 0.0).then(|| (to - from) / from.abs() * 100.0)
}

/// Reads nights `0..count` with `read` on up to `workers` threads, a few nights ahead at
/// most, and hands each to `fold` in order on the calling thread. The first error stops
/// the reading and is returned.
pub(super) fn read_in_order(
    count: usize,
    workers: usize,
    read: &(dyn Fn(usize) -> Result<NightData> + Sync),
    fold: &mut dyn FnMut(usize, NightData) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};
    let workers = workers.clamp(1, count.max(1));
    // How far reading may run ahead of folding: each night in flight holds its documents.
    let ahead = workers + 1;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let state = Mutex::new((BTreeMap::<usize, Result<NightData>>::new(), 0usize));
    let changed = Condvar::new();
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                {
                    let mut g = lock();
                    while i >= g.1 + ahead && !stop.load(Ordering::Relaxed) {
                        g = changed.wait(g).unwrap_or_else(|p| p.into_inner());
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // A panic while reading must not leave the folding thread waiting forever.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(i)))
                    .unwrap_or_else(|_| {
                        Err(Error::Input(format!(
                            "night {} of {count}: the reader panicked (a bug: please report it)",
                            i + 1
                        )))
                    });
                lock().0.insert(i, r);
                changed.notify_all();
            });
        }
        let mut outcome = Ok(());
        for i in 0..count {
            let r = {
                let mut g = lock();
                loop {
                    if let Some(r) = g.0.remove(&i) {
                        g.1 = i + 1;
                        break r;
                    }
                    g = changed.wait(g).unwrap_or_else(|p| p.into_inner());
                }
            };
            changed.notify_all();
            if let Err(e) = r.and_then(|nd| fold(i, nd)) {
                outcome = Err(e);
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        changed.notify_all();
        outcome
    })
}
