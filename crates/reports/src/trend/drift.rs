//! Slow drift: a fitted slope over a window of nights, not night-to-night steps.
//!
//! A p99 that grows 2% a week never trips a 5% night-to-night tolerance, and one bad night
//! must not look like a trend. The rule, for one series and each window of the last
//! `window` nights that have a value (shorter at the start of the history, never fewer
//! than [`Rule::min_nights`]):
//!
//! - **Trend test**: Mann-Kendall, the sign of every later-minus-earlier pair summed (S),
//!   normalised with ties accounted for (Z). It looks at order only, so one outlier moves S
//!   by at most n-1 of n(n-1)/2: a bad night is not a drift. A drift needs |Z| >= `z`
//!   in the worse direction (latency up, bandwidth down).
//! - **Size**: the Theil-Sen slope (median of the pairwise slopes, equally robust) times
//!   the window's length in days must be at least `pct` % of the fitted level at the
//!   window's start: a trend too small to matter is not reported, however significant.
//!
//! Consecutive windows that pass form one *episode*, reported with its strongest window.
//! Both tests are standard for slow trends in noisy monitoring series (hydrology,
//! climate): no distribution is assumed, and a step that lasts shows as an episode too.

use serde::Serialize;

use verdict::metric::median;

/// The drift rule's knobs (`aggregate trend --window --drift-pct --drift-z`).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Nights per window.
    pub window: usize,
    /// Fewest nights a window may hold.
    pub min_nights: usize,
    /// Smallest change over the window, % of the level at its start.
    pub pct: f64,
    /// Smallest Mann-Kendall |Z|.
    pub z: f64,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            window: 28,
            min_nights: 8,
            pct: 5.0,
            z: 3.0,
        }
    }
}

/// A line fitted to a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    /// Theil-Sen slope, units per day.
    pub slope_per_day: f64,
    /// Fitted value at the window's first night.
    pub start_level: f64,
    /// Mann-Kendall Z (positive: rising).
    pub z: f64,
    /// Change over the window, % of `start_level` (signed).
    pub change_pct: f64,
    pub nights: usize,
}

/// A run of consecutive windows that drift, with the strongest one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Episode {
    /// Index (into the series' points) of the first night of the first drifting window.
    pub from: usize,
    /// ... and of the last night of the last one.
    pub to: usize,
    /// Last night of the first drifting window.
    pub first_end: usize,
    /// The window with the largest |Z| (ties: the larger change).
    pub strongest_from: usize,
    pub strongest_to: usize,
    pub fit: Fit,
}

/// Mann-Kendall S and Z of `y` in time order.
pub fn mann_kendall(y: &[f64]) -> (f64, f64) {
    let n = y.len();
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += match y[j].partial_cmp(&y[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    // Variance with groups of tied values t: [n(n-1)(2n+5) - sum t(t-1)(2t+5)] / 18.
    let mut sorted: Vec<f64> = y.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && sorted[j] == sorted[i] {
            j += 1;
        }
        let t = (j - i) as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        i = j;
    }
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    let s = s as f64;
    let z = if var <= 0.0 {
        0.0
    } else if s > 0.0 {
        (s - 1.0) / var.sqrt()
    } else if s < 0.0 {
        (s + 1.0) / var.sqrt()
    } else {
        0.0
    };
    (s, z)
}

/// Theil-Sen slope and intercept of `y` over `x` (pairs with equal x skipped).
pub fn sen(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let mut slopes = Vec::with_capacity(x.len() * x.len().saturating_sub(1) / 2);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            let dx = x[j] - x[i];
            if dx != 0.0 {
                slopes.push((y[j] - y[i]) / dx);
            }
        }
    }
    let slope = median(&mut slopes)?;
    let mut icpt: Vec<f64> = x.iter().zip(y).map(|(x, y)| y - slope * x).collect();
    Some((slope, median(&mut icpt)?))
}

/// Fits one window.
pub fn fit(x: &[f64], y: &[f64]) -> Option<Fit> {
    if x.len() < 3 {
        return None;
    }
    let (_, z) = mann_kendall(y);
    let (slope, icpt) = sen(x, y)?;
    let start_level = icpt + slope * x[0];
    let span = x[x.len() - 1] - x[0];
    let level = if start_level.abs() > f64::EPSILON {
        start_level.abs()
    } else {
        let mut v = y.to_vec();
        median(&mut v)?.abs()
    };
    let change_pct = if level > 0.0 {
        slope * span / level * 100.0
    } else {
        0.0
    };
    Some(Fit {
        slope_per_day: slope,
        start_level,
        z,
        change_pct,
        nights: x.len(),
    })
}

/// True when `f` drifts the worse way under `rule`.
pub fn drifts(f: &Fit, higher_is_better: bool, rule: &Rule) -> bool {
    let sign = if higher_is_better { -1.0 } else { 1.0 };
    f.nights >= rule.min_nights && sign * f.z >= rule.z && sign * f.change_pct >= rule.pct
}

/// Scans every window of (`x` days, `y` values) in time order and returns the drifting
/// episodes.
pub fn scan(x: &[f64], y: &[f64], higher_is_better: bool, rule: &Rule) -> Vec<Episode> {
    let mut out: Vec<Episode> = Vec::new();
    let mut open: Option<Episode> = None;
    for end in 0..x.len() {
        let start = (end + 1).saturating_sub(rule.window.max(rule.min_nights));
        let hit = if end + 1 - start >= rule.min_nights {
            fit(&x[start..=end], &y[start..=end]).filter(|f| drifts(f, higher_is_better, rule))
        } else {
            None
        };
        match (hit, open.as_mut()) {
            (Some(f), Some(e)) => {
                e.to = end;
                let stronger = f.z.abs() > e.fit.z.abs()
                    || (f.z.abs() == e.fit.z.abs() && f.change_pct.abs() > e.fit.change_pct.abs());
                if stronger {
                    e.fit = f;
                    e.strongest_from = start;
                    e.strongest_to = end;
                }
            }
            (Some(f), None) => {
                open = Some(Episode {
                    from: start,
                    to: end,
                    first_end: end,
                    strongest_from: start,
                    strongest_to: end,
                    fit: f,
                })
            }
            (None, _) => out.extend(open.take()),
        }
    }
    out.extend(open);
    // Windows that straddle the noise floor flicker: episodes a few nights apart are one.
    let mut merged: Vec<Episode> = Vec::new();
    for e in out {
        match merged.last_mut() {
            Some(m) if e.first_end <= m.to + 3 => {
                m.to = e.to;
                if e.fit.z.abs() > m.fit.z.abs() {
                    m.fit = e.fit;
                    m.strongest_from = e.strongest_from;
                    m.strongest_to = e.strongest_to;
                }
            }
            _ => merged.push(e),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn noise(i: usize, amp: f64) -> f64 {
        // Deterministic, zero-mean-ish wiggle.
        amp * (((i * 7919) % 13) as f64 / 6.0 - 1.0)
    }

    #[test]
    fn mann_kendall_of_known_series() {
        let (s, z) = mann_kendall(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        assert_eq!(s, 28.0);
        assert!((z - 27.0 / (8.0 * 7.0 * 21.0 / 18.0f64).sqrt()).abs() < 1e-12);
        let (s, z) = mann_kendall(&[3.0, 3.0, 3.0, 3.0]);
        assert_eq!((s, z), (0.0, 0.0));
        let (s, _) = mann_kendall(&[5.0, 4.0, 4.0, 1.0]);
        assert_eq!(s, -5.0);
    }

    #[test]
    fn sen_slope_ignores_one_outlier() {
        let x: Vec<f64> = (0..10).map(f64::from).collect();
        let mut y: Vec<f64> = x.iter().map(|x| 2.0 * x + 1.0).collect();
        y[5] = 1000.0;
        let (slope, icpt) = sen(&x, &y).unwrap();
        assert!((slope - 2.0).abs() < 1e-9 && (icpt - 1.0).abs() < 1e-9);
    }

    #[test]
    fn two_percent_a_week_over_four_weeks_is_a_drift_and_noise_is_not() {
        let rule = Rule::default();
        let x: Vec<f64> = (0..28).map(f64::from).collect();
        // p99 10 us growing 2% a week, +-0.5% noise: 8% over the window.
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, d)| 10.0 * (1.0 + 0.02 * d / 7.0) + noise(i, 0.05))
            .collect();
        let e = scan(&x, &y, false, &rule);
        assert_eq!(e.len(), 1, "{e:?}");
        let f = e[0].fit;
        assert!(f.change_pct > 6.0 && f.change_pct < 10.0, "{f:?}");
        assert_eq!(e[0].to, 27);
        // The same numbers are an improvement for a higher-is-better metric: no drift.
        assert!(scan(&x, &y, true, &rule).is_empty());
        // Flat with the same noise: nothing.
        let flat: Vec<f64> = (0..28).map(|i| 10.0 + noise(i, 0.05)).collect();
        assert!(scan(&x, &flat, false, &rule).is_empty());
        // Significant but tiny (0.1% a week): not reported.
        let tiny: Vec<f64> = x.iter().map(|d| 10.0 * (1.0 + 0.001 * d / 7.0)).collect();
        assert!(scan(&x, &tiny, false, &rule).is_empty());
    }

    #[test]
    fn one_bad_night_is_not_a_drift() {
        let x: Vec<f64> = (0..20).map(f64::from).collect();
        let mut y: Vec<f64> = (0..20).map(|i| 90.0 + noise(i, 0.5)).collect();
        y[12] = 40.0;
        assert!(scan(&x, &y, true, &Rule::default()).is_empty());
        y[19] = 40.0;
        assert!(
            scan(&x, &y, true, &Rule::default()).is_empty(),
            "bad last night"
        );
    }

    proptest! {
        #[test]
        fn a_steady_linear_rise_is_found_whatever_the_level(level in 0.5f64..1e6, pct_per_night in 0.5f64..5.0) {
            let x: Vec<f64> = (0..14).map(f64::from).collect();
            let y: Vec<f64> = x.iter().map(|d| level * (1.0 + pct_per_night / 100.0 * d)).collect();
            let e = scan(&x, &y, false, &Rule::default());
            prop_assert!(!e.is_empty());
            prop_assert!((e[0].fit.slope_per_day - level * pct_per_night / 100.0).abs() < 1e-6 * level);
        }
    }
}
