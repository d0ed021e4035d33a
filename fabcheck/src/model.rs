//! The time model of an acceptance run: what each step should take on the cluster, for
//! `--dry-run`, the progress line and each step's deadline.
//!
//! The all-pairs sweeps follow the figures measured here (docs/directions.md, "The time
//! model"; scripts/sweep-time-model.sh): N nodes are N-1 rounds (N rounds when N is odd) of
//! disjoint pairs by the circle method, the rails of a node run at once (a rank per NIC),
//! and a round costs its sizes' measuring time plus about 0.1 s of barrier, connections and
//! gather, growing with log2 of the ranks. Latency sizes cost their iterations of round
//! trips (1000 by default, as perftest) at a conservative 10 us plus the wire time of a
//! 100 Gb/s link. The collectives, the audits and the load runs are bounded by their own
//! defaults (nccl-tests' 5 warm-up and 20 timed iterations, out of place and in place).

use std::time::Duration;

use verdict::feed::Run;

use crate::cluster::Cluster;

/// Whether a run sweeps node pairs (bench-lat, bench-bw with a pattern).
pub fn is_sweep(run: &Run) -> bool {
    run.args.iter().any(|a| a == "--pattern")
}

/// Seconds a sweep round costs beyond measuring, at `ranks` ranks.
fn round_overhead_s(ranks: u32) -> f64 {
    0.06 + 0.003 * f64::from(ranks.max(2)).log2()
}

/// Seconds to start the processes of a launch over `nodes` nodes.
fn launch_s(nodes: u32) -> f64 {
    3.0 + 0.5 * f64::from(nodes.max(1)).log2()
}

/// The value after `flag` in `argv`.
fn value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.windows(2)
        .find(|w| w[0] == flag)
        .map(|w| w[1].as_str())
}

/// The message sizes a point-to-point run measures.
fn p2p_sizes(argv: &[String]) -> Vec<u64> {
    let size = |f| value(argv, f).and_then(|v| results::units::parse_size(v).ok());
    if argv.iter().any(|a| a == "-a") {
        results::units::power_of_two_sizes(2, size("--max-size").unwrap_or(8 << 20))
    } else {
        vec![size("-s").unwrap_or(65536)]
    }
}

/// Seconds one pair measures one latency size: its round trips at 10 us plus the wire.
fn latency_size_s(size: u64) -> f64 {
    let iterations = 1000.0;
    iterations * 2.0 * (10e-6 + size as f64 * 8.0 / 100e9)
}

/// The projected wall time of a step.
/// `per_pair_s` is the bandwidth sweeps' per-pair budget (bench-bw -D).
pub fn project(run: &Run, argv: &[String], cluster: &Cluster, per_pair_s: f64) -> Duration {
    let nodes = cluster.nodes.max(2);
    let secs = if is_sweep(run) {
        let rounds = if nodes.is_multiple_of(2) {
            nodes - 1
        } else {
            nodes
        };
        let sizes = p2p_sizes(argv);
        let measuring: f64 = if run.tool == "bench-bw" {
            sizes.len() as f64 * per_pair_s
        } else {
            sizes.iter().map(|&z| latency_size_s(z)).sum()
        };
        f64::from(rounds) * (measuring + round_overhead_s(cluster.ranks(run.launch)))
    } else {
        match run.tool {
            "bench-collective" => collective_s(run, argv, cluster),
            "fabric-doctor" => 15.0,
            // Warm-up, isolated and loaded phases of every canary test, or incast rounds.
            "bench-congestion" => 90.0,
            _ => 60.0,
        }
    };
    Duration::from_secs_f64(secs + launch_s(nodes))
}

/// nccl-tests' loop at each size: 25 calls out of place and in place, each at an
/// AllReduce's 2(n-1)/n of the data over 100 Gb/s per GPU, plus 50 us a call; the scaling
/// sweep repeats it at every power-of-two communicator up to the whole.
fn collective_s(run: &Run, argv: &[String], cluster: &Cluster) -> f64 {
    let size = |f| value(argv, f).and_then(|v| results::units::parse_size(v).ok());
    let (b, e) = match (size("-b"), size("-e")) {
        (Some(b), Some(e)) => (b, e.max(b)),
        (Some(b), None) => (b, b),
        _ => (32 << 20, 32 << 20),
    };
    let per_call = |bytes: u64| 50e-6 + 2.0 * bytes as f64 * 8.0 / 100e9;
    let mut one = 0.0;
    let mut z = b.max(1);
    while z <= e {
        one += 2.0 * 25.0 * per_call(z);
        z *= 2;
    }
    let curves = if run.args.iter().any(|a| a == "--scaling") {
        f64::from(cluster.ranks(run.launch).max(2)).log2().ceil()
    } else {
        1.0
    };
    one * curves + 5.0
}

/// `1h 02m`, `10m 14s`, `42s`.
pub fn show(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m {sec:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Launcher;
    use verdict::feed::Stage;

    #[test]
    fn the_link_check_of_1024_nodes_by_8_rails_projects_within_30_minutes() {
        let p = verdict::profile::load("roce-100g").unwrap();
        let c = Cluster {
            launcher: Launcher::Srun,
            nodes: 1024,
            nics: 8,
            gpus: 8,
            launcher_args: vec![],
            wrap: vec![],
        };
        let s = crate::plan::tests::settings();
        let steps = crate::plan::steps(&p, &c, &s, &[Stage::Links]);
        let total: Duration = steps.iter().map(|s| s.projected).sum();
        assert!(
            total < Duration::from_secs(30 * 60),
            "{} for {:?}",
            show(total),
            steps.iter().map(|s| show(s.projected)).collect::<Vec<_>>()
        );
        // And it is a real projection: the bandwidth sweep alone is over 1023 rounds of
        // half a second.
        assert!(steps.iter().all(|s| s.projected > Duration::from_secs(60)));
        assert!(total > Duration::from_secs(15 * 60), "{}", show(total));
    }

    #[test]
    fn sizes_follow_the_command_line() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(p2p_sizes(&a("x -a --max-size 64")), [2, 4, 8, 16, 32, 64]);
        assert_eq!(p2p_sizes(&a("x -s 1M")), [1 << 20]);
        assert_eq!(p2p_sizes(&a("x -a")).len(), 23);
        assert_eq!(show(Duration::from_secs(614)), "10m 14s");
        assert_eq!(show(Duration::from_secs(3720)), "1h 02m");
    }
}
