//! Noisy neighbours: how much one tenant's traffic takes from another's on a shared
//! fabric, from `bench-congestion --canary-tenant A --congestor-tenant B` runs (GPCNeT's
//! canaries in tenant A, its congestors in tenant B). Each run gives the impact factors of
//! the canary tests (loaded against isolated) for one ordered pair of tenants.
//!
//! The bound is the profile's (`[isolation] neighbour_impact_max`) for every test; for the
//! bandwidth test of a canary tenant promised an ETS share of the shared links, also what
//! that share promises: a class guaranteed s % of a link keeps at least s % of its
//! bandwidth under any neighbour, a factor of at most 100 / s. Every ordered pair of the
//! tenants must have been measured: a pair not run is not judged, and the check is MISSING
//! (naming the pairs) unless a measured one fails.

use std::collections::BTreeMap;

use results::congestion::CongestionRun;
use results::tenants::Tenants;
use verdict::input::Loaded;
use verdict::judge::{Outcome, Status};

const WHAT: &str = "Noisy neighbours: every tenant's canaries (ring latency, ring bandwidth, allreduce) while another tenant's nodes run GPCNeT's congestors, against the same canaries alone, per ordered pair of tenants (impact factor, unrounded)";

const NO_RUN: &str = "no noisy-neighbour run in the inputs: run `mpirun ... bench-congestion --tenants FILE --canary-tenant A --congestor-tenant B --json FILE` on the two tenants' nodes, for each ordered pair (docs/tenants.md)";

/// One canary test of one run, judged.
struct Judged {
    /// `globex on acme: ring_bandwidth_128kib 3.2 x (bound 2 x, ETS 50 %)`.
    said: String,
    impact: f64,
    failed: bool,
}

/// The `isolation-neighbour-impact` check over the inputs' noisy-neighbour runs.
pub fn check(max: f64, docs: &[Loaded], tenants: Option<&Tenants>) -> Outcome {
    let runs: Vec<(&CongestionRun, &str, &str)> = docs
        .iter()
        .filter_map(|d| d.doc.congestion.as_ref())
        .filter(|c| c.incast.is_none())
        .filter_map(|c| {
            Some((
                c,
                c.canary_tenant.as_deref()?,
                c.congestor_tenant.as_deref()?,
            ))
        })
        .collect();
    if runs.is_empty() {
        return missing(max, NO_RUN.into());
    }
    let mut judged = Vec::new();
    let mut measured: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (run, canary, congestor) in &runs {
        *measured.entry((canary, congestor)).or_default() += 1;
        let ets = tenants
            .and_then(|t| t.get(canary))
            .and_then(|t| t.ets_share_percent);
        judged.extend(judge_run(run, canary, congestor, max, ets));
    }
    let unmeasured = match tenants {
        Some(t) => unmeasured_pairs(t, &measured),
        // Which ordered pairs exist is the tenants' to say: without them no run set can
        // be known complete.
        None => vec!["every pair (no tenants given: aggregate --tenants FILE, or a --plan with [[tenant]] tables)".into()],
    };
    outcome(max, &judged, &unmeasured)
}

/// Each canary test of a run against its bound.
fn judge_run(
    run: &CongestionRun,
    canary: &str,
    congestor: &str,
    max: f64,
    ets_share_percent: Option<f64>,
) -> Vec<Judged> {
    run.canary_tests
        .iter()
        .filter(|t| t.impact_mean.is_finite())
        .map(|t| {
            let promised = ets_share_percent
                .filter(|s| t.unit == "gbit_s" && *s > 0.0)
                .map(|s| 100.0 / s);
            let bound = promised.map_or(max, |p| p.min(max));
            let why = match promised {
                Some(p) => format!("bound {} x: the profile's {max}, the ETS share's {}", fmt(bound), fmt(p)),
                None => format!("bound {} x", fmt(bound)),
            };
            Judged {
                said: format!(
                    "{congestor} on {canary}: {} {} x ({why}; isolated {:.4}, loaded {:.4} {}, seed {})",
                    t.test,
                    fmt(t.impact_mean),
                    t.isolated.mean,
                    t.loaded.mean,
                    t.unit,
                    run.seed
                ),
                impact: t.impact_mean,
                failed: t.impact_mean > bound,
            }
        })
        .collect()
}

/// The ordered pairs of the tenants that no run measured.
fn unmeasured_pairs(t: &Tenants, measured: &BTreeMap<(&str, &str), usize>) -> Vec<String> {
    let names = t.names();
    let mut out = Vec::new();
    for a in &names {
        for b in names.iter().filter(|b| *b != a) {
            if !measured.contains_key(&(*a, *b)) {
                out.push(format!("{b} on {a}"));
            }
        }
    }
    out
}

fn outcome(max: f64, judged: &[Judged], unmeasured: &[String]) -> Outcome {
    let worst = judged.iter().map(|j| j.impact).fold(f64::NAN, f64::max);
    let failed: Vec<&str> = judged
        .iter()
        .filter(|j| j.failed)
        .map(|j| j.said.as_str())
        .collect();
    let (status, at) = if !failed.is_empty() {
        (Status::Fail, failed.join("; "))
    } else if judged.is_empty() {
        (
            Status::Missing,
            "the noisy-neighbour runs measured no canary test".to_string(),
        )
    } else if !unmeasured.is_empty() {
        (
            Status::Missing,
            format!(
                "not measured: {} (run bench-congestion --canary-tenant A --congestor-tenant B for each); the {} measured within their bounds",
                unmeasured.join(", "),
                judged.len()
            ),
        )
    } else {
        let worst_said = judged
            .iter()
            .max_by(|a, b| a.impact.total_cmp(&b.impact))
            .map(|j| j.said.as_str())
            .unwrap_or_default();
        (Status::Pass, format!("worst: {worst_said}"))
    };
    Outcome {
        status,
        measured: worst.is_finite().then_some(worst),
        worst_at: at,
        observations: judged.len(),
        ..base(max)
    }
}

fn fmt(v: f64) -> String {
    verdict::judge::format_value(v)
}

fn missing(max: f64, why: String) -> Outcome {
    Outcome {
        worst_at: why,
        ..base(max)
    }
}

fn base(max: f64) -> Outcome {
    Outcome {
        id: "isolation-neighbour-impact".into(),
        description: WHAT.into(),
        metric: "isolation_neighbour_impact".into(),
        unit: "x".into(),
        selector: "every canary test of every bench-congestion run across two tenants".into(),
        bound: format!(
            "<= {} x (bandwidth: and <= 100 / the canary tenant's ETS share, percent)",
            fmt(max)
        ),
        bound_value: max,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::congestion::{CanaryFigures, CanaryTest};

    fn fig(mean: f64) -> CanaryFigures {
        CanaryFigures {
            samples: 10,
            mean,
            p99: mean,
            ..Default::default()
        }
    }

    /// A run of `congestor`'s congestors on `canary`'s canaries: (latency, bandwidth)
    /// impact factors.
    fn run(canary: &str, congestor: &str, lat: f64, bw: f64) -> Loaded {
        let test = |name: &str, unit: &str, impact: f64| CanaryTest {
            test: name.into(),
            unit: unit.into(),
            isolated: fig(10.0),
            loaded: fig(if unit == "us" {
                10.0 * impact
            } else {
                10.0 / impact
            }),
            impact_mean: impact,
            impact_p99: impact,
            impact_p999: None,
        };
        let mut doc =
            results::Document::new("bench-congestion", "mpi", 8, "2026-12-07T00:00:00Z".into());
        doc.congestion = Some(CongestionRun {
            seed: 1,
            canary_tests: vec![
                test("ring_latency_8b", "us", lat),
                test("ring_bandwidth_128kib", "gbit_s", bw),
            ],
            canary_tenant: Some(canary.into()),
            congestor_tenant: Some(congestor.into()),
            ..Default::default()
        });
        Loaded::from_text("n.json", &serde_json::to_string(&doc).expect("a document"))
            .expect("it loads")
    }

    fn tenants(acme_ets: Option<f64>) -> Tenants {
        let ets = acme_ets
            .map(|s| format!("ets_share_percent = {s}\n"))
            .unwrap_or_default();
        Tenants::parse(
            "t.toml",
            &format!("version = 1\n[[tenant]]\nname = \"acme\"\nnodes = [\"a1\", \"a2\"]\n{ets}[[tenant]]\nname = \"globex\"\nnodes = [\"g1\", \"g2\"]\n"),
        )
        .expect("tenants")
    }

    #[test]
    fn every_ordered_pair_within_the_bound_passes_and_an_unmeasured_pair_is_missing() {
        let t = tenants(None);
        let both = [
            run("acme", "globex", 1.3, 1.1),
            run("globex", "acme", 1.5, 1.2),
        ];
        let o = check(2.0, &both, Some(&t));
        assert_eq!(o.status, Status::Pass, "{o:?}");
        assert_eq!(o.measured, Some(1.5));
        assert_eq!(o.observations, 4);
        let o = check(2.0, &both[..1], Some(&t));
        assert_eq!(o.status, Status::Missing, "{o:?}");
        assert!(o.worst_at.contains("not measured: acme on globex"), "{o:?}");
        let o = check(2.0, &[], Some(&t));
        assert_eq!(o.status, Status::Missing);
        assert!(o.worst_at.contains("--canary-tenant"), "{o:?}");
        // Without the tenants no set of runs is known complete: MISSING, never PASS.
        let o = check(2.0, &both, None);
        assert_eq!(o.status, Status::Missing, "{o:?}");
        assert!(o.worst_at.contains("no tenants given"), "{o:?}");
    }

    /// A neighbour taking more than the profile allows fails, named by the ordered pair;
    /// a tenant promised 50 % by ETS fails a bandwidth factor above 2 even where the
    /// profile allows 4, and a latency factor of 3 still passes the profile's 4.
    #[test]
    fn a_neighbour_beyond_the_bound_or_the_ets_share_fails() {
        let t = tenants(None);
        let runs = [
            run("acme", "globex", 1.2, 3.1),
            run("globex", "acme", 1.1, 1.0),
        ];
        let o = check(2.0, &runs, Some(&t));
        assert_eq!(o.status, Status::Fail, "{o:?}");
        assert!(
            o.worst_at
                .starts_with("globex on acme: ring_bandwidth_128kib 3.1 x"),
            "{o:?}"
        );
        let t = tenants(Some(50.0));
        let runs = [
            run("acme", "globex", 3.0, 2.5),
            run("globex", "acme", 1.1, 1.0),
        ];
        let o = check(4.0, &runs, Some(&t));
        assert_eq!(o.status, Status::Fail, "{o:?}");
        assert!(o.worst_at.contains("the ETS share's 2"), "{o:?}");
        assert!(!o.worst_at.contains("ring_latency_8b"), "{o:?}");
    }
}
