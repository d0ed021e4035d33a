//! Bootstrap: how two peers find each other and talk outside the measured path.
//!
//! A [`PeerLink`] carries small control messages between the two ends of a pair: the
//! handshake, endpoint info (TCP port or verbs QPN/GID/rkey), side results such as the
//! responder's CPU use. Two implementations: the standalone TCP control connection
//! (perftest style, `bench-lat` / `bench-lat HOST`) and MPI point-to-point between the two
//! ranks of a pair (`mpirun`/`srun`). Transports only see the trait.

use std::net::IpAddr;

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;

#[cfg(feature = "mpi")]
pub mod mpi;
pub mod standalone;
pub mod watchdog;

/// A reliable, ordered message channel to the other end of a pair, with a timeout on
/// every wait.
pub trait PeerLink {
    fn send(&mut self, payload: &[u8]) -> Result<()>;
    fn recv(&mut self) -> Result<Vec<u8>>;
    /// The local address the peer reached us on, when the link knows it (the standalone
    /// control connection does; MPI does not).
    fn local_ip(&self) -> Option<IpAddr>;
}

/// Sends a value as JSON over a link.
pub fn send_json<T: Serialize>(link: &mut dyn PeerLink, value: &T) -> Result<()> {
    link.send(&serde_json::to_vec(value)?)
}

/// Receives a JSON value from a link.
pub fn recv_json<T: DeserializeOwned>(link: &mut dyn PeerLink) -> Result<T> {
    crate::wire::decode_json(&link.recv()?)
}

/// How the processes were started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Launcher {
    /// MPI when an MPI launcher's environment is present, standalone otherwise.
    Auto,
    /// perftest style: no host = server, HOST = client.
    Standalone,
    /// mpirun / srun: ranks pair up (0,1), (2,3), ...
    Mpi,
}

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
