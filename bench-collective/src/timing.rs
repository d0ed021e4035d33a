//! nccl-tests' time, and the per-iteration view beside it.
//!
//! nccl-tests times each rank's whole loop of back-to-back calls with one timer, divides
//! by the iteration count, and combines the ranks' figures with `-a, --average`: rank 0's
//! own (0), the mean (1, the default), the minimum (2) or the maximum (3). `time_us`, and
//! algbw and busbw from it, follow that exactly, from a loop with nothing but the calls in
//! it. The per-iteration view (the slowest rank's time for each iteration, its histogram
//! and percentiles) comes from a second pass of as many iterations, each stamped, and is
//! reported beside it.

use results::RankTimes;

/// nccl-tests' `-a, --average`: how the ranks' loop times become one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Average {
    /// 0: rank 0's own time.
    Rank0,
    /// 1: the mean over ranks (nccl-tests' default).
    Avg,
    /// 2: the fastest rank's.
    Min,
    /// 3: the slowest rank's.
    Max,
}

impl Average {
    /// `-a 0|1|2|3` as nccl-tests numbers them, or the names `rank0 avg min max`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "0" | "rank0" => Average::Rank0,
            "1" | "avg" => Average::Avg,
            "2" | "min" => Average::Min,
            "3" | "max" => Average::Max,
            _ => {
                return Err(format!(
                    "'{s}' is not an averaging mode: 0 (rank 0), 1 (mean), 2 (min), 3 (max)"
                ))
            }
        })
    }

    /// The name in the document's options.
    pub fn name(self) -> &'static str {
        match self {
            Average::Rank0 => "rank0",
            Average::Avg => "avg",
            Average::Min => "min",
            Average::Max => "max",
        }
    }

    /// The figure this mode reports.
    pub fn pick(self, t: &RankTimes) -> f64 {
        match self {
            Average::Rank0 => t.rank0,
            Average::Avg => t.avg,
            Average::Min => t.min,
            Average::Max => t.max,
        }
    }
}

/// The four reductions of the ranks' per-iteration loop times (microseconds; index =
/// rank in the communicator).
pub fn rank_times(per_rank_us: &[f64]) -> RankTimes {
    if per_rank_us.is_empty() {
        return RankTimes::default();
    }
    RankTimes {
        rank0: per_rank_us[0],
        avg: per_rank_us.iter().sum::<f64>() / per_rank_us.len() as f64,
        min: per_rank_us.iter().copied().fold(f64::INFINITY, f64::min),
        max: per_rank_us
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max),
    }
}

/// The rank with the largest loop time (the first of equals).
pub fn slowest(per_rank_us: &[f64]) -> usize {
    per_rank_us
        .iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &v)| {
            if v > bv {
                (i, v)
            } else {
                (bi, bv)
            }
        })
        .0
}

/// What one rank measured for one step.
pub struct Timed {
    /// The timed loop from its start to the end of its last call (nccl-tests' timer),
    /// nanoseconds.
    pub loop_ns: u64,
    /// Each iteration's nanoseconds (the per-iteration view).
    pub iteration_ns: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_modes_of_nccl_tests() {
        let t = rank_times(&[4.0, 2.0, 9.0, 1.0]);
        assert_eq!(
            t,
            RankTimes {
                rank0: 4.0,
                avg: 4.0,
                min: 1.0,
                max: 9.0
            }
        );
        for (arg, want) in [("0", 4.0), ("1", 4.0), ("2", 1.0), ("3", 9.0), ("max", 9.0)] {
            assert_eq!(Average::parse(arg).unwrap().pick(&t), want, "-a {arg}");
        }
        let t = rank_times(&[3.0, 5.0]);
        assert_eq!(Average::Avg.pick(&t), 4.0);
        assert_eq!(Average::Rank0.pick(&t), 3.0);
        assert!(Average::parse("4").unwrap_err().contains("0 (rank 0)"));
        assert_eq!(slowest(&[4.0, 2.0, 9.0, 9.0]), 2);
    }
}
