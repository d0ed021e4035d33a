//! The messages between the agents' coordinator and an agent, in the order they flow.
//! Frames are the control protocol's (`wire`: `FBCK`, length, JSON), capped in size.
//!
//! ```text
//! coordinator                          agent
//! CoordHello {nonce_c}        ->
//!                             <-       AgentHello {nonce_a, proof_a}   (or Refused)
//! CoordAuth {proof_c}         ->
//!                             <-       Welcome {host facts, options}   (or Refused, Busy)
//! Sweep {roster, plan, ...}   ->
//!                             <-       Ready                           (or Refused)
//! Round {k, gone}             ->       ... the agent measures its pair of round k ...
//!                             <-       Report {results, failures}
//! ... every round ...
//! Done                        ->       (back to waiting for the next sweep)
//! ```
//!
//! An incast (`bench-bw --pattern incast --hosts`) runs every rank at once: after
//! `Incast {rank, size, ...}` and `Ready`, each agent runs the same rounds as an MPI rank,
//! and every barrier, agreed flag and exchange it makes goes to the coordinator, which
//! answers when all agents have asked (`Gang` both ways, numbered); the last, `Gather`,
//! brings each agent's report, and the coordinator writes the document. A congestion run
//! (`bench-congestion --hosts`) is a gang the same way, after `Congestion {rank, size,
//! options}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use results::HostInfo;

use p2p::coordinator::{Member, RoundReport, Shared};
use p2p::Plan;

/// Bumped whenever these messages change; both sides must agree.
pub const PROTOCOL: u32 = 3;

/// Opens a connection: who is asking, and a fresh nonce the agent must answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoordHello {
    /// The protocol version ([`PROTOCOL`]).
    pub protocol: u32,
    /// The coordinating tool (`bench-bw`, `bench-congestion`).
    pub tool: String,
    /// The coordinator's fabcheck version.
    pub version: String,
    /// A fresh random nonce the agent proves the secret over.
    pub nonce: [u8; 32],
}

/// The agent's first answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AgentHello {
    /// Its nonce and its proof of the secret over both nonces.
    Challenge {
        /// The agent's protocol version.
        protocol: u32,
        /// The tool the agent serves.
        tool: String,
        /// The agent's fabcheck version.
        version: String,
        /// The agent's fresh nonce.
        nonce: [u8; 32],
        /// HMAC-SHA256 of its role and both nonces (its own first), keyed by the shared secret.
        proof: [u8; 32],
    },
    /// It will not talk to this coordinator (another protocol or tool), and why.
    Refused(String),
}

/// The coordinator's proof of the secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoordAuth {
    /// HMAC-SHA256 of its role and both nonces (its own first), keyed by the shared secret.
    pub proof: [u8; 32],
}

/// What an authenticated agent tells about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Welcome {
    /// Its host facts.
    pub host: HostInfo,
    /// The agent's own options that every agent of a sweep must share (transport, MTU,
    /// GID index, inline size, events, port), by name.
    pub options: serde_json::Map<String, Value>,
    /// Its RDMA device and port (verbs).
    pub device: Option<String>,
    /// The device's port, from 1.
    pub port: Option<u32>,
    /// Where peers reach its pair listener (an unspecified IP: the address the
    /// coordinator reached the agent at).
    pub pair_addr: std::net::SocketAddr,
}

/// The agent's answer to the coordinator's proof.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AuthReply {
    /// It takes part: what it is.
    Welcome(Box<Welcome>),
    /// Wrong secret, or a bad message.
    Refused(String),
    /// It is taking part in another coordinator's sweep (told only to an authenticated
    /// coordinator).
    Busy(String),
}

/// Everything an agent needs to take part in a sweep as rank `rank`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepOrder {
    /// Its rank in the sweep.
    pub rank: u32,
    /// Every rank of the sweep.
    pub members: Vec<Member>,
    /// What the root decided for every rank (seed, pair list).
    pub shared: Shared,
    /// The measurement plan (test, sizes, transport, ...).
    pub plan: Plan,
    /// `--pattern`, `--include-local`, `--rails` as on the command line.
    pub pattern: String,
    /// Each rank counted as a node (one machine, for testing).
    pub include_local: bool,
    /// `--rails` as on the command line.
    pub rails: String,
}

/// Everything an agent needs to take part in an incast as rank `rank` of `size`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IncastOrder {
    /// Its rank in the incast.
    pub rank: u32,
    /// How many ranks the incast has.
    pub size: u32,
    /// Senders per round (0: all the others).
    pub senders: u32,
    /// Each window's length, seconds (`-D`).
    pub window_s: f64,
    /// What the senders' messages are over verbs (`--test send|write`).
    pub op: transport::Op,
    /// Longest wait for a peer, seconds.
    pub timeout_s: f64,
}

/// Everything an agent needs to take part in a congestion run (GPCNeT's canaries and
/// congestors) as rank `rank` of `size`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CongestionOrder {
    /// Its rank in the run.
    pub rank: u32,
    /// How many ranks the run has.
    pub size: u32,
    /// The run's options (phases, seed, groups).
    pub options: traffic::congestion::Options,
}

/// A gang operation an agent asks for (numbered from 0 within the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GangAsk {
    /// Wait for every agent.
    Barrier {
        /// Its number within the run.
        seq: u64,
    },
    /// True for all when any agent says true.
    Flag {
        /// Its number within the run.
        seq: u64,
        /// This agent's answer.
        local: bool,
    },
    /// Base64 of this agent's bytes, for every agent.
    AllGather {
        /// Its number within the run.
        seq: u64,
        /// This agent's bytes, in base64.
        data: String,
    },
    /// Base64 of this agent's report, for the coordinator; the run's last message.
    Gather {
        /// Its number within the run.
        seq: u64,
        /// The report, in base64.
        data: String,
    },
}

/// The coordinator's answer once every agent has asked the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum GangAnswer {
    /// Every agent reached the barrier.
    Go {
        /// The barrier's number.
        seq: u64,
    },
    /// Whether any agent said true.
    Any {
        /// The flag's number.
        seq: u64,
        /// The answer.
        any: bool,
    },
    /// Base64 of every agent's bytes, in rank order.
    All {
        /// The exchange's number.
        seq: u64,
        /// Every agent's bytes.
        data: Vec<String>,
    },
}

/// Coordinator to agent, once authenticated.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Command {
    /// Take part in a sweep.
    Sweep(Box<SweepOrder>),
    /// Take part in an incast.
    Incast(Box<IncastOrder>),
    /// Take part in a congestion run.
    Congestion(Box<CongestionOrder>),
    /// The answer to a gang operation every agent asked.
    Gang(GangAnswer),
    /// Go on with round `round`; the ranks in `gone` no longer answer (their pairs are not
    /// attempted), with why.
    Round {
        /// The round.
        round: u32,
        /// The ranks that stopped answering, with why.
        gone: Vec<(u32, String)>,
    },
    /// Stop the sweep now (the coordinator was interrupted).
    Stop {
        /// Why.
        reason: String,
    },
    /// The sweep is over: back to waiting.
    Done,
}

/// Agent to coordinator, once authenticated.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AgentMsg {
    /// It is ready for the order it got.
    Ready,
    /// It refuses the order, and why.
    Refused(String),
    /// Its part of a round.
    Report(RoundReport),
    /// A gang operation it waits on.
    Gang(GangAsk),
    /// It could not go on with a gang run (an incast, a congestion run), and why (the
    /// coordinator ends the run).
    Failed(String),
}
