//! One ICMP echo toward a peer, from the rank's data address: ping's method, without ping.
//! Linux offers unprivileged "ping sockets" (a datagram ICMP socket, allowed to the groups
//! in `net.ipv4.ping_group_range`, where the kernel keeps the identifier and filters the
//! replies) and raw ICMP sockets (CAP_NET_RAW: every ICMP packet of the host arrives, with
//! its IP header, and the replies are picked out by source, identifier and sequence).
//! IPv4 only; an IPv6 peer is an attempt that judged nothing.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use results::reach::ReachOutcome;
use socket2::{Domain, Protocol, Socket, Type};

const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
const DEST_UNREACHABLE: u8 = 3;

/// Sequence numbers of this process's echoes.
static SEQ: AtomicU16 = AtomicU16::new(1);

/// An ICMP socket, and whether it is raw (replies carry the IP header).
fn open(bind: Option<IpAddr>) -> std::io::Result<(UdpSocket, bool)> {
    let (s, raw) = match Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::ICMPV4)) {
        Ok(s) => (s, false),
        Err(_) => (
            Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?,
            true,
        ),
    };
    if let Some(ip @ IpAddr::V4(_)) = bind.filter(|ip| !ip.is_unspecified()) {
        s.bind(&SocketAddr::new(ip, 0).into())?;
    }
    Ok((s.into(), raw))
}

/// Whether this process may send echoes at all.
pub fn available(bind: Option<IpAddr>) -> bool {
    open(bind).is_ok()
}

/// The Internet checksum (RFC 1071) of `data`.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request with identifier `id`, sequence `seq`.
fn request(id: u16, seq: u16) -> Vec<u8> {
    let mut p = vec![ECHO_REQUEST, 0, 0, 0];
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(b"fabcheck-reach\0\0");
    let c = checksum(&p);
    p[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

/// What one received packet says of our echo (`None`: not ours).
fn verdict(
    packet: &[u8],
    raw: bool,
    from: IpAddr,
    to: IpAddr,
    id: u16,
    seq: u16,
) -> Option<ReachOutcome> {
    let icmp = if raw {
        let ihl = usize::from(packet.first()? & 0x0f) * 4;
        packet.get(ihl..)?
    } else {
        packet
    };
    let ours = |h: &[u8]| {
        h.len() >= 8
            && (!raw || u16::from_be_bytes([h[4], h[5]]) == id)
            && u16::from_be_bytes([h[6], h[7]]) == seq
    };
    match *icmp.first()? {
        ECHO_REPLY if from == to && ours(icmp) => Some(ReachOutcome::Reached),
        DEST_UNREACHABLE => {
            // The offending datagram follows: its IP header, then our echo's first 8 bytes.
            let inner = icmp.get(8..)?;
            let ihl = usize::from(inner.first()? & 0x0f) * 4;
            ours(inner.get(ihl..)?).then_some(ReachOutcome::Unreachable)
        }
        _ => None,
    }
}

/// Sends one echo to `to` and waits up to `timeout` for its reply.
pub fn echo(
    bind: Option<IpAddr>,
    to: IpAddr,
    id: u32,
    timeout: Duration,
) -> (ReachOutcome, Option<String>) {
    if to.is_ipv6() {
        return (
            ReachOutcome::Error,
            Some("ICMPv6 echo is not tried; reach judged over TCP".into()),
        );
    }
    let (sock, raw) = match open(bind) {
        Ok(s) => s,
        Err(e) => return (ReachOutcome::Error, Some(format!("no ICMP socket: {e}"))),
    };
    let id = (id & 0xffff) as u16;
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = sock.send_to(&request(id, seq), SocketAddr::new(to, 0)) {
        return super::failed(&e);
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 1500];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
            return (ReachOutcome::TimedOut, Some("no echo reply".into()));
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                if let Some(o) = verdict(&buf[..n], raw, from.ip(), to, id, seq) {
                    let detail = (o == ReachOutcome::Unreachable)
                        .then(|| format!("{} said destination unreachable", from.ip()));
                    return (o, detail);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (ReachOutcome::TimedOut, Some("no echo reply".into()))
            }
            Err(e) => return super::failed(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_of_a_request_verifies() {
        let p = request(0x1234, 7);
        assert_eq!(checksum(&p), 0, "a packet with its checksum sums to zero");
        assert_eq!(&p[4..8], &[0x12, 0x34, 0, 7]);
    }

    #[test]
    fn replies_are_picked_by_source_and_sequence() {
        let me: IpAddr = "198.18.0.10".parse().unwrap();
        let other: IpAddr = "198.18.0.11".parse().unwrap();
        let mut reply = request(9, 5);
        reply[0] = ECHO_REPLY;
        assert_eq!(
            verdict(&reply, false, me, me, 9, 5),
            Some(ReachOutcome::Reached)
        );
        assert_eq!(verdict(&reply, false, other, me, 9, 5), None);
        assert_eq!(verdict(&reply, false, me, me, 9, 6), None);
        // Raw: a 20-byte IP header first, and the identifier must match too.
        let mut raw = vec![0x45u8; 1];
        raw.extend_from_slice(&[0; 19]);
        raw.extend_from_slice(&reply);
        assert_eq!(
            verdict(&raw, true, me, me, 9, 5),
            Some(ReachOutcome::Reached)
        );
        assert_eq!(verdict(&raw, true, me, me, 8, 5), None);
        // An unreachable from a router, quoting our echo.
        let mut unreach = vec![DEST_UNREACHABLE, 1, 0, 0, 0, 0, 0, 0, 0x45];
        unreach.extend_from_slice(&[0; 19]);
        unreach.extend_from_slice(&request(9, 5)[..8]);
        assert_eq!(
            verdict(&unreach, false, other, me, 9, 5),
            Some(ReachOutcome::Unreachable)
        );
    }

    #[test]
    fn loopback_answers_an_echo_where_icmp_is_allowed() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        if !available(None) {
            eprintln!("no ICMP socket for this user: the echo itself is not tried");
            return;
        }
        let (o, detail) = echo(Some(lo), lo, 77, Duration::from_secs(2));
        assert_eq!(o, ReachOutcome::Reached, "{detail:?}");
    }
}
