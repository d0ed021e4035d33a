//! The acceptance plan: the distinct runs a profile needs (`verdict::feed`), each made a
//! complete command line of the suite (launcher, tool, the profile's options, the
//! runner's own: result file, per-pair budget, peer timeout, fabric plan), in stage order.

use std::path::{Path, PathBuf};
use std::time::Duration;

use verdict::feed::{self, Run, Stage};
use verdict::profile::Profile;

use crate::cluster::Cluster;
use crate::model::{self, is_sweep};

/// How the runner shapes every run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Seconds each pair measures each size in a bandwidth sweep (bench-bw -D).
    pub per_pair_s: f64,
    /// Longest wait for a peer, seconds (every tool's --timeout).
    pub peer_timeout_s: u32,
    /// The fabric plan (`--plan`), given to the sweeps and the report.
    pub fabric_plan: Option<PathBuf>,
    /// Directory of the suite's binaries.
    pub bin: PathBuf,
}

/// One command of the acceptance run.
#[derive(Debug, Clone)]
pub struct Step {
    /// 1-based, in run order.
    pub index: usize,
    pub stage: Stage,
    pub run: Run,
    /// The checks (and profile tables) it feeds.
    pub feeds: Vec<String>,
    /// The whole command line: launcher, tool, arguments.
    pub argv: Vec<String>,
    /// Its result document, relative to the output directory.
    pub json: PathBuf,
    /// What the time model projects for it.
    pub projected: Duration,
    /// Why it cannot run through this launcher (over agents: the audits, the
    /// collectives): recorded as not run, its checks MISSING.
    pub not_here: Option<String>,
}

impl Step {
    /// The command as a user would type it (arguments with blanks quoted).
    pub fn command(&self) -> String {
        self.argv
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c))
                {
                    format!("'{}'", a.replace('\'', "'\\''"))
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The tool's log file, relative to the output directory.
    pub fn log(&self) -> PathBuf {
        self.json.with_extension("log")
    }
}

/// The steps of `stages` for `profile` on `cluster`, in stage order.
pub fn steps(p: &Profile, cluster: &Cluster, s: &Settings, stages: &[Stage]) -> Vec<Step> {
    let mut out = Vec::new();
    for (run, feeds) in feed::runs(p) {
        if !stages.contains(&run.stage) {
            continue;
        }
        let index = out.len() + 1;
        let json = PathBuf::from("results").join(format!(
            "{index:02}-{}-{}.json",
            run.stage.name(),
            run.tool
        ));
        let args = runner_args(&run, cluster, s, &json);
        let mut argv = cluster.prefix(run.launch);
        argv.push(s.bin.join(run.tool).display().to_string());
        argv.extend(args);
        let projected = model::project(&run, &argv, cluster, s.per_pair_s);
        let not_here = cluster.not_here(run.tool, run.launch);
        out.push(Step {
            index,
            stage: run.stage,
            run,
            feeds,
            argv,
            json,
            projected,
            not_here,
        });
    }
    out
}

/// The run's own arguments with the runner's: the fabric plan where a sweep asks for it,
/// the device per rank, the per-pair budget, the peer timeout, the result file.
fn runner_args(run: &Run, cluster: &Cluster, s: &Settings, json: &Path) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut it = run.args.iter();
    while let Some(a) = it.next() {
        if a == "--plan" {
            // The feed names the plan a cabling check compares with; without one the
            // cabling is judged against the fabric's own regularity.
            it.next();
            continue;
        }
        args.push(a.clone());
    }
    let sweep = is_sweep(run);
    let verbs = args
        .windows(2)
        .any(|w| w[0] == "--transport" && w[1] == "verbs");
    if sweep {
        if let Some(plan) = &s.fabric_plan {
            args.extend(["--plan".into(), plan.display().to_string()]);
        }
        if run.tool == "bench-bw" {
            args.extend(["-D".into(), s.per_pair_s.to_string()]);
        }
        // Local rank r measures on the node's r-th NIC: one rank per rail (an agent
        // has its own device).
        let agents = cluster.agents_for(run.tool).is_some();
        if verbs && cluster.nics > 1 && !cluster.is_local() && !agents {
            args.extend(["-d".into(), "auto".into()]);
        }
    }
    if let Some(file) = cluster.agents_for(run.tool) {
        args.extend(["--hosts".into(), file.display().to_string()]);
    }
    if cluster.is_local() && (sweep || run.tool == "bench-congestion") {
        args.push("--include-local".into());
    }
    args.extend(["--timeout".into(), s.peer_timeout_s.to_string()]);
    args.extend(["--json".into(), json.display().to_string()]);
    args
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cluster::Launcher;

    pub(crate) fn settings() -> Settings {
        Settings {
            per_pair_s: 0.5,
            peer_timeout_s: 30,
            fabric_plan: None,
            bin: PathBuf::from("/opt/fabcheck/bin"),
        }
    }

    #[test]
    fn roce_100g_on_16_nodes_runs_each_feeding_run_once_in_stage_order() {
        let p = verdict::profile::load("roce-100g").unwrap();
        let c = Cluster {
            launcher: Launcher::Mpirun {
                hostfile: "hosts".into(),
            },
            nodes: 16,
            nics: 8,
            gpus: 8,
            launcher_args: vec![],
            wrap: vec![],
        };
        let steps = steps(&p, &c, &settings(), &Stage::ALL);
        let stages: Vec<Stage> = steps.iter().map(|s| s.stage).collect();
        let mut sorted = stages.clone();
        sorted.sort();
        assert_eq!(stages, sorted, "stage order");
        // Every check of the profile is fed by exactly one step.
        for c in &p.checks {
            let n = steps.iter().filter(|s| s.feeds.contains(&c.id)).count();
            assert_eq!(n, 1, "{}", c.id);
        }
        let bw = steps
            .iter()
            .find(|s| s.feeds.contains(&"write-bw-large".to_string()))
            .unwrap();
        assert_eq!(
            bw.command(),
            "mpirun --hostfile hosts --map-by ppr:8:node --bind-to none -np 128 \
             /opt/fabcheck/bin/bench-bw --pattern all-pairs --test write -s 64K --transport verbs \
             -D 0.5 -d auto --timeout 30 --json results/03-links-bench-bw.json"
        );
        let audit = &steps[0];
        assert_eq!(audit.stage, Stage::Config);
        assert!(audit
            .command()
            .contains("-np 16 /opt/fabcheck/bin/fabric-doctor"));
    }

    #[test]
    fn over_agents_the_sweeps_go_to_their_coordinators_and_the_rest_is_not_run() {
        let p = verdict::profile::load("roce-100g").unwrap();
        let c = Cluster {
            launcher: Launcher::Agents {
                bw: "/etc/fabcheck/bw-agents".into(),
                lat: None,
                one_host: false,
            },
            nodes: 16,
            nics: 8,
            gpus: 8,
            launcher_args: vec![],
            wrap: vec![],
        };
        let steps = steps(&p, &c, &settings(), &Stage::ALL);
        let bw = steps
            .iter()
            .find(|s| s.feeds.contains(&"write-bw-large".to_string()))
            .unwrap();
        assert_eq!(
            bw.command(),
            "/opt/fabcheck/bin/bench-bw --pattern all-pairs --test write -s 64K --transport verbs \
             -D 0.5 --hosts /etc/fabcheck/bw-agents --timeout 30 --json results/03-links-bench-bw.json"
        );
        assert!(bw.not_here.is_none());
        let why = |tool: &str| {
            steps
                .iter()
                .find(|s| s.run.tool == tool)
                .and_then(|s| s.not_here.clone())
                .unwrap_or_default()
        };
        assert!(why("fabric-doctor").contains("not over agents"));
        assert!(why("bench-collective").contains("need MPI"));
        assert!(why("bench-lat").contains("--lat-agents"));
        assert_eq!(why("bench-congestion"), "");
        // One line each, as the terminal prints it (a broken continuation left 18 blanks).
        for tool in ["fabric-doctor", "bench-lat"] {
            assert!(!why(tool).contains("  "), "{}", why(tool));
        }
    }

    #[test]
    fn a_local_rehearsal_counts_each_rank_as_a_node() {
        let p = verdict::profile::load("loopback-demo-cluster").unwrap();
        let c = Cluster {
            launcher: Launcher::Local,
            nodes: 4,
            nics: 1,
            gpus: 1,
            launcher_args: vec![],
            wrap: vec![],
        };
        let steps = steps(&p, &c, &settings(), &[Stage::Links]);
        assert_eq!(steps.len(), 2, "{steps:?}");
        for s in &steps {
            assert!(s.command().contains("--include-local"), "{}", s.command());
            assert!(s
                .command()
                .starts_with("mpirun --oversubscribe --bind-to none -np 4 "));
        }
    }
}
