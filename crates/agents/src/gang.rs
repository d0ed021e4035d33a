//! Runs whose ranks all work at once (an incast), over the agents: each agent is one rank
//! of a [`Gang`] whose barriers, agreed flags and exchanges go through the coordinator.
//!
//! ```text
//! agent (AgentGang, here)                 coordinator (conduct::relay)
//!   Gang(Barrier {seq})        ->         waits until every agent asked the same
//!                              <-         Gang(Go {seq})
//!   Gang(Flag {seq, local})    ->         ORs them
//!                              <-         Gang(Any {seq, any})
//!   Gang(AllGather {seq, b64}) ->         collects them in rank order
//!                              <-         Gang(All {seq, [b64...]})
//!   Gang(Gather {seq, b64})    ->         keeps them: the run is over
//! ```
//!
//! Unlike a sweep, where a pair that fails is recorded and the rest goes on, every rank of
//! an incast takes part in every round: an agent that drops, fails or asks out of step ends
//! the run for all, named. Every wait is bounded on both sides.

use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use base64::Engine;

use base::wire;
use bootstrap::gang::Gang;

use crate::proto::{AgentMsg, Command, GangAnswer, GangAsk};

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn unb64(s: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .context("undecodable base64 in a gang message")
}

/// One agent as rank `rank` of `size`, over its coordinator's connection.
pub struct AgentGang<'a> {
    /// The connection to the coordinator.
    pub conn: &'a mut TcpStream,
    /// This agent's rank in the run.
    pub rank: u32,
    /// How many ranks the run has.
    pub size: u32,
    /// Longest wait for the coordinator's answer to a barrier or an exchange: every agent
    /// must have reached it, which takes up to a window and the set-ups around it.
    pub wait: Duration,
    seq: u64,
}

impl<'a> AgentGang<'a> {
    /// The gang of this agent's connection, as rank `rank` of `size`.
    pub fn new(conn: &'a mut TcpStream, rank: u32, size: u32, wait: Duration) -> Self {
        Self {
            conn,
            rank,
            size,
            wait,
            seq: 0,
        }
    }

    /// Asks, and waits for the answer of the same number.
    fn ask(&mut self, ask: GangAsk, what: &str, limit: Duration) -> Result<Option<GangAnswer>> {
        let seq = self.seq;
        self.seq += 1;
        let last = matches!(ask, GangAsk::Gather { .. });
        wire::send_json(self.conn, &AgentMsg::Gang(ask))
            .with_context(|| format!("telling the coordinator ({what})"))?;
        if last {
            return Ok(None);
        }
        let cmd: Command = wire::recv_json(self.conn, limit)
            .with_context(|| format!("waiting for the coordinator ({what})"))?;
        let answer = match cmd {
            Command::Gang(a) => a,
            Command::Stop { reason } => bail!("the coordinator stopped the run: {reason}"),
            other => bail!("the coordinator sent {other:?} while {what}"),
        };
        let got = match &answer {
            GangAnswer::Go { seq } | GangAnswer::Any { seq, .. } | GangAnswer::All { seq, .. } => {
                *seq
            }
        };
        if got != seq {
            bail!(
                "the coordinator answered step {got} while this agent was at step {seq} ({what})"
            );
        }
        Ok(Some(answer))
    }
}

impl Gang for AgentGang<'_> {
    fn launcher(&self) -> &'static str {
        "agents"
    }
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn barrier(&mut self, what: &str) -> Result<()> {
        let seq = self.seq;
        match self.ask(GangAsk::Barrier { seq }, what, self.wait)? {
            Some(GangAnswer::Go { .. }) => Ok(()),
            other => bail!("the coordinator answered a barrier ({what}) with {other:?}"),
        }
    }
    fn any_within(&mut self, local: bool, what: &str, limit: Duration) -> Result<bool> {
        let seq = self.seq;
        match self.ask(GangAsk::Flag { seq, local }, what, limit + self.wait)? {
            Some(GangAnswer::Any { any, .. }) => Ok(any),
            other => bail!("the coordinator answered a flag ({what}) with {other:?}"),
        }
    }
    fn all_gather(&mut self, mine: &[u8], what: &str) -> Result<Vec<Vec<u8>>> {
        let seq = self.seq;
        let ask = GangAsk::AllGather {
            seq,
            data: b64(mine),
        };
        match self.ask(ask, what, self.wait)? {
            Some(GangAnswer::All { data, .. }) if data.len() == self.size as usize => {
                data.iter().map(|d| unb64(d)).collect()
            }
            other => bail!("the coordinator answered an exchange ({what}) with {other:?}"),
        }
    }
    fn gather(&mut self, mine: &[u8], what: &str) -> Result<Option<Vec<Vec<u8>>>> {
        let seq = self.seq;
        let ask = GangAsk::Gather {
            seq,
            data: b64(mine),
        };
        self.ask(ask, what, self.wait)?;
        Ok(None)
    }
}
