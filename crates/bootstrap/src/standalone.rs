//! perftest-style standalone bootstrap: the server listens on a port, the client connects,
//! and one TCP control connection carries the handshake and every later control message.
//!
//! The server validates what arrives: bytes that are not a fabcheck hello, a different
//! protocol version, tool or plan are refused with a message naming the difference, and the
//! server goes back to waiting for the next client until its timeout. A client retries a
//! refused connection until its timeout (the server may not be up yet), as users do by hand
//! with perftest.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use base::link::PeerLink;
use base::wire;

/// Bumped whenever the control protocol changes; both sides must agree.
pub const PROTOCOL_VERSION: u32 = 2;

/// What the client announces.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The control protocol's version ([`PROTOCOL_VERSION`]); both ends must speak the same.
    pub protocol: u32,
    /// The tool the client runs (`bench-lat`, `bench-bw`): a server serves its own kind only.
    pub tool: String,
    /// The client's fabcheck version, for the refusal message.
    pub tool_version: String,
    /// The options both sides must agree on (test, transport, sizes, ...).
    pub plan: Value,
    /// Options the server adopts from the client (iterations, duration, warm-up).
    pub adopt: Value,
    /// The client's host facts, for the document.
    pub host: results::HostInfo,
}

/// The server's answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Welcome {
    /// Whether the server takes this client.
    pub accepted: bool,
    /// Why not, in words (which option differs, and the two values).
    pub reason: Option<String>,
    /// The server's host facts, when accepted.
    pub host: Option<results::HostInfo>,
}

/// The control connection after a successful handshake.
#[derive(Debug)]
pub struct TcpLink {
    stream: TcpStream,
    timeout: Duration,
}

impl PeerLink for TcpLink {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        wire::send_frame(&mut self.stream, payload)
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        wire::recv_frame(&mut self.stream, self.timeout)
    }

    fn local_ip(&self) -> Option<IpAddr> {
        self.stream.local_addr().ok().map(|a| a.ip())
    }
}

impl TcpLink {
    /// A link over an established control connection (the handshake already done).
    pub fn new(stream: TcpStream, timeout: Duration) -> Self {
        Self { stream, timeout }
    }

    /// Address of the peer as seen on the control connection.
    pub fn peer_ip(&self) -> Option<IpAddr> {
        self.stream.peer_addr().ok().map(|a| a.ip())
    }
}

/// Lists every top-level key whose value differs between the two plans.
pub fn plan_differences(ours: &Value, theirs: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let a = ours.as_object().unwrap_or(&empty);
    let b = theirs.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |v: Option<&Value>| v.map_or("(unset)".to_string(), brief);
            format!(
                "{k}: server {} vs client {}",
                show(a.get(k)),
                show(b.get(k))
            )
        })
        .collect()
}

/// A value for a message: long lists shortened to `[first .. last] (N values)`.
fn brief(v: &Value) -> String {
    match v.as_array() {
        Some(a) if a.len() > 4 => format!("[{} .. {}] ({} values)", a[0], a[a.len() - 1], a.len()),
        _ => v.to_string(),
    }
}

/// Server side: binds `port` and waits up to `timeout` for a client whose plan matches.
/// Returns the link, the client's hello, and nothing else: the caller takes it from there.
pub fn serve(
    port: u16,
    bind: Option<IpAddr>,
    timeout: Duration,
    tool: &str,
    plan: &Value,
    host: &results::HostInfo,
) -> Result<(TcpLink, Hello)> {
    let listener = listen(port, bind)?;
    let deadline = Instant::now() + timeout;
    eprintln!(
        "waiting for a client on port {port} (timeout {} s)",
        timeout.as_secs()
    );
    loop {
        let (mut stream, from) = next_client(&listener, deadline, timeout, tool, port)?;
        // A client must say hello promptly; a silent or garbage peer costs at most this.
        let hello_wait = timeout.min(Duration::from_secs(5));
        let hello: Hello = match wire::recv_json(&mut stream, hello_wait) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("ignored a connection from {from}: {e:#}; still waiting for a client");
                continue;
            }
        };
        let refusal = refusal(&hello, tool, plan);
        if !refusal.is_empty() {
            let reason = refusal.join("; ");
            eprintln!(
                "refused client {from}: options differ: {reason}; still waiting for a client"
            );
            let _ = wire::send_json(
                &mut stream,
                &Welcome {
                    accepted: false,
                    reason: Some(reason),
                    host: None,
                },
            );
            continue;
        }
        wire::send_json(
            &mut stream,
            &Welcome {
                accepted: true,
                reason: None,
                host: Some(host.clone()),
            },
        )?;
        eprintln!("client {from} connected");
        return Ok((TcpLink { stream, timeout }, hello));
    }
}

/// The server's listening socket on `port` (all addresses unless `bind`), non-blocking.
fn listen(port: u16, bind: Option<IpAddr>) -> Result<TcpListener> {
    let addr = SocketAddr::new(bind.unwrap_or(IpAddr::from([0, 0, 0, 0])), port);
    let listener = TcpListener::bind(addr).map_err(|e| {
        if e.kind() == ErrorKind::AddrInUse {
            anyhow!("port {port} is already in use (another server running?): stop it or pick another port with -p")
        } else {
            anyhow!("cannot listen on {addr}: {e}")
        }
    })?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The next connection, blocking with no delay, until `deadline` or an interrupt.
fn next_client(
    listener: &TcpListener,
    deadline: Instant,
    timeout: Duration,
    tool: &str,
    port: u16,
) -> Result<(std::net::TcpStream, SocketAddr)> {
    loop {
        match listener.accept() {
            Ok((stream, from)) => {
                stream.set_nonblocking(false)?;
                stream.set_nodelay(true)?;
                return Ok((stream, from));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if base::interrupt::interrupted() {
                    bail!("interrupted while waiting for a client");
                }
                if Instant::now() > deadline {
                    bail!(
                        "no client connected within {} s: start the client with `{tool} <this host> -p {port}` \
                         (same options), or raise --timeout",
                        timeout.as_secs()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).context("accepting a client"),
        }
    }
}

/// Why a client's hello is refused (its protocol, tool or plan differs); empty to accept.
fn refusal(hello: &Hello, tool: &str, plan: &Value) -> Vec<String> {
    let mut refusal = Vec::new();
    if hello.protocol != PROTOCOL_VERSION {
        refusal.push(format!(
            "control protocol: server {PROTOCOL_VERSION} (fabcheck {}) vs client {} (fabcheck {})",
            results::provenance::TOOL_VERSION,
            hello.protocol,
            hello.tool_version
        ));
    }
    if hello.tool != tool {
        refusal.push(format!("tool: server {tool} vs client {}", hello.tool));
    }
    if refusal.is_empty() {
        refusal = plan_differences(plan, &hello.plan);
    }
    refusal
}

/// Client side: connects to `host:port` (retrying while the server is not up yet, until
/// `timeout`), says hello and waits for the verdict.
pub fn connect(
    host: &str,
    port: u16,
    timeout: Duration,
    hello: &Hello,
) -> Result<(TcpLink, results::HostInfo)> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve server host '{host}'"))?
        .collect();
    let deadline = Instant::now() + timeout;
    let mut last_err = None;
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let why = last_err.map_or("no address".to_string(), |e: std::io::Error| e.to_string());
            bail!(
                "no server answered at {host}:{port} within {} s ({why}): start the server first \
                 (`{} -p {port}` on {host}) and check the port and firewall",
                timeout.as_secs(),
                hello.tool
            );
        }
        let connected = addrs.iter().find_map(|a| {
            TcpStream::connect_timeout(a, left.min(Duration::from_secs(2)))
                .map_err(|e| last_err = Some(e))
                .ok()
        });
        match connected {
            Some(s) => break s,
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    stream.set_nodelay(true)?;
    wire::send_json(&mut stream, hello)?;
    let welcome: Welcome = wire::recv_json(&mut stream, timeout).with_context(|| {
        format!("waiting for the server at {host}:{port} to accept the handshake")
    })?;
    if !welcome.accepted {
        bail!(
            "the server at {host}:{port} refused this client: {}. Run both sides with the same options",
            welcome.reason.unwrap_or_else(|| "no reason given".into())
        );
    }
    let server_host = welcome.host.unwrap_or_default();
    Ok((TcpLink { stream, timeout }, server_host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_the_option_and_both_values() {
        let d = plan_differences(
            &json!({"test": "send_lat", "sizes": [2]}),
            &json!({"test": "send_lat", "sizes": [4], "bidirectional": true}),
        );
        assert_eq!(d.len(), 2);
        assert!(
            d.iter().any(|s| s == "sizes: server [2] vs client [4]"),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|s| s.starts_with("bidirectional: server (unset)")),
            "{d:?}"
        );
        assert!(plan_differences(&json!({"a": 1}), &json!({"a": 1})).is_empty());
    }

    #[test]
    fn a_hello_is_refused_for_its_protocol_or_tool_before_its_plan() {
        let hello = |protocol, tool: &str, plan| Hello {
            protocol,
            tool: tool.into(),
            tool_version: "0.0.0".into(),
            plan,
            adopt: json!({}),
            host: results::HostInfo::default(),
        };
        let plan = json!({"test": "send_bw"});
        assert!(refusal(
            &hello(PROTOCOL_VERSION, "bench-bw", plan.clone()),
            "bench-bw",
            &plan
        )
        .is_empty());
        let r = refusal(
            &hello(PROTOCOL_VERSION, "bench-lat", json!({})),
            "bench-bw",
            &plan,
        );
        assert_eq!(r, ["tool: server bench-bw vs client bench-lat"]);
        let r = refusal(
            &hello(PROTOCOL_VERSION + 1, "bench-bw", plan.clone()),
            "bench-bw",
            &plan,
        );
        assert!(
            r.len() == 1 && r[0].starts_with("control protocol:"),
            "{r:?}"
        );
        let r = refusal(
            &hello(PROTOCOL_VERSION, "bench-bw", json!({"test": "write_bw"})),
            "bench-bw",
            &plan,
        );
        assert_eq!(r.len(), 1, "{r:?}");
    }
}
