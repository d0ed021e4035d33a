//! Which GPU a rank takes: one GPU per rank, picked from the rank's place among the ranks
//! of its node (its node-local rank, from `bootstrap::node`), as nccl-tests picks
//! `localRank` (common.cu: a host-name hash over MPI_COMM_WORLD).
//!
//! The rule, a pure function so it is tested without a GPU:
//! 1. `FABCHECK_CUDA_DEVICE=N` (the override, like nccl-tests' `NCCL_TESTS_DEVICE`): GPU
//!    N of the visible ones, whatever the local rank;
//! 2. one visible GPU: GPU 0. Slurm's `--gpus-per-task=1` and `--gpu-bind=single:1`, and
//!    `CUDA_VISIBLE_DEVICES` set per rank by a wrapper, leave each rank one GPU while its
//!    local rank runs 0..7: "GPU 3" would not exist;
//! 3. otherwise GPU `local rank`, which must be visible: more ranks on a node than GPUs is
//!    an error that says so (two ranks on one GPU make NCCL fail with "Duplicate GPU
//!    detected").

/// The override variable: the CUDA ordinal (among the visible GPUs) every rank of this
/// process's environment takes.
pub const OVERRIDE: &str = "FABCHECK_CUDA_DEVICE";

/// Where the choice came from, for the message and the `# Using devices` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Override,
    OnlyOne,
    LocalRank,
}

impl Why {
    pub fn describe(self) -> &'static str {
        match self {
            Why::Override => "set by FABCHECK_CUDA_DEVICE",
            Why::OnlyOne => "the only visible GPU",
            Why::LocalRank => "the node-local rank",
        }
    }
}

/// The CUDA ordinal for a rank that is `local_rank` of `local_size` on its node, with
/// `visible` GPUs visible to it and `override_value` the value of [`OVERRIDE`] if set.
/// The error names the numbers and the next step.
pub fn pick(
    local_rank: u32,
    local_size: u32,
    visible: u32,
    override_value: Option<&str>,
) -> Result<(u32, Why), String> {
    if visible == 0 {
        return Err(
            "the CUDA driver sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)".into(),
        );
    }
    if let Some(v) = override_value.map(str::trim).filter(|v| !v.is_empty()) {
        let n: u32 = v.parse().map_err(|_| {
            format!(
                "{OVERRIDE}={v:?} is not a GPU number: give a CUDA ordinal 0..{}",
                visible - 1
            )
        })?;
        if n >= visible {
            return Err(format!(
                "{OVERRIDE}={n} but this rank sees {visible} GPU(s) (0..{}): give one of those",
                visible - 1
            ));
        }
        return Ok((n, Why::Override));
    }
    if visible == 1 {
        return Ok((0, Why::OnlyOne));
    }
    if local_rank >= visible {
        return Err(format!(
            "this is rank {local_rank} of {local_size} on its node but the node shows it \
             {visible} GPUs: run at most {visible} rank(s) per node (one GPU per rank), or \
             give each rank its GPU with {OVERRIDE} or CUDA_VISIBLE_DEVICES"
        ));
    }
    Ok((local_rank, Why::LocalRank))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_rank_picks_the_gpu_among_several() {
        assert_eq!(pick(3, 8, 8, None), Ok((3, Why::LocalRank)));
        assert_eq!(pick(0, 8, 8, None), Ok((0, Why::LocalRank)));
    }

    #[test]
    fn one_visible_gpu_is_taken_whatever_the_local_rank() {
        // Slurm --gpus-per-task=1: local rank 3 sees one GPU, its own.
        assert_eq!(pick(3, 8, 1, None), Ok((0, Why::OnlyOne)));
    }

    #[test]
    fn more_ranks_than_gpus_is_refused_with_the_numbers() {
        let e = pick(4, 6, 4, None).unwrap_err();
        assert!(e.contains("rank 4 of 6") && e.contains("4 GPUs"), "{e}");
        assert!(e.contains(OVERRIDE), "{e}");
        assert!(pick(0, 1, 0, None).unwrap_err().contains("no GPU"));
    }

    #[test]
    fn the_override_wins_and_is_checked() {
        assert_eq!(pick(5, 8, 8, Some("2")), Ok((2, Why::Override)));
        assert_eq!(pick(5, 8, 1, Some("0")), Ok((0, Why::Override)));
        assert!(pick(0, 1, 2, Some("2"))
            .unwrap_err()
            .contains("sees 2 GPU(s)"));
        assert!(pick(0, 1, 2, Some("gpu1"))
            .unwrap_err()
            .contains("not a GPU number"));
        // Empty means unset (a wrapper that exports it empty).
        assert_eq!(pick(1, 2, 2, Some("")), Ok((1, Why::LocalRank)));
    }
}
