//! The control connection of one pair in a sweep.
//!
//! Every rank opens one listener when the run starts and announces it in the roster. In
//! each round the initiator of a pair connects to its responder's listener and presents a
//! ticket (job, round, both ranks); the responder accepts only that ticket, so a stray
//! client or a late initiator of an earlier round cannot join the pair. Every wait has
//! the run's timeout: a peer that never comes fails the pair, not the job.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::coordinator::{reach, Member};
use crate::pattern::RankPair;
use base::wire;
use bootstrap::standalone::TcpLink;

/// Who may connect, for which round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// Drawn by rank 0 (or the coordinator) once per run.
    pub job: u64,
    /// The round.
    pub round: u32,
    /// The initiator's rank.
    pub initiator: u32,
    /// The responder's rank.
    pub responder: u32,
}

impl Ticket {
    /// The ticket of `pair` in `round` of the run `job`.
    pub fn new(job: u64, round: u32, pair: RankPair) -> Self {
        Self {
            job,
            round,
            initiator: pair.initiator,
            responder: pair.responder,
        }
    }
}

/// A rank's control listener.
pub struct ControlListener {
    listener: TcpListener,
    addr: SocketAddr,
}

impl ControlListener {
    /// Listens on `bind` (all addresses when `None`), on a port the kernel picks.
    pub fn open(bind: Option<IpAddr>) -> Result<Self> {
        let ip = bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .with_context(|| format!("opening the pair control listener on {ip}"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        Ok(Self { listener, addr })
    }

    /// The bound address (its IP is unspecified when bound to all).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits up to `timeout` for the initiator holding `ticket`. Anything else that
    /// connects meanwhile is refused and logged, and the wait goes on.
    pub fn accept(&self, ticket: Ticket, timeout: Duration) -> Result<TcpLink> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.listener.accept() {
                Ok((mut stream, from)) => {
                    stream.set_nonblocking(false)?;
                    stream.set_nodelay(true)?;
                    let left = deadline.saturating_duration_since(Instant::now());
                    let got: Result<Ticket> = wire::recv_json(
                        &mut stream,
                        left.clamp(Duration::from_millis(100), Duration::from_secs(5)),
                    );
                    match got {
                        Ok(t) if t == ticket => {
                            wire::send_json(&mut stream, &true)?;
                            return Ok(TcpLink::new(stream, timeout));
                        }
                        Ok(t) => {
                            eprintln!(
                                "refused a pair connection from {from}: it was for round {} ranks {} -> {}, \
                                 this rank waits for round {} rank {}",
                                t.round, t.initiator, t.responder, ticket.round, ticket.initiator
                            );
                            let _ = wire::send_json(&mut stream, &false);
                        }
                        Err(e) => {
                            eprintln!("ignored a connection from {from} on the pair port: {e:#}")
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        bail!(
                            "rank {} did not connect within {} s for round {}: it died, hangs, or \
                             cannot reach this rank's address (firewall? --bind-addr?)",
                            ticket.initiator,
                            timeout.as_secs_f64(),
                            ticket.round
                        );
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(e).context("accepting a pair connection"),
            }
        }
    }
}

/// Initiator side: connects to the responder's listener at `to` (from `from` when given)
/// and presents `ticket`.
pub fn connect(
    to: SocketAddr,
    from: Option<IpAddr>,
    ticket: Ticket,
    timeout: Duration,
) -> Result<TcpLink> {
    let deadline = Instant::now() + timeout;
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match base::sockets::connect_from(to, from, left.max(Duration::from_millis(10))) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline && e.kind() == ErrorKind::ConnectionRefused => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(anyhow!(
                    "cannot reach rank {} at {to} for round {}: {e} (firewall? wrong --bind-addr?)",
                    ticket.responder,
                    ticket.round
                ))
            }
        }
    };
    stream.set_nodelay(true)?;
    wire::send_json(&mut stream, &ticket)?;
    let accepted: bool = wire::recv_json(&mut stream, timeout)
        .with_context(|| format!("waiting for rank {} to accept the pair", ticket.responder))?;
    if !accepted {
        bail!(
            "rank {} at {to} refused the pair of round {} (it waits for another round: ranks out of step)",
            ticket.responder,
            ticket.round
        );
    }
    Ok(TcpLink::new(stream, timeout))
}

/// Rank `me`'s control link for the pair of `ticket`: as its initiator it connects (from
/// `bind` when given) to the responder's listener, where [`reach`] finds it in `members`;
/// as its responder it waits on `listener`. Either waits up to `timeout`.
pub fn open(
    ticket: Ticket,
    me: u32,
    members: &[Member],
    listener: &ControlListener,
    bind: Option<IpAddr>,
    timeout: Duration,
) -> Result<TcpLink> {
    if ticket.initiator == me {
        let to = reach(&members[me as usize], &members[ticket.responder as usize])?;
        connect(to, bind, ticket, timeout)
    } else {
        listener.accept(ticket, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::link::{recv_json, send_json, PeerLink};

    fn ticket(round: u32) -> Ticket {
        Ticket {
            job: 9,
            round,
            initiator: 2,
            responder: 5,
        }
    }

    #[test]
    fn the_right_ticket_connects_and_others_are_refused() {
        let l = ControlListener::open(Some("127.0.0.1".parse().unwrap())).unwrap();
        let to = l.addr();
        let stale = std::thread::spawn(move || {
            connect(to, None, ticket(3), Duration::from_secs(5))
                .err()
                .map(|e| e.to_string())
        });
        let good = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let mut link = connect(to, None, ticket(4), Duration::from_secs(5)).unwrap();
            send_json(&mut link, &"hello").unwrap();
        });
        let mut link = l.accept(ticket(4), Duration::from_secs(5)).unwrap();
        let got: String = recv_json(&mut link).unwrap();
        assert_eq!(got, "hello");
        assert!(link.local_ip().is_some());
        good.join().unwrap();
        let e = stale.join().unwrap().expect("the stale ticket is refused");
        assert!(e.contains("refused the pair of round 3"), "{e}");
    }

    #[test]
    fn an_initiator_that_never_comes_fails_the_wait_in_time() {
        let l = ControlListener::open(Some("127.0.0.1".parse().unwrap())).unwrap();
        let t0 = Instant::now();
        let e = l.accept(ticket(0), Duration::from_millis(300)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(3));
        assert!(e.to_string().contains("did not connect within"), "{e}");
    }
}
