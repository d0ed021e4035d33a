//! Which run feeds each check of a profile: the one table behind `aggregate profile
//! explain`, the next step a MISSING check names, and what an acceptance runner derives its
//! runs from. A run here is an ordinary command of the suite (`bench-bw --pattern all-pairs
//! --test write -s 64K ...`) with where it is launched; nothing here measures.
//!
//! The delivery's stages, in the order the field runs them: the nodes' configuration
//! (audits and inventory, no traffic), the link check (every node pair, both ways), the
//! collectives (NCCL or MPI, the scaling sweep, expert parallelism), the fabric under load.

use results::units::format_size;

use crate::metric::{DiffKind, Metric};
use crate::profile::{Check, Profile, Selector};

/// A stage of the delivery, in the order it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// Audits and inventory: what each node is and how it is configured.
    Config,
    /// Every node pair, both directions, every rail.
    Links,
    /// Collectives across the nodes.
    Collectives,
    /// The fabric under training-like load.
    Load,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Config, Stage::Links, Stage::Collectives, Stage::Load];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Config => "config",
            Stage::Links => "links",
            Stage::Collectives => "collectives",
            Stage::Load => "load",
        }
    }
}

/// Where a run's processes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Launch {
    /// One rank on every node (the audits).
    EveryNode,
    /// A rank per NIC on every node, under mpirun, srun or the agents (sweeps, load).
    EveryRank,
    /// A rank per GPU on every node, under mpirun or srun (collectives).
    EveryGpu,
    /// A rank per node of two tenants, once per ordered pair of tenants (the noisy
    /// neighbours); made by hand, not by the runner.
    EachTenantPair,
}

impl Launch {
    pub fn describe(self) -> &'static str {
        match self {
            Launch::EveryNode => "one rank on every node",
            Launch::EveryRank => "a rank per NIC on every node",
            Launch::EveryGpu => "a rank per GPU on every node",
            Launch::EachTenantPair => {
                "a rank per node of two tenants, once per ordered pair of tenants (by hand)"
            }
        }
    }
}

/// One command of the suite, as a user would type it after the launcher.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Run {
    pub stage: Stage,
    pub launch: Launch,
    pub tool: &'static str,
    pub args: Vec<String>,
}

impl Run {
    fn new(stage: Stage, launch: Launch, tool: &'static str, args: &[&str]) -> Run {
        Run {
            stage,
            launch,
            tool,
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn arg(mut self, a: impl Into<String>) -> Run {
        self.args.push(a.into());
        self
    }

    /// The command line after the launcher: `bench-bw --pattern all-pairs --test write`.
    pub fn command(&self) -> String {
        std::iter::once(self.tool.to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The run that feeds a `[[check]]`: the tool its metric is read from, with the options
/// its selector narrows to.
pub fn for_check(check: &Check) -> Run {
    let sel = &check.select;
    match check.metric {
        Metric::Latency(_) => point_to_point(sel, "bench-lat", "send_lat"),
        Metric::BwAvg
        | Metric::BwPeak
        | Metric::BwFluctuation
        | Metric::MsgRate
        | Metric::CpuPer100G
        | Metric::LinkLoss
        | Metric::Discards
        | Metric::PostFecErrors
        | Metric::PauseShare
        | Metric::CnpRate
        | Metric::PreFecBer => point_to_point(sel, "bench-bw", "write_bw"),
        Metric::CopyBw => {
            let test = sel.test.as_deref().unwrap_or("h2d_bw");
            Run::new(
                Stage::Config,
                Launch::EveryGpu,
                "bench-bw",
                &["--test", test.trim_end_matches("_bw"), "--use-cuda", "auto"],
            )
        }
        Metric::Busbw
        | Metric::Algbw
        | Metric::Efficiency
        | Metric::CollTime
        | Metric::Wrong
        | Metric::ScalingEfficiency => collective(check),
        Metric::EpNetworkBw | Metric::EpDeepepBw | Metric::EpStepP99 | Metric::EpImbalance => {
            expert_parallel(sel)
        }
        Metric::FailedPairs | Metric::MatrixCoverage | Metric::Suspects => {
            point_to_point(sel, "bench-bw", "write_bw")
        }
        Metric::Cabling(kind) => cabling(sel, kind),
        Metric::Disturbed => Run::new(
            Stage::Links,
            Launch::EveryRank,
            "bench-bw",
            &["--pattern", "all-pairs"],
        ),
    }
}

/// A sweep of every node pair by `tool`, narrowed by the selector.
fn point_to_point(sel: &Selector, tool: &'static str, default_test: &str) -> Run {
    // TCP has only two-sided send.
    let default_test = match sel.transport.as_deref() {
        Some("tcp") => default_test.replace("write", "send"),
        _ => default_test.to_string(),
    };
    let test = sel.test.as_deref().unwrap_or(&default_test);
    let op = test.trim_end_matches("_lat").trim_end_matches("_bw");
    let mut run = Run::new(
        Stage::Links,
        Launch::EveryRank,
        tool,
        &["--pattern", "all-pairs", "--test", op],
    );
    run = match (sel.size_exact(), sel.min_size, sel.max_size) {
        (Some(s), _, _) => run.arg("-s").arg(format_size(s)),
        (None, None, None) => run,
        (None, Some(min), _) if tool == "bench-bw" => run.arg("-s").arg(format_size(min)),
        (None, _, Some(max)) => run.arg("-a").arg("--max-size").arg(format_size(max)),
        _ => run.arg("-a"),
    };
    if let Some(t) = sel.transport.as_deref() {
        run = run.arg("--transport").arg(t);
    }
    if matches!(sel.memory.as_deref(), Some("cuda")) {
        run = run.arg("--use-cuda").arg("auto");
    }
    match sel.bidirectional {
        Some(true) => run.arg("-b"),
        Some(false) => run.arg("--one-way"),
        None => run,
    }
}

/// bench-collective over every GPU (or rank), nccl-tests' options from the selector.
fn collective(check: &Check) -> Run {
    let sel = &check.select;
    let name = sel.collective.as_deref().unwrap_or("all_reduce");
    let mut run = Run::new(
        Stage::Collectives,
        Launch::EveryGpu,
        "bench-collective",
        &[name],
    );
    match (sel.size_exact(), sel.min_size, sel.max_size) {
        (Some(s), _, _) => {
            run = run
                .arg("-b")
                .arg(format_size(s))
                .arg("-e")
                .arg(format_size(s))
        }
        (None, min, max) => {
            if let Some(min) = min {
                run = run.arg("-b").arg(format_size(min));
            }
            if let Some(max) = max {
                run = run.arg("-e").arg(format_size(max));
            } else if let Some(min) = min {
                run = run.arg("-e").arg(format_size(min.max(1 << 20) * 4));
            }
        }
    }
    if let Some(b) = sel.backend.as_deref() {
        run = run.arg("--backend").arg(b);
    }
    // Results are checked by default (-c 1), which `wrong_elements` reads.
    if check.metric == Metric::ScalingEfficiency {
        run = run.arg("--scaling");
    }
    run
}

fn expert_parallel(sel: &Selector) -> Run {
    let mut run = Run::new(
        Stage::Load,
        Launch::EveryGpu,
        "bench-collective",
        &["ep_dispatch", "ep_combine"],
    );
    if let Some(b) = sel.backend.as_deref() {
        run = run.arg("--backend").arg(b);
    }
    run
}

/// Cabling is judged from the neighbours each node reports in its documents (a sweep's
/// inventory carries LLDP or SMP discovery), against the plan the report is given
/// (`--plan`) or the fabric's own regularity: any sweep feeds it.
fn cabling(_sel: &Selector, _kind: DiffKind) -> Run {
    Run::new(
        Stage::Links,
        Launch::EveryRank,
        "bench-bw",
        &["--pattern", "all-pairs"],
    )
}

/// Every check a profile makes, with its id and the run that feeds it: the `[[check]]`
/// entries, then the checks its `[inventory]`, `[lossless]`, `[isolation]` and `[load]`
/// tables make.
pub fn for_profile(p: &Profile) -> Vec<(String, Run)> {
    let mut out: Vec<(String, Run)> = p
        .checks
        .iter()
        .map(|c| (c.id.clone(), for_check(c)))
        .collect();
    out.extend(audit_runs(p));
    if let Some(i) = &p.isolation {
        out.extend(isolation_runs(i));
    }
    if let Some(load) = &p.load {
        out.extend(load_runs(load));
    }
    out
}

/// The audit's checks: the inventory (every benchmark document carries its ranks'
/// inventory; the audits add theirs) and the lossless configuration.
fn audit_runs(p: &Profile) -> Vec<(String, Run)> {
    let mut out = Vec::new();
    if p.inventory.is_some() {
        out.push((
            "inventory-*".into(),
            Run::new(Stage::Config, Launch::EveryNode, "fabric-doctor", &[]),
        ));
    }
    if let Some(l) = &p.lossless {
        let mut run = Run::new(Stage::Config, Launch::EveryNode, "fabric-doctor", &[]);
        if let Some(pr) = &l.lossless_priorities {
            let list: Vec<String> = pr.iter().map(|p| p.to_string()).collect();
            run = run.arg("--lossless-priorities").arg(list.join(","));
        }
        out.push(("lossless-*".into(), run));
    }
    out
}

/// The tenants' checks: partitions from each node's audit, reach from the isolation
/// sweep, noisy neighbours from a congestion run per ordered pair of tenants.
fn isolation_runs(i: &crate::profile::IsolationSpec) -> Vec<(String, Run)> {
    let mut out = Vec::new();
    if i.partition_findings_max.is_some() {
        // Each node's audit reads its ports' P_Key tables.
        out.push((
            "isolation-partitions".into(),
            Run::new(Stage::Config, Launch::EveryNode, "fabric-doctor", &[]),
        ));
    }
    if i.breaches_max.is_some() || i.unreached_max.is_some() {
        // Every rank tries every other node's: the tenants come from the plan the runner
        // gives its sweeps (or bench-lat --tenants by hand).
        out.push((
            "isolation-*".into(),
            Run::new(
                Stage::Links,
                Launch::EveryRank,
                "bench-lat",
                &["--pattern", "isolation"],
            ),
        ));
    }
    if i.neighbour_impact_max.is_some() {
        // One tenant's canaries under another's congestors, for each ordered pair.
        out.push((
            "isolation-neighbour-impact".into(),
            Run::new(
                Stage::Load,
                Launch::EachTenantPair,
                "bench-congestion",
                &["--canary-tenant", "A", "--congestor-tenant", "B"],
            ),
        ));
    }
    out
}

/// The fabric under load: GPCNeT's canaries, the incast, expert parallelism.
fn load_runs(load: &crate::profile::LoadSpec) -> Vec<(String, Run)> {
    let mut out = Vec::new();
    if load.impact_mean_max.is_some() || load.impact_p99_max.is_some() {
        out.push((
            "load-impact-*".into(),
            Run::new(Stage::Load, Launch::EveryRank, "bench-congestion", &[]),
        ));
    }
    if load.incast_fairness_min.is_some()
        || load.incast_line_rate_min_pct.is_some()
        || load.victim_bandwidth_impact_max.is_some()
        || load.victim_latency_impact_max.is_some()
    {
        out.push((
            "load-incast-*".into(),
            Run::new(
                Stage::Load,
                Launch::EveryRank,
                "bench-congestion",
                &["--mode", "incast"],
            ),
        ));
    }
    if load.ep_network_of_pairwise_min_pct.is_some() {
        out.push(("load-ep-*".into(), expert_parallel(&Selector::default())));
    }
    out
}

/// The distinct runs a profile needs, each once, with the checks each feeds, in stage
/// order. A sweep that names no size is fed by a sweep of the same test at any size, and
/// one audit serves the inventory and the lossless checks, so those are merged into the
/// run that names more.
pub fn runs(p: &Profile) -> Vec<(Run, Vec<String>)> {
    let mut out: Vec<(Run, Vec<String>)> = Vec::new();
    let mut rows = for_profile(p);
    // The more specific runs first, so the general ones find them to merge into.
    rows.sort_by_key(|(_, r)| std::cmp::Reverse(r.args.len()));
    for (id, run) in rows {
        // Of the runs that serve it, the one that narrows least.
        match out
            .iter_mut()
            .filter(|(have, _)| serves(have, &run))
            .min_by_key(|(have, _)| have.args.len())
        {
            Some((_, ids)) => ids.push(id),
            None => out.push((run, vec![id])),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Whether `have` feeds whatever `want` would: the same run, or `want` with fewer options
/// where the options it lacks only narrow (a size, the audit's priorities).
fn serves(have: &Run, want: &Run) -> bool {
    if (have.stage, have.launch, have.tool) != (want.stage, want.launch, want.tool) {
        return false;
    }
    if have.tool == "fabric-doctor" {
        return want.args.iter().all(|a| have.args.contains(a));
    }
    // The size options of each tool (bench-bw's -b is its bidirectional flag).
    let (sizes, valued): (&[&str], &[&str]) = if have.tool == "bench-collective" {
        (&["-b", "-e"], &["-b", "-e"])
    } else {
        (&["-s", "-a"], &["-s"])
    };
    let strip = |r: &Run| -> Vec<String> {
        let mut out = Vec::new();
        let mut it = r.args.iter();
        while let Some(a) = it.next() {
            if valued.contains(&a.as_str()) {
                it.next();
            } else if !sizes.contains(&a.as_str()) {
                out.push(a.clone());
            }
        }
        out
    };
    // Options as (flag, value) pairs: a run that names no test or transport takes any.
    let pairs = |args: Vec<String>| -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        let mut it = args.into_iter().peekable();
        while let Some(a) = it.next() {
            let v = it.next_if(|n| !n.starts_with('-'));
            out.push((a, v));
        }
        out
    };
    let want_sized = want.args.iter().any(|a| sizes.contains(&a.as_str()));
    let (h, w) = (pairs(strip(have)), pairs(strip(want)));
    // What `have` adds must only narrow what `want` takes (a check that names no test,
    // transport or backend takes any); a mode, a direction or GPU memory is another run.
    const NARROWING: [&str; 3] = ["--test", "--transport", "--backend"];
    have == want
        || (!want_sized
            && w.iter().all(|p| h.contains(p))
            && h.iter()
                .all(|p| w.contains(p) || NARROWING.contains(&p.0.as_str())))
}

/// The sentence a MISSING check prints: the run that would feed it.
pub fn next_step(check: &Check) -> String {
    let run = for_check(check);
    format!(
        "no result matches this check: run `{}` ({}, {} stage)",
        run.command(),
        run.launch.describe(),
        run.stage.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(body: &str) -> Profile {
        crate::profile::parse(&format!("name = \"t\"\n{body}"), "t.toml").unwrap()
    }

    #[test]
    fn every_shipped_profile_check_has_a_run_of_the_suite() {
        for (name, text) in crate::profile::BUILTIN {
            let p = crate::profile::parse(text, name).unwrap();
            let runs = for_profile(&p);
            assert!(runs.len() >= p.checks.len(), "{name}");
            for (id, run) in runs {
                assert!(
                    [
                        "bench-lat",
                        "bench-bw",
                        "bench-collective",
                        "bench-congestion",
                        "fabric-doctor"
                    ]
                    .contains(&run.tool),
                    "{name} {id}: {}",
                    run.command()
                );
            }
        }
    }

    #[test]
    fn the_selector_becomes_the_options() {
        let p = profile(
            "[[check]]\nid=\"lat\"\ndescription=\"d\"\nmetric=\"latency_p99\"\nunit=\"us\"\nmax=5\ntest=\"send_lat\"\ntransport=\"verbs\"\nmax_size=64\n\
             [[check]]\nid=\"bw\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=94\ntest=\"write_bw\"\ntransport=\"verbs\"\nmin_size=\"64K\"\n\
             [[check]]\nid=\"gdr\"\ndescription=\"d\"\nmetric=\"bw_avg\"\nunit=\"Gb/s\"\nmin=380\ntest=\"write_bw\"\ntransport=\"verbs\"\nmemory=\"cuda\"\nbidirectional=false\nsize=\"1M\"\n\
             [[check]]\nid=\"scale\"\ndescription=\"d\"\nmetric=\"scaling_efficiency\"\nunit=\"%\"\nmin=82\ncollective=\"all_reduce\"\nmin_size=\"64M\"\n",
        );
        let cmd: Vec<String> = p.checks.iter().map(|c| for_check(c).command()).collect();
        assert_eq!(
            cmd,
            [
                "bench-lat --pattern all-pairs --test send -a --max-size 64 --transport verbs",
                "bench-bw --pattern all-pairs --test write -s 64K --transport verbs",
                "bench-bw --pattern all-pairs --test write -s 1M --transport verbs --use-cuda auto --one-way",
                "bench-collective all_reduce -b 64M -e 256M --scaling",
            ]
        );
        assert_eq!(for_check(&p.checks[3]).stage, Stage::Collectives);
        // A sized sweep serves a check that names no size; a latency sweep does not.
        let any_size = profile(
            "[[check]]\nid=\"loss\"\ndescription=\"d\"\nmetric=\"link_loss\"\nunit=\"%\"\nmax=0.01\ntest=\"write_bw\"\ntransport=\"verbs\"\n",
        );
        let mut both = p.clone();
        both.checks.extend(any_size.checks);
        let runs = runs(&both);
        let bw = runs
            .iter()
            .find(|(r, _)| r.command().contains("-s 64K"))
            .unwrap();
        assert_eq!(bw.1, ["bw", "loss"]);
        assert_eq!(runs.len(), 4, "{runs:?}");
        // Only narrowing options serve a wider check: another mode, a direction or GPU
        // memory is another run.
        let roce = crate::profile::load("roce-100g").unwrap();
        let runs = super::runs(&roce);
        let feeding = |id: &str| {
            runs.iter()
                .find(|(_, ids)| ids.iter().any(|i| i == id))
                .map(|(r, _)| r.command())
                .unwrap()
        };
        assert_eq!(feeding("load-impact-*"), "bench-congestion");
        assert!(!feeding("link-loss").contains("--use-cuda"));
        assert!(!feeding("sweep-no-suspect").contains("--one-way"));
        assert!(next_step(&p.checks[0]).contains("`bench-lat --pattern all-pairs"));
    }

    #[test]
    fn isolation_is_fed_by_the_isolation_sweep() {
        let p = profile("[isolation]\nbreaches_max = 0\n");
        let rows = for_profile(&p);
        let (id, run) = rows.iter().find(|(id, _)| id == "isolation-*").unwrap();
        assert_eq!(id, "isolation-*");
        assert_eq!(run.tool, "bench-lat");
        assert_eq!(run.args, ["--pattern", "isolation"]);
        assert_eq!(run.stage, Stage::Links);
        assert!(!rows.iter().any(|(id, _)| id == "isolation-partitions"));
        let p = profile("[isolation]\npartition_findings_max = 0\n");
        let rows = for_profile(&p);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].0.as_str(), rows[0].1.tool),
            ("isolation-partitions", "fabric-doctor")
        );
        // Noisy neighbours: a run per ordered pair of tenants, made by hand.
        let p = profile("[isolation]\nneighbour_impact_max = 2\n");
        let rows = for_profile(&p);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0, "isolation-neighbour-impact");
        assert_eq!(rows[0].1.launch, Launch::EachTenantPair);
        assert_eq!(
            rows[0].1.command(),
            "bench-congestion --canary-tenant A --congestor-tenant B"
        );
    }
}
