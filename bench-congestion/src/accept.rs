//! Accepting a known number of peers, each announcing itself with an 8-byte header (its
//! rank, the connection's kind), within a deadline.

use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub fn accept_all(
    l: &TcpListener,
    expected: usize,
    deadline: Instant,
) -> Result<Vec<(u32, TcpStream)>> {
    l.set_nonblocking(true)?;
    let mut out = Vec::new();
    while out.len() < expected {
        match l.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(
                    deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1)),
                ))?;
                let mut hdr = [0u8; 8];
                s.read_exact(&mut hdr)
                    .context("reading a connection's header")?;
                let kind = u32::from_le_bytes(hdr[4..].try_into().unwrap());
                out.push((kind, s));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    bail!("only {} of {expected} peers connected in time", out.len());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e).context("accepting a peer"),
        }
    }
    Ok(out)
}
