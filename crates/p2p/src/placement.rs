//! Where a rank's measuring thread runs. perftest 26.04 binds to the NIC's NUMA node
//! unless the launcher restricted the affinity already; so does this, and `--cpu LIST`
//! chooses by hand. It is done once, after the device is settled and before any buffer is
//! allocated or thread started: the buffers' pages go where their first touch is (the
//! kernel's default policy), and threads started later inherit the mask.
//!
//! With several ranks on a host each is bound to its own NIC's node, sharing that node's
//! CPUs; to give each its own core, let the launcher bind (`mpirun --bind-to core`,
//! `srun --cpu-bind=cores`): a restricted mask is left as it is.

use crate::plan::Plan;
use anyhow::{anyhow, bail, Result};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use probe::numa;
use results::Placement;
use std::net::IpAddr;
use std::path::Path;
use transport::TransportKind;

/// What was decided: the placement to record, and the CPUs to bind to (`None`: leave the
/// mask as it is).
#[derive(Debug, PartialEq)]
pub(crate) struct Decision {
    pub bind: Option<Vec<u32>>,
    pub placement: Placement,
}

/// The NIC this rank measures through: its name for messages and its NUMA node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Nic<'a> {
    pub name: Option<&'a str>,
    pub node: Option<u32>,
}

/// Decides where the thread goes, from the host's sysfs under `root`, the mask the
/// process has now (`current`) and `--cpu` (`asked`). Pure: [`place`] applies it.
pub(crate) fn decide(
    root: &Path,
    nic: Nic<'_>,
    current: &[u32],
    asked: Option<&[u32]>,
) -> Result<Decision> {
    let online = numa::online_cpus(root);
    if let Some(asked) = asked {
        return by_hand(root, nic, asked, online.as_deref());
    }
    let leave = |why: Option<String>, source: &str| Decision {
        bind: None,
        placement: placement(root, nic, current, source, why),
    };
    let Some(online) = online else {
        return Ok(leave(
            Some("the host's online CPUs are unknown (no /sys/devices/system/cpu/online)".into()),
            "unbound",
        ));
    };
    // The launcher bound the rank already: its choice stands.
    if current.len() < online.len() {
        return Ok(leave(None, "launcher"));
    }
    let Some(node) = nic.node else {
        let why = match nic.name {
            Some(d) => format!(
                "the NUMA node of {d} is unknown (no PCI function, or the firmware reports -1)"
            ),
            None => "no NIC is known for this rank (TCP without --bind-addr)".into(),
        };
        return Ok(leave(Some(why), "unbound"));
    };
    let cpus: Vec<u32> = numa::node_cpus(root, node)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| online.binary_search(c).is_ok())
        .collect();
    if cpus.is_empty() {
        return Ok(leave(
            Some(format!("node {node} of the NIC lists no online CPU")),
            "unbound",
        ));
    }
    Ok(Decision {
        bind: Some(cpus.clone()),
        placement: placement(root, nic, &cpus, "nic-node", None),
    })
}

/// `--cpu LIST`: bound as asked when every CPU is online, with a note when they sit on
/// another NUMA node than the NIC.
fn by_hand(root: &Path, nic: Nic<'_>, asked: &[u32], online: Option<&[u32]>) -> Result<Decision> {
    if asked.is_empty() {
        bail!("--cpu: an empty list; name CPUs as a cpulist, e.g. --cpu 2 or --cpu 0-7,16");
    }
    if let Some(online) = online {
        if let Some(c) = asked.iter().find(|c| online.binary_search(c).is_err()) {
            bail!(
                "--cpu {}: CPU {c} is not online on this host (online: {}); choose from those",
                numa::format_cpulist(asked),
                numa::format_cpulist(online)
            );
        }
    }
    let note = match (nic.node, numa::node_holding(root, asked)) {
        (Some(n), Some(m)) if n != m => Some(format!(
            "--cpu puts the thread on node {m}, the NIC{} is on node {n}: every \
             completion and buffer touch crosses the socket link",
            nic.name.map(|d| format!(" {d}")).unwrap_or_default()
        )),
        _ => None,
    };
    Ok(Decision {
        bind: Some(asked.to_vec()),
        placement: placement(root, nic, asked, "cpu-option", note),
    })
}

/// The placement recorded for a thread on `cpus`, decided by `source`.
fn placement(
    root: &Path,
    nic: Nic<'_>,
    cpus: &[u32],
    source: &str,
    note: Option<String>,
) -> Placement {
    Placement {
        cpus: numa::format_cpulist(cpus),
        node: numa::node_holding(root, cpus),
        nic_node: nic.node,
        source: source.into(),
        note,
    }
}

/// The NIC of this rank: the RDMA device with verbs, with TCP the interface holding
/// `--bind-addr`.
fn nic_of(plan: &Plan, bind: Option<IpAddr>) -> (Option<String>, Option<u32>) {
    let root = Path::new("/");
    match plan.transport {
        TransportKind::Verbs => {
            let dev = plan.verbs.device.clone();
            let node = dev.as_deref().and_then(|d| numa::rdma_device_node(root, d));
            (dev, node)
        }
        _ => {
            let ifname = bind.and_then(probe::discovery::interface_of);
            let node = ifname
                .as_deref()
                .and_then(|i| numa::net_device_node(root, i));
            (ifname, node)
        }
    }
}

/// The calling thread's CPU mask.
fn current_cpus() -> Result<Vec<u32>> {
    let set = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| anyhow!("reading the CPU affinity: {e}"))?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .map(|c| c as u32)
        .collect())
}

fn bind_to(cpus: &[u32]) -> nix::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c as usize)?;
    }
    sched_setaffinity(Pid::from_raw(0), &set)
}

/// Places the calling thread (call it on the thread that measures, before it allocates
/// buffers or starts threads) and returns what to record. `--cpu` the kernel refuses is
/// an error; a NIC-node binding it refuses leaves the thread where it was, and says so.
pub fn place(plan: &Plan, bind: Option<IpAddr>, asked: Option<&[u32]>) -> Result<Placement> {
    let (name, node) = nic_of(plan, bind);
    let current = current_cpus()?;
    let d = decide(
        Path::new("/"),
        Nic {
            name: name.as_deref(),
            node,
        },
        &current,
        asked,
    )?;
    let Some(cpus) = d.bind else {
        return Ok(d.placement);
    };
    match bind_to(&cpus) {
        Ok(()) => Ok(d.placement),
        Err(e) if asked.is_some() => bail!(
            "--cpu {}: the kernel refused the affinity ({e}); a cgroup cpuset may not allow \
             those CPUs (see /proc/self/status, Cpus_allowed_list)",
            numa::format_cpulist(&cpus)
        ),
        Err(e) => {
            let mut p = d.placement;
            p.cpus = numa::format_cpulist(&current);
            p.node = numa::node_holding(Path::new("/"), &current);
            p.source = "unbound".into();
            p.note = Some(format!(
                "binding to the NIC's node {} was refused ({e}); the thread stays on every CPU",
                node.map(|n| n.to_string()).unwrap_or_default()
            ));
            Ok(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn host() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (rel, text) in [
            ("sys/devices/system/cpu/online", "0-7"),
            ("sys/devices/system/node/node0/cpulist", "0-3"),
            ("sys/devices/system/node/node1/cpulist", "4-7"),
        ] {
            let p = d.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        d
    }

    const ALL: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7];
    const NIC1: Nic = Nic {
        name: Some("mlx5_1"),
        node: Some(1),
    };

    #[test]
    fn an_unrestricted_rank_is_bound_to_its_nics_node() {
        let h = host();
        let d = decide(h.path(), NIC1, ALL, None).unwrap();
        assert_eq!(d.bind, Some(vec![4, 5, 6, 7]));
        assert_eq!(d.placement.cpus, "4-7");
        assert_eq!(d.placement.node, Some(1));
        assert_eq!(d.placement.nic_node, Some(1));
        assert_eq!(d.placement.source, "nic-node");
    }

    #[test]
    fn a_launchers_binding_is_left_as_it_is() {
        let h = host();
        let d = decide(h.path(), NIC1, &[2], None).unwrap();
        assert_eq!(d.bind, None);
        assert_eq!(
            (
                d.placement.cpus.as_str(),
                d.placement.node,
                d.placement.source.as_str()
            ),
            ("2", Some(0), "launcher")
        );
    }

    #[test]
    fn cpu_option_wins_and_says_when_it_is_the_far_socket() {
        let h = host();
        let d = decide(h.path(), NIC1, &[2], Some(&[0, 1])).unwrap();
        assert_eq!(d.bind, Some(vec![0, 1]));
        assert_eq!(d.placement.source, "cpu-option");
        assert!(d
            .placement
            .note
            .unwrap()
            .contains("NIC mlx5_1 is on node 1"));
        let near = decide(h.path(), NIC1, ALL, Some(&[5])).unwrap();
        assert_eq!(near.placement.note, None);
        let e = decide(h.path(), NIC1, ALL, Some(&[3, 9])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--cpu 3,9: CPU 9 is not online on this host (online: 0-7); choose from those"
        );
        assert!(decide(h.path(), NIC1, ALL, Some(&[])).is_err());
    }

    #[test]
    fn an_unknown_nic_node_leaves_the_thread_unbound_and_says_why() {
        let h = host();
        let rxe = Nic {
            name: Some("rxe0"),
            node: None,
        };
        let d = decide(h.path(), rxe, ALL, None).unwrap();
        assert_eq!(d.bind, None);
        assert_eq!(d.placement.source, "unbound");
        assert_eq!(d.placement.cpus, "0-7");
        assert!(d
            .placement
            .note
            .unwrap()
            .contains("NUMA node of rxe0 is unknown"));
        let none = Nic {
            name: None,
            node: None,
        };
        let d = decide(h.path(), none, ALL, None).unwrap();
        assert!(d.placement.note.unwrap().contains("no NIC is known"));
    }
}
