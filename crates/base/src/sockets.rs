//! TCP connections that leave from a chosen local address.
//!
//! On a multi-rail host every NIC has its own address, and the kernel picks the source of
//! an outgoing connection by its routing table, which may send the bytes out of another
//! NIC than the one under test. Binding the source first (iperf3's `-B`) pins the path;
//! it also lets a simulated cluster on one machine tell its nodes apart by address.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use socket2::{Domain, Socket, Type};

/// Connects to `to` from `from` (any port), or from wherever the kernel chooses.
pub fn connect_from(
    to: SocketAddr,
    from: Option<IpAddr>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let Some(ip) = from.filter(|ip| !ip.is_unspecified()) else {
        return TcpStream::connect_timeout(&to, timeout);
    };
    let s = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    s.bind(&SocketAddr::new(ip, 0).into())?;
    s.connect_timeout(&to.into(), timeout)?;
    Ok(s.into())
}

/// Connects to `to` from `from`:`port`, a chosen source port (what an L4 ECMP hash sees,
/// so a test can steer a flow). `SO_REUSEADDR` lets the port be bound again while an
/// earlier connection from it sits in TIME_WAIT (the next size of the same pair).
pub fn connect_from_port(
    to: SocketAddr,
    from: IpAddr,
    port: u16,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::new(from, port).into())?;
    s.connect_timeout(&to.into(), timeout)?;
    Ok(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn the_connection_leaves_from_the_given_address() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let c = connect_from(
            to,
            Some("127.0.0.7".parse().unwrap()),
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(c.local_addr().unwrap().ip().to_string(), "127.0.0.7");
        let (_, from) = l.accept().unwrap();
        assert_eq!(from.ip().to_string(), "127.0.0.7");
        let c = connect_from(to, None, Duration::from_secs(2)).unwrap();
        assert!(c.local_addr().unwrap().ip().is_loopback());
    }

    #[test]
    fn the_connection_leaves_from_the_given_port() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let c = connect_from_port(
            to,
            "127.0.0.1".parse().unwrap(),
            port,
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(c.local_addr().unwrap().port(), port);
        let (_, from) = l.accept().unwrap();
        assert_eq!(from.port(), port);
    }
}
