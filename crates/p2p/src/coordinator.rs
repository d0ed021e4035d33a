//! Coordinators: how the processes of a run find each other, agree on the schedule and
//! bring their results to the one that writes the document. The driver (`p2p::run`) is
//! the same for all of them; launch modes differ only in the coordinator they start.
//!
//! This module holds the trait and what every coordinator shares (the roster's
//! [`Member`], round reports, device resolution, how one rank reaches another); each
//! coordinator lives in a module of its own:
//!
//! - `standalone::Standalone`: perftest's shape, a server and a client over one TCP control
//!   connection (the handshake checks that both run the same options).
//! - `Mpi` (feature `mpi`): `mpirun`/`srun` ranks; MPI carries the roster, the barriers
//!   between rounds and the gathered results; each pair talks over a TCP control
//!   connection of its own (see `pairlink`), so a pair that fails
//!   cannot leave MPI waiting.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use results::{Document, HostInfo, Pair, TestResult};

use base::link::PeerLink;
use transport::{Role, TransportKind};

use crate::pattern::{RankPair, Slot};
use crate::plan::{DeviceChoice, Plan};

/// One rank as every other rank knows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    /// Its rank in the run.
    pub rank: u32,
    /// Its host name (as the document names the node).
    pub host: String,
    /// Its index among its host's ranks (its rail).
    pub local_rank: u32,
    /// RDMA device and port it measures with (verbs).
    pub device: Option<String>,
    /// The device's port, from 1.
    pub port: Option<u32>,
    /// Where its pair control listener is reached (MPI), `None` standalone.
    pub ctrl: Option<SocketAddr>,
}

impl Member {
    /// The rank as the scheduler sees it.
    pub fn slot(&self) -> Slot {
        Slot {
            rank: self.rank,
            host: self.host.clone(),
            local_rank: self.local_rank,
            device: self.device.clone(),
        }
    }
}

/// One side's account of a pair it could not finish.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SideFailure {
    /// The round it failed in.
    pub round: u32,
    /// The two ends.
    pub pair: Pair,
    /// This side's role in the pair.
    pub role: Role,
    /// The size it was measuring, if it had started one.
    pub size_bytes: Option<u64>,
    /// What went wrong, in words.
    pub error: String,
    /// The port's state when it failed (`DOWN`, `INIT`), when known.
    pub port_state: Option<String>,
}

/// What one rank brings to the root after a round.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoundReport {
    /// The pairs' results this rank measured (as initiator).
    pub results: Vec<TestResult>,
    /// The pairs it could not finish.
    pub failures: Vec<SideFailure>,
    /// The pair stopped early on Ctrl-C.
    pub interrupted: bool,
    /// What disturbed this rank's run (load, steal, preemptions), sent with the last round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<results::quality::HostQuality>,
}

/// Inputs of the schedule that only the root decides (identical on every rank after
/// [`Coordinator::share`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Shared {
    /// Seed for `random` without one, and the job nonce of pair tickets.
    pub seed: u64,
    /// Text of the `file:` pair list, read on the root.
    pub file_text: Option<String>,
    /// The fabric plan (`--plan`), read on the root.
    #[serde(default)]
    pub fabric: Option<crate::fabric::FabricOrder>,
    /// Why the root cannot go on (every rank then exits 2; the root says why).
    pub error: Option<String>,
}

/// What every launch mode provides to the driver.
pub trait Coordinator {
    /// `standalone` or `mpi`, for the document.
    fn launcher(&self) -> &'static str;
    /// This rank, from 0.
    fn rank(&self) -> u32;
    /// The process that prints the table and writes the document (client, rank 0).
    fn is_root(&self) -> bool;
    /// Every rank of the run, in rank order.
    fn members(&self) -> &[Member];
    /// Host facts of every rank for the document (meaningful on the root).
    fn hosts(&self) -> Vec<HostInfo>;
    /// Whether result rows carry MPI ranks (standalone pairs have none).
    fn ranks_in_results(&self) -> bool;
    /// The root's `Shared` on every rank.
    fn share(&mut self, root: Shared) -> Result<Shared>;
    /// Waits for every rank before round `round` (within `limit`); false when any rank
    /// was interrupted and the run must stop.
    fn begin_round(&mut self, round: u32, limit: Duration) -> bool;
    /// The control link to this rank's peer in `round`.
    fn pair_link(&mut self, round: u32, pair: RankPair, seed: u64) -> Result<&mut dyn PeerLink>;
    /// Every rank's report of the round, serialized, on the root (within `limit`). The
    /// root decodes them off the critical path when rounds are large (see `record`).
    fn end_round(&mut self, report: RoundReport, limit: Duration) -> Result<Option<Vec<Vec<u8>>>>;
    /// Standalone: the client hands the finished document to the server, which prints it
    /// (and keeps it with `--json`). Returns the document on the server.
    fn finish(&mut self, doc: Option<&Document>) -> Result<Option<Document>> {
        let _ = doc;
        Ok(None)
    }
    /// Why the rank `rank` will not take part in this round (an agent that stopped
    /// answering), so its peer records the failure at once instead of waiting for it.
    fn peer_gone(&self, rank: u32) -> Option<String> {
        let _ = rank;
        None
    }
}

/// Resolves `-d` for the rank with `local_rank` on its host: a list is indexed by local
/// rank, `auto` takes the device at the local rank's place in the host's devices in
/// natural name order, whatever its port's state (one rank per NIC, as rail-optimised
/// jobs are launched: the rail never shifts). `root` is the sysfs tree (`/` on a real host).
pub fn resolve_device(
    choice: &DeviceChoice,
    local_rank: u32,
    root: &probe::inventory::SysRoot,
) -> Result<Option<String>> {
    Ok(match choice {
        DeviceChoice::Default => None,
        DeviceChoice::One(d) => Some(d.clone()),
        DeviceChoice::PerLocalRank(list) => {
            Some(list.get(local_rank as usize).cloned().ok_or_else(|| {
                anyhow!(
                    "-d lists {} device(s) ({}) but this is local rank {local_rank} of its host: \
                 give one device per rank of a node, in local-rank order",
                    list.len(),
                    list.join(",")
                )
            })?)
        }
        DeviceChoice::Auto => {
            // The rail is the device's place in the node's device list, whatever its
            // port's state: a NIC that is down must not move ranks r+1.. onto the next
            // rails (they would measure the wrong links and the last rank would have none).
            let all = probe::sysfs::dir_names(&root.infiniband);
            Some(all.get(local_rank as usize).cloned().ok_or_else(|| {
                anyhow!(
                    "-d auto gives local rank r the r-th RDMA device of its host in name order \
                     (its rail), and local rank {local_rank} has none: this host has {} ({}). \
                     Launch one rank per NIC, or name the devices with -d mlx5_0,mlx5_1,...",
                    all.len(),
                    if all.is_empty() {
                        "none".to_string()
                    } else {
                        all.join(", ")
                    }
                )
            })?)
        }
    })
}

/// Whether `device`'s `port` is ACTIVE under `root`.
fn port_active(root: &probe::inventory::SysRoot, device: &str, port: u8) -> bool {
    probe::inventory::active_devices(root, u32::from(port))
        .iter()
        .any(|d| d == device)
}

/// Fixes the plan's device for this rank and checks it as a test would (verbs only).
pub fn settle_device(plan: &mut Plan, choice: &DeviceChoice, local_rank: u32) -> Result<()> {
    if plan.transport != TransportKind::Verbs {
        return Ok(());
    }
    // With GPU buffers, `-d auto` means the NIC nearest to the rank's GPU, which the GPU
    // plan already chose (gpu::plan::prepare): keep it.
    let gpu_chose = plan.verbs.gpu.is_some() && plan.verbs.device.is_some();
    if *choice == DeviceChoice::Auto && gpu_chose {
        return Ok(());
    }
    let root = probe::inventory::SysRoot::default();
    if let Some(d) = resolve_device(choice, local_rank, &root)? {
        if *choice == DeviceChoice::Auto && !port_active(&root, &d, plan.verbs.port) {
            // The rank keeps its rail: every pair it is in fails on the down port and is
            // recorded with that cause, and the sweep goes on with the other rails.
            base::output::error_line(&format!(
                "warning: local rank {local_rank}'s rail device {d} has port {} not ACTIVE: \
                 its pairs will be recorded as failed",
                plan.verbs.port
            ));
            plan.verbs.device = Some(d);
            return Ok(());
        }
        plan.verbs.device = Some(d);
        transport::check_verbs_options(plan.transport, &plan.verbs)?;
    }
    if plan.verbs.device.is_none() {
        // Name the device the transport would open anyway, so rows and failures say it.
        plan.verbs.device =
            probe::inventory::active_devices(&Default::default(), u32::from(plan.verbs.port))
                .into_iter()
                .next();
    }
    Ok(())
}

/// The rail of this rank's end of a row: the RDMA device with verbs; with TCP the kernel
/// interface holding `--bind-addr` (`rail0`), when bound.
pub fn rail_of(plan: &Plan, bind: Option<std::net::IpAddr>) -> Option<String> {
    match plan.transport {
        TransportKind::Verbs => plan.verbs.device.clone(),
        _ => bind.and_then(probe::discovery::interface_of),
    }
}

pub(crate) fn port_of(plan: &Plan) -> Option<u32> {
    (plan.transport == TransportKind::Verbs).then_some(u32::from(plan.verbs.port))
}

/// The address other hosts reach this one at: `--bind-addr`, else the first non-loopback
/// address the host name resolves to.
pub fn advertised_ip(bind: Option<IpAddr>, hostname: &str) -> Option<IpAddr> {
    use std::net::ToSocketAddrs;
    bind.filter(|ip| !ip.is_unspecified()).or_else(|| {
        (hostname, 0)
            .to_socket_addrs()
            .ok()
            .and_then(|mut it| it.find(|a| !a.ip().is_loopback()).map(|a| a.ip()))
    })
}

/// Where `me` reaches `peer`'s control listener: its bound address when it bound one,
/// loopback on the same host, else the address it advertised.
pub fn reach(me: &Member, peer: &Member) -> Result<SocketAddr> {
    let ctrl = peer
        .ctrl
        .ok_or_else(|| anyhow!("rank {} announced no control address", peer.rank))?;
    if !ctrl.ip().is_unspecified() {
        return Ok(ctrl);
    }
    if me.host == peer.host {
        return Ok(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            ctrl.port(),
        ));
    }
    bail!(
        "cannot reach rank {} on {}: its host name resolves to loopback only; pass --bind-addr \
         with each host's IP on the test network",
        peer.rank,
        peer.host
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe::inventory::SysRoot;

    fn active(root: &std::path::Path, dev: &str, state: &str) {
        let p = root.join("sys/class/infiniband").join(dev).join("ports/1");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("state"), state).unwrap();
    }

    #[test]
    fn devices_follow_the_local_rank() {
        let t = tempfile::tempdir().unwrap();
        for (d, st) in [
            ("mlx5_0", "4: ACTIVE"),
            ("mlx5_1", "1: DOWN"),
            ("mlx5_2", "4: ACTIVE"),
        ] {
            active(t.path(), d, st);
        }
        let root = SysRoot::under(t.path());
        let auto = |r| resolve_device(&DeviceChoice::Auto, r, &root);
        assert_eq!(auto(0).unwrap().as_deref(), Some("mlx5_0"));
        // A DOWN port keeps its rail: rank 1 stays on mlx5_1 (it used to move to mlx5_2,
        // and every later rank with it).
        assert_eq!(auto(1).unwrap().as_deref(), Some("mlx5_1"));
        assert!(!port_active(&root, "mlx5_1", 1));
        assert!(port_active(&root, "mlx5_2", 1));
        assert_eq!(auto(2).unwrap().as_deref(), Some("mlx5_2"));
        let e = auto(3).unwrap_err().to_string();
        assert!(
            e.contains("local rank 3 has none") && e.contains("mlx5_0, mlx5_1, mlx5_2"),
            "{e}"
        );
        let list = DeviceChoice::PerLocalRank(vec!["mlx5_3".into(), "mlx5_7".into()]);
        assert_eq!(
            resolve_device(&list, 1, &root).unwrap().as_deref(),
            Some("mlx5_7")
        );
        let e = resolve_device(&list, 2, &root).unwrap_err().to_string();
        assert!(e.contains("lists 2 device(s)"), "{e}");
        assert_eq!(
            resolve_device(&DeviceChoice::Default, 5, &root).unwrap(),
            None
        );
    }

    #[test]
    fn a_peer_is_reached_at_its_bound_address_or_loopback_on_the_same_host() {
        let m = |host: &str, ctrl: &str| Member {
            rank: 0,
            host: host.into(),
            local_rank: 0,
            device: None,
            port: None,
            ctrl: Some(ctrl.parse().unwrap()),
        };
        let me = m("a", "0.0.0.0:1");
        assert_eq!(
            reach(&me, &m("b", "10.0.0.2:77")).unwrap().to_string(),
            "10.0.0.2:77"
        );
        assert_eq!(
            reach(&me, &m("a", "0.0.0.0:78")).unwrap().to_string(),
            "127.0.0.1:78"
        );
        let e = reach(&me, &m("b", "0.0.0.0:79")).unwrap_err().to_string();
        assert!(e.contains("--bind-addr"), "{e}");
    }
}
