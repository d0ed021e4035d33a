//! The MPI coordinator: `mpirun`/`srun` ranks. MPI carries the roster, the barriers
//! between rounds and the gathered results; each pair talks over a TCP control connection
//! of its own (crate::pairlink), so a pair that fails cannot leave MPI waiting.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{anyhow, Result};

use base::link::PeerLink;
use bootstrap::standalone::TcpLink;
use results::HostInfo;

use crate::coordinator::{
    advertised_ip, port_of, rail_of, settle_device, Coordinator, Member, RoundReport, Shared,
};
use crate::pattern::RankPair;
use crate::plan::{Launch, Plan};

use crate::pairlink::{self, ControlListener, Ticket};
use bootstrap::mpi::MpiJob;

/// `mpirun`/`srun` ranks.
pub struct Mpi {
    job: MpiJob,
    members: Vec<Member>,
    hosts: Vec<HostInfo>,
    listener: ControlListener,
    bind: Option<IpAddr>,
    link: Option<TcpLink>,
    timeout: Duration,
}

impl Mpi {
    /// Initialises MPI and exchanges the roster: host, local rank (its index among
    /// the ranks of its host, in rank order: what OpenMPI calls
    /// OMPI_COMM_WORLD_LOCAL_RANK, MPICH MPI_LOCALRANKID and Slurm SLURM_LOCALID),
    /// device and control address of every rank.
    pub fn start(launch: &Launch, plan: &mut Plan) -> Result<Self> {
        let job = MpiJob::init(plan.timeout)?;
        let rank = job.rank();
        let mut me = probe::host::collect();
        me.rank = Some(rank);
        let names: Vec<String> = job
            .all_gather_bytes(me.hostname.as_bytes(), "host names")
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect();
        let local_rank = names[..rank as usize]
            .iter()
            .filter(|h| **h == me.hostname)
            .count() as u32;
        me.local_rank = Some(local_rank);
        let tool = plan.tool;
        let fail = |e: anyhow::Error| -> ! {
            base::output::error_line(&format!("{tool}: rank {rank}: error: {e:#}"));
            job.abort(base::exit::ERROR)
        };
        if let Err(e) = settle_device(plan, &launch.devices, local_rank) {
            fail(e);
        }
        me.device = rail_of(plan, launch.bind_addr);
        match crate::placement::place(plan, launch.bind_addr, launch.cpu.as_deref()) {
            Ok(p) => me.placement = Some(p),
            Err(e) => fail(e),
        }
        let listener = ControlListener::open(launch.bind_addr).unwrap_or_else(|e| fail(e));
        let bound = listener.addr();
        let ctrl = if bound.ip().is_unspecified() {
            // Announce a routable address when there is one; peers on this host use
            // loopback either way.
            match advertised_ip(None, &me.hostname) {
                Some(ip) => SocketAddr::new(ip, bound.port()),
                None => bound,
            }
        } else {
            bound
        };
        let mine = Member {
            rank,
            host: me.hostname.clone(),
            local_rank,
            device: me.device.clone(),
            port: port_of(plan),
            ctrl: Some(ctrl),
        };
        let members: Vec<Member> = job
            .all_gather_bytes(&serde_json::to_vec(&mine)?, "the roster")
            .iter()
            .map(|b| base::wire::decode_json(b))
            .collect::<Result<_, _>>()
            .map_err(|e| {
                anyhow!("a rank sent an unreadable roster entry ({e:#}): mixed fabcheck versions?")
            })?;
        let hosts = match job.gather_bytes(&serde_json::to_vec(&me)?, "host facts", plan.timeout) {
            Some(all) => all
                .iter()
                .map(|b| base::wire::decode_json(b))
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow!("a rank sent unreadable host facts ({e:#})"))?,
            None => Vec::new(),
        };
        Ok(Self {
            job,
            members,
            hosts,
            listener,
            bind: launch.bind_addr,
            link: None,
            timeout: plan.timeout,
        })
    }
}

impl Coordinator for Mpi {
    fn launcher(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> u32 {
        self.job.rank()
    }
    fn is_root(&self) -> bool {
        self.job.rank() == 0
    }
    fn members(&self) -> &[Member] {
        &self.members
    }
    fn hosts(&self) -> Vec<HostInfo> {
        self.hosts.clone()
    }
    fn ranks_in_results(&self) -> bool {
        true
    }
    fn share(&mut self, root: Shared) -> Result<Shared> {
        let bytes = self.job.broadcast_bytes(
            self.is_root()
                .then(|| serde_json::to_vec(&root))
                .transpose()?,
            "the schedule inputs",
        );
        base::wire::decode_json(&bytes)
    }
    fn begin_round(&mut self, round: u32, limit: Duration) -> bool {
        self.link = None;
        !self.job.any_within(
            base::interrupt::interrupted(),
            &format!("before round {round}, waiting for every pair of the last round"),
            limit,
        )
    }
    fn pair_link(&mut self, round: u32, pair: RankPair, seed: u64) -> Result<&mut dyn PeerLink> {
        let link = pairlink::open(
            Ticket::new(seed, round, pair),
            self.job.rank(),
            &self.members,
            &self.listener,
            self.bind,
            self.timeout,
        )?;
        Ok(self.link.insert(link))
    }
    fn end_round(&mut self, report: RoundReport, limit: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.link = None;
        let bytes = serde_json::to_vec(&report)?;
        Ok(self.job.gather_bytes(&bytes, "the round's results", limit))
    }
}
