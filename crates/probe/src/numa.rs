//! NUMA facts a measuring process is placed by: the host's online CPUs, each node's CPUs,
//! and the node a NIC's PCI function hangs off. A thread on the far socket crosses the
//! inter-socket link for every doorbell, completion poll and buffer touch, which on a
//! ConnectX adds hundreds of nanoseconds to a small-message latency and can cap bandwidth;
//! perftest binds to the NIC's node for that reason. Read from sysfs under a root (`/` on a
//! host, a fixture in tests); nothing here changes the process.

use crate::sysfs::read_trim;
use std::path::Path;

/// The CPUs of a kernel cpulist (`0-3,8,10-11`), ascending, without repeats; `None` when
/// it is not one (an empty list is an empty set).
pub fn parse_cpulist(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The shortest cpulist of `cpus` (ascending): `[0, 1, 2, 5]` -> `0-2,5`.
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The host's online CPUs (`/sys/devices/system/cpu/online`).
pub fn online_cpus(root: &Path) -> Option<Vec<u32>> {
    parse_cpulist(&read_trim(root.join("sys/devices/system/cpu/online"))?)
}

/// The CPUs of NUMA node `node`.
pub fn node_cpus(root: &Path, node: u32) -> Option<Vec<u32>> {
    parse_cpulist(&read_trim(
        root.join(format!("sys/devices/system/node/node{node}/cpulist")),
    )?)
}

/// The NUMA nodes of the host, ascending.
pub fn nodes(root: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = crate::sysfs::dir_names(root.join("sys/devices/system/node"))
        .iter()
        .filter_map(|n| n.strip_prefix("node")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// The one node whose CPUs hold all of `cpus`, if there is one.
pub fn node_holding(root: &Path, cpus: &[u32]) -> Option<u32> {
    if cpus.is_empty() {
        return None;
    }
    nodes(root).into_iter().find(|&n| {
        node_cpus(root, n).is_some_and(|have| cpus.iter().all(|c| have.binary_search(c).is_ok()))
    })
}

/// The node of a PCI function's `numa_node` file; `-1` (a single-node host, or firmware
/// that does not say) is no node.
pub(crate) fn numa_node_file(path: &Path) -> Option<u32> {
    read_trim(path)?
        .parse::<i64>()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

/// The NUMA node RDMA device `dev` hangs off.
pub fn rdma_device_node(root: &Path, dev: &str) -> Option<u32> {
    numa_node_file(&root.join(format!("sys/class/infiniband/{dev}/device/numa_node")))
}

/// The NUMA node network interface `ifname` hangs off (`None` for virtual interfaces,
/// which have no PCI function: loopback, veth, bridges).
pub fn net_device_node(root: &Path, ifname: &str) -> Option<u32> {
    numa_node_file(&root.join(format!("sys/class/net/{ifname}/device/numa_node")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn cpulists_parse_and_print_as_the_kernel_writes_them() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3,1,1"), Some(vec![1, 3]));
        for bad in ["a", "3-1", "1-", "-2", "1,,x", "0-99999999"] {
            assert_eq!(parse_cpulist(bad), None, "{bad}");
        }
        assert_eq!(format_cpulist(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_cpulist(&[4]), "4");
        assert_eq!(format_cpulist(&[]), "");
        let list = "0-31,64-95";
        assert_eq!(format_cpulist(&parse_cpulist(list).unwrap()), list);
    }

    #[test]
    fn a_nics_node_and_its_cpus_come_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        put(root, "sys/devices/system/cpu/online", "0-7\n");
        put(root, "sys/devices/system/node/node0/cpulist", "0-3\n");
        put(root, "sys/devices/system/node/node1/cpulist", "4-7\n");
        put(root, "sys/class/infiniband/mlx5_0/device/numa_node", "1\n");
        put(root, "sys/class/infiniband/rxe0/device/numa_node", "-1\n");
        put(root, "sys/class/net/ens1f0/device/numa_node", "0\n");
        assert_eq!(online_cpus(root), Some((0..8).collect()));
        assert_eq!(nodes(root), vec![0, 1]);
        assert_eq!(rdma_device_node(root, "mlx5_0"), Some(1));
        assert_eq!(rdma_device_node(root, "rxe0"), None);
        assert_eq!(rdma_device_node(root, "mlx5_9"), None);
        assert_eq!(net_device_node(root, "ens1f0"), Some(0));
        assert_eq!(net_device_node(root, "lo"), None);
        assert_eq!(node_cpus(root, 1), Some(vec![4, 5, 6, 7]));
        assert_eq!(node_holding(root, &[5, 6]), Some(1));
        assert_eq!(node_holding(root, &[3, 4]), None);
        assert_eq!(node_holding(root, &[]), None);
    }
}
