//! Sweeps without MPI: an agent on every node (or every NIC) and one coordinator.
//!
//! On delivery day the links are proven before a scheduler or MPI exists, and clusters run
//! by Kubernetes start work as pods: a DaemonSet of agents and one Job. perftest's answer,
//! one server per test per port started by hand, does not scale to a thousand nodes.
//!
//! - An agent (`bench-bw --serve`) listens on one control port for as long as it lives,
//!   reports its host facts and inventory, and takes part in the sweeps a coordinator runs:
//!   in each round it is told to go, measures its pair (if it has one) exactly as an MPI
//!   rank would (the same driver, `p2p`), and reports. It survives a coordinator that
//!   disconnects, a peer that dies and garbage on its port; every wait has a deadline.
//! - The coordinator (`bench-bw --hosts FILE --pattern all-pairs ...`) connects to every
//!   agent at once (tokio: hundreds of connections waiting, each with its own deadline),
//!   refuses to start when agents run different versions or options, schedules the rounds
//!   with the same patterns as under MPI, starts the pairs of a round together, collects
//!   the results and writes one document in the same schema as an MPI sweep. An agent that
//!   does not answer or drops is named, its pairs are recorded as failed, and the sweep
//!   goes on.
//! - The control plane is authenticated: both sides prove they hold a shared secret
//!   (HMAC-SHA256 over fresh nonces, both ways) before any command; the secret comes from a
//!   file or the environment, never from the command line, and is never logged.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod conduct;
pub mod gang;
pub mod metrics;
pub mod proto;
pub mod secret;
pub mod serve;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// One line of the host file: where an agent listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentAddr {
    /// As written (`node07` or `node07:18556`), for messages and dead members' names.
    pub name: String,
    /// The host to connect to.
    pub host: String,
    /// The agent's port.
    pub port: u16,
}

impl AgentAddr {
    /// The socket addresses the name resolves to.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>> {
        Ok((self.host.as_str(), self.port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve agent host '{}'", self.host))?
            .collect())
    }
}

/// Reads a host file: one agent per line, `host` or `host:port` (`[v6addr]:port`), `#`
/// comments and blank lines ignored; `port` defaults to `default_port`.
pub fn parse_hosts(text: &str, default_port: u16) -> Result<Vec<AgentAddr>> {
    let mut out: Vec<AgentAddr> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line.split_whitespace().count() != 1 {
            bail!(
                "line {}: '{line}' is not one agent: write `host` or `host:port` per line",
                n + 1
            );
        }
        let (host, port) = if let Some(rest) = line.strip_prefix('[') {
            let (h, p) = rest
                .split_once(']')
                .with_context(|| format!("line {}: '{line}': unclosed '['", n + 1))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match line.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h.to_string(), p),
                _ => (line.to_string(), ""),
            }
        };
        let port = if port.is_empty() {
            default_port
        } else {
            port.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .with_context(|| format!("line {}: '{port}' is not a port (1-65535)", n + 1))?
        };
        let a = AgentAddr {
            name: line.to_string(),
            host,
            port,
        };
        if out.iter().any(|o| o.host == a.host && o.port == a.port) {
            bail!("line {}: agent {line} is listed twice", n + 1);
        }
        out.push(a);
    }
    if out.len() < 2 {
        bail!(
            "{} agent(s) listed: a run over agents needs at least two (one `host[:port]` per line)",
            out.len()
        );
    }
    Ok(out)
}

/// Reads the host file at `path`.
pub fn read_hosts(path: &Path, default_port: u16) -> Result<Vec<AgentAddr>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the host file {}", path.display()))?;
    parse_hosts(&text, default_port).with_context(|| format!("in the host file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_files_parse_and_bad_lines_are_named() {
        let h = parse_hosts("# agents\nnode1\nnode2:19000\n\n[::1]:7 # v6\n", 18555).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!((h[0].host.as_str(), h[0].port), ("node1", 18555));
        assert_eq!((h[1].host.as_str(), h[1].port), ("node2", 19000));
        assert_eq!((h[2].host.as_str(), h[2].port), ("::1", 7));
        for (bad, why) in [
            ("a\nb:x\n", "line 2: 'x' is not a port"),
            ("a\na b\n", "not one agent"),
            ("a\na\n", "listed twice"),
            ("a\n", "at least two"),
            ("a\nb:0\n", "is not a port"),
        ] {
            let e = parse_hosts(bad, 1).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
