//! How the processes were started: the launcher (standalone or MPI) and what its
//! environment says before MPI is initialised (this rank, whether it reports).

/// How the processes were started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Launcher {
    /// MPI when an MPI launcher's environment is present, standalone otherwise.
    Auto,
    /// perftest style: no host = server, HOST = client.
    Standalone,
    /// mpirun / srun: ranks pair up as `--pattern` says ((0,1), (2,3), ... by default).
    Mpi,
}

crate::named_enum!(Launcher { Auto => "auto", Standalone => "standalone", Mpi => "mpi" });

/// Environment variables that MPI launchers set in every rank (OpenMPI, MPICH/Hydra,
/// PMIx, srun --mpi=pmix).
const MPI_ENV: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALNRANKS",
];

/// Resolves `auto` by looking for an MPI launcher's environment. srun without
/// `--mpi=pmix` sets only SLURM_* variables: that is reported as standalone, and the
/// caller explains it when there is also no host to connect to.
pub fn resolve_launcher(requested: Launcher) -> Launcher {
    match requested {
        Launcher::Auto if MPI_ENV.iter().any(|v| std::env::var_os(v).is_some()) => Launcher::Mpi,
        Launcher::Auto => Launcher::Standalone,
        other => other,
    }
}

/// This process's rank as the launcher announced it in the environment, before MPI is
/// initialised (used to keep ranks other than 0 quiet from the first line on).
pub fn env_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

/// True when this process should print progress and notes: standalone, or rank 0.
pub fn is_reporting_process() -> bool {
    env_rank().is_none_or(|r| r == 0)
}

/// True inside a Slurm job step (srun), for hints.
pub fn under_srun() -> bool {
    std::env::var_os("SLURM_STEP_ID").is_some() && std::env::var_os("SLURM_PROCID").is_some()
}
