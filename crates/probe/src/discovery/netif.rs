//! Which kernel interface holds an address: the rail of a TCP rank bound with
//! `--bind-addr` (contract: a TCP row's `Peer.device` is that interface, e.g. `rail0`).
//! Asked from iproute2 (`ip -j addr show to ADDR/32`, JSON parsed with serde) since std has
//! no getifaddrs; without `ip` the answer is simply unknown.

use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;

#[derive(Deserialize)]
struct Link {
    ifname: String,
    #[serde(default)]
    addr_info: Vec<Addr>,
}

#[derive(Deserialize)]
struct Addr {
    #[serde(default)]
    local: Option<String>,
}

/// The interface in `ip -j addr show` output that holds `ip`.
pub fn parse(json: &str, ip: IpAddr) -> Option<String> {
    let links: Vec<Link> = serde_json::from_str(json).ok()?;
    links
        .into_iter()
        .find(|l| {
            l.addr_info
                .iter()
                .any(|a| a.local.as_deref().and_then(|s| s.parse().ok()) == Some(ip))
        })
        .map(|l| l.ifname)
}

/// The interface holding `ip` on this host (in this network namespace), if any.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    if ip.is_unspecified() {
        return None;
    }
    let prefix = if ip.is_ipv4() { 32 } else { 128 };
    let args: Vec<String> = ["-j", "addr", "show", "to", &format!("{ip}/{prefix}")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = super::exec::run("ip", &args, Duration::from_secs(2)).ok()?;
    parse(&out, ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    // `ip -j -4 addr show to 127.0.0.1/32`, iproute2 6.1 (Debian 12).
    const LO: &str = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"qdisc":"noqueue","operstate":"UNKNOWN","group":"default","txqlen":1000,"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host","label":"lo","valid_life_time":4294967295,"preferred_life_time":4294967295}]}]"#;

    #[test]
    fn the_interface_that_holds_the_address() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(parse(LO, lo).as_deref(), Some("lo"));
        assert_eq!(parse(LO, "198.18.0.10".parse().unwrap()), None);
        assert_eq!(parse("[]", lo), None);
        assert_eq!(parse("garbage", lo), None);
    }

    #[test]
    fn asks_iproute2_for_real() {
        // iproute2 is installed wherever fabcheck is built (scripts/lib/deps.sh).
        assert_eq!(
            interface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(interface_of("0.0.0.0".parse().unwrap()), None);
        assert_eq!(interface_of("198.19.254.254".parse().unwrap()), None);
    }
}
