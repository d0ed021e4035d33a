//! The standalone coordinator: perftest's shape, a server and a client over one TCP
//! control connection; the handshake checks that both run the same options.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{bail, Result};

use base::link::{recv_json, send_json, PeerLink};
use bootstrap::standalone::{self, Hello, TcpLink};
use results::{Document, HostInfo};
use transport::Role;

use crate::coordinator::{
    port_of, rail_of, settle_device, Coordinator, Member, RoundReport, Shared,
};
use crate::pattern::RankPair;
use crate::plan::{DeviceChoice, Launch, Plan};

/// perftest's shape: no host = server, HOST = client; one pair, one round.
pub struct Standalone {
    link: TcpLink,
    role: Role,
    members: Vec<Member>,
    /// Client first, then server.
    hosts: Vec<HostInfo>,
    rounds_begun: u32,
}

impl Standalone {
    /// Connects the two sides (the server adopts the client's iterations and duration).
    pub fn start(launch: &Launch, plan: &mut Plan) -> Result<Self> {
        if matches!(launch.devices, DeviceChoice::PerLocalRank(_)) {
            bail!(
                "-d with a list picks a device per local rank under mpirun/srun; a standalone \
                 server or client takes one device (-d mlx5_0)"
            );
        }
        if launch.pattern != crate::pattern::PatternSpec::Pairs {
            bail!(
                "--pattern {} schedules pairs across many ranks: launch with mpirun/srun \
                 (standalone, one server and one client make the only pair)",
                launch.pattern
            );
        }
        settle_device(plan, &launch.devices, 0)?;
        if launch.host.is_none() && base::launcher::under_srun() {
            eprintln!(
                "note: started by srun without an MPI environment: use `srun --mpi=pmix` to pair ranks, \
                 or give a HOST to run as a standalone client"
            );
        }
        let mut me = probe::host::collect();
        me.device = rail_of(plan, launch.bind_addr);
        me.placement = Some(crate::placement::place(
            plan,
            launch.bind_addr,
            launch.cpu.as_deref(),
        )?);
        let (link, role, mut peer) = match &launch.host {
            None => {
                let (link, hello) = standalone::serve(
                    launch.port,
                    launch.bind_addr,
                    plan.timeout,
                    plan.tool,
                    &plan.must_match(),
                    &me,
                )?;
                plan.adopt(&hello.adopt);
                (link, Role::Responder, hello.host)
            }
            Some(server) => {
                let hello = Hello {
                    protocol: standalone::PROTOCOL_VERSION,
                    tool: plan.tool.to_string(),
                    tool_version: results::provenance::TOOL_VERSION.to_string(),
                    plan: plan.must_match(),
                    adopt: plan.adoptable(),
                    host: me.clone(),
                };
                let (link, server_host) =
                    standalone::connect(server, launch.port, plan.timeout, &hello)?;
                (link, Role::Initiator, server_host)
            }
        };
        me.role = Some(role_name(role).into());
        peer.role = Some(role_name(other(role)).into());
        let member = |rank: u32, h: &HostInfo| Member {
            rank,
            host: h.hostname.clone(),
            local_rank: 0,
            device: h.device.clone(),
            port: port_of(plan),
            ctrl: None,
        };
        let (client, server) = match role {
            Role::Initiator => (me, peer),
            Role::Responder => (peer, me),
        };
        Ok(Self {
            link,
            role,
            members: vec![member(0, &client), member(1, &server)],
            hosts: vec![client, server],
            rounds_begun: 0,
        })
    }

    /// The local address the peer reached us on (for data connections).
    pub fn local_ip(&self) -> Option<IpAddr> {
        self.link.local_ip()
    }
}

/// `initiator` or `responder`, as messages say it.
pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Initiator => "client",
        Role::Responder => "server",
    }
}

fn other(r: Role) -> Role {
    match r {
        Role::Initiator => Role::Responder,
        Role::Responder => Role::Initiator,
    }
}

impl Coordinator for Standalone {
    fn launcher(&self) -> &'static str {
        "standalone"
    }
    fn rank(&self) -> u32 {
        match self.role {
            Role::Initiator => 0,
            Role::Responder => 1,
        }
    }
    fn is_root(&self) -> bool {
        self.role == Role::Initiator
    }
    fn members(&self) -> &[Member] {
        &self.members
    }
    fn hosts(&self) -> Vec<HostInfo> {
        self.hosts.clone()
    }
    fn ranks_in_results(&self) -> bool {
        false
    }
    fn share(&mut self, root: Shared) -> Result<Shared> {
        Ok(root)
    }
    fn begin_round(&mut self, _round: u32, _limit: Duration) -> bool {
        self.rounds_begun += 1;
        self.rounds_begun == 1
    }
    fn pair_link(&mut self, _round: u32, _pair: RankPair, _seed: u64) -> Result<&mut dyn PeerLink> {
        Ok(&mut self.link)
    }
    fn end_round(&mut self, report: RoundReport, _limit: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        // The server's measurement quality joins the client's document (not after a failed
        // pair: the link may be what broke).
        let mut reports = Vec::new();
        if report.failures.is_empty() && report.quality.is_some() {
            match self.role {
                Role::Responder => {
                    let _ = send_json(&mut self.link, &report.quality);
                }
                Role::Initiator => {
                    let theirs: Option<results::quality::HostQuality> =
                        recv_json(&mut self.link).ok().flatten();
                    reports.push(RoundReport {
                        quality: theirs,
                        ..Default::default()
                    });
                }
            }
        }
        if self.role == Role::Responder {
            return Ok(None);
        }
        reports.insert(0, report);
        Ok(Some(
            reports
                .iter()
                .map(|r| serde_json::to_vec(r).unwrap_or_default())
                .collect(),
        ))
    }
    fn finish(&mut self, doc: Option<&Document>) -> Result<Option<Document>> {
        match (self.role, doc) {
            (Role::Initiator, Some(d)) => {
                let _ = send_json(&mut self.link, d);
                Ok(None)
            }
            (Role::Responder, _) => Ok(recv_json::<Document>(&mut self.link).ok()),
            _ => Ok(None),
        }
    }
}
