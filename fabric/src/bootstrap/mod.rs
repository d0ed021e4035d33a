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
#[cfg(feature = "mpi")]
pub mod node;
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

/// Receives a JSON value from a link. A peer that gave up (see [`send_abort`]) turns the
/// wait into an error carrying its reason, whatever message was expected.
pub fn recv_json<T: DeserializeOwned>(link: &mut dyn PeerLink) -> Result<T> {
    let bytes = link.recv()?;
    if bytes.starts_with(ABORT_PREFIX) {
        let why = crate::wire::decode_json::<Abort>(&bytes)
            .map(|a| a.fabcheck_abort)
            .unwrap_or_else(|_| "no reason given".into());
        anyhow::bail!("the peer gave up: {why}");
    }
    crate::wire::decode_json(&bytes)
}

/// The message a side sends when it cannot go on with a pair, so the other side stops
/// waiting at once and records the same failure with the peer's reason beside its own.
#[derive(serde::Serialize, serde::Deserialize)]
struct Abort {
    fabcheck_abort: String,
}

const ABORT_PREFIX: &[u8] = b"{\"fabcheck_abort\":";

/// Tells the peer this side gave up on the pair, and why (best effort: the link may be
/// what broke).
pub fn send_abort(link: &mut dyn PeerLink, why: &str) {
    let _ = send_json(
        link,
        &Abort {
            fabcheck_abort: why.to_string(),
        },
    );
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    /// A link whose two ends are one queue: what one side sends, the other receives.
    struct Loop(std::collections::VecDeque<Vec<u8>>);

    impl PeerLink for Loop {
        fn send(&mut self, payload: &[u8]) -> Result<()> {
            self.0.push_back(payload.to_vec());
            Ok(())
        }
        fn recv(&mut self) -> Result<Vec<u8>> {
            self.0.pop_front().context("nothing sent")
        }
        fn local_ip(&self) -> Option<IpAddr> {
            None
        }
    }

    #[test]
    fn an_abort_ends_any_wait_with_the_peers_reason() {
        let mut l = Loop(Default::default());
        send_json(&mut l, &42u32).unwrap();
        assert_eq!(recv_json::<u32>(&mut l).unwrap(), 42);
        send_abort(&mut l, "work completion failed: IBV_WC_RETRY_EXC_ERR");
        let e = recv_json::<Vec<String>>(&mut l).unwrap_err().to_string();
        assert_eq!(
            e,
            "the peer gave up: work completion failed: IBV_WC_RETRY_EXC_ERR"
        );
        // An ordinary object with other keys is not mistaken for an abort.
        send_json(&mut l, &serde_json::json!({"fabcheck": 1})).unwrap();
        assert!(recv_json::<serde_json::Value>(&mut l).is_ok());
    }
}
