//! `fabric-doctor`: audits this node's lossless configuration (day zero, before anything
//! is measured) and prints it as a table; `--json FILE` writes it as a document,
//! `--capture DIR` saves every file and command output read (a support bundle) and
//! `--from DIR` audits such a bundle instead of the machine. Under mpirun or srun the
//! first rank of every node audits it and rank 0 writes them all into one document
//! (`--json`) and prints a line per node. See docs/lossless.md.

use std::path::PathBuf;
use std::process::ExitCode;

use base::launcher::{resolve_launcher, Launcher};
use clap::Parser;
use probe::audit::{self, Live, Options, Replay};
use results::audit::{NodeAudit, SuiteTraffic};

#[derive(Parser, Debug)]
#[command(name = "fabric-doctor", version, about)]
struct Cli {
    /// Write the audit as a fabcheck document (hosts[0].audit) to FILE (atomic write).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Save every file and command output read into DIR (new or empty).
    #[arg(long, value_name = "DIR", conflicts_with = "from")]
    capture: Option<PathBuf>,
    /// Audit a capture directory instead of this machine.
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// Traffic class the suite sends with (DSCP = tclass >> 2), as perftest's --tclass.
    #[arg(long, default_value_t = 0)]
    tclass: u8,
    /// Service level (InfiniBand), as perftest's --sl.
    #[arg(long, default_value_t = 0)]
    sl: u8,
    /// GID index (-x); default: the IPv4-mapped RoCE v2 GID, as the benchmarks pick it.
    #[arg(short = 'x', long)]
    gid_index: Option<u32>,
    /// Priorities that must carry PFC (comma list, e.g. 3); judged when given.
    #[arg(long, value_delimiter = ',')]
    lossless_priorities: Vec<u8>,
    /// Only these interfaces or RDMA devices.
    #[arg(short = 'd', long = "dev", value_delimiter = ',')]
    only: Vec<String>,
    /// Keep every driver counter, not only those that tell of loss.
    #[arg(long)]
    all_counters: bool,
    /// How the processes were started: auto (MPI when an MPI launcher's environment is
    /// present), standalone (this node only), mpi.
    #[arg(long, default_value = "auto", value_parser = parse_launcher)]
    launcher: Launcher,
    /// Seconds any rank may wait for the others under MPI (the audits of every node).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

fn parse_launcher(s: &str) -> Result<Launcher, String> {
    s.parse::<Launcher>().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.lossless_priorities.iter().any(|&p| p > 7) {
        eprintln!("fabric-doctor: --lossless-priorities takes priorities 0..7");
        return ExitCode::from(2);
    }
    let opts = Options {
        suite: SuiteTraffic {
            traffic_class: cli.tclass,
            service_level: cli.sl,
            gid_index: cli.gid_index,
        },
        only: cli.only.clone(),
        lossless: cli.lossless_priorities.clone(),
        all_counters: cli.all_counters,
    };
    if resolve_launcher(cli.launcher) == Launcher::Mpi {
        if cli.from.is_some() || cli.capture.is_some() {
            eprintln!(
                "fabric-doctor: --from and --capture audit one node; run them without mpirun \
                 or srun (or with --launcher standalone)"
            );
            return ExitCode::from(2);
        }
        return mpi::run(&cli, &opts);
    }
    let a = if let Some(dir) = &cli.from {
        match Replay::open(dir) {
            Ok(r) => audit::audit(&r, &opts),
            Err(e) => {
                eprintln!("fabric-doctor: {e}");
                return ExitCode::from(2);
            }
        }
    } else if let Some(dir) = &cli.capture {
        let live = match Live::capturing(dir) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fabric-doctor: {e}");
                return ExitCode::from(2);
            }
        };
        let a = audit::audit(&live, &opts);
        if let Err(e) = live.finish() {
            eprintln!("fabric-doctor: {e}");
            return ExitCode::from(2);
        }
        eprintln!("fabric-doctor: capture written to {}", dir.display());
        a
    } else {
        audit::audit(&Live::new(), &opts)
    };
    print!("{}", table(&a));
    write_json(cli.json.as_deref(), "standalone", 1, vec![a])
}

/// Writes the audits as one fabcheck document (one `hosts` entry each) when `--json`.
fn write_json(
    path: Option<&std::path::Path>,
    launcher: &str,
    ranks: u32,
    audits: Vec<NodeAudit>,
) -> ExitCode {
    let Some(path) = path else {
        return ExitCode::SUCCESS;
    };
    let mut doc = results::Document::new(
        "fabric-doctor",
        launcher,
        ranks,
        results::provenance::now_rfc3339(),
    );
    for a in audits {
        doc.hosts.push(results::HostInfo {
            hostname: a.hostname.clone(),
            audit: Some(a),
            ..Default::default()
        });
    }
    doc.finish(None);
    if let Err(e) = results::write::write_document_atomic(path, &doc) {
        eprintln!("fabric-doctor: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

#[cfg(feature = "mpi")]
mod mpi {
    //! Under mpirun or srun: the first rank of every node (MPI's node-local rank 0)
    //! audits it, rank 0 gathers the audits and writes them into one document; the other
    //! ranks of a node audit nothing (the facts are the node's, not the rank's).

    use std::process::ExitCode;
    use std::time::Duration;

    use bootstrap::mpi::MpiJob;
    use results::audit::NodeAudit;

    use super::{audit, table, write_json, Cli, Live, Options};

    pub fn run(cli: &Cli, opts: &Options) -> ExitCode {
        let limit = Duration::from_secs(cli.timeout);
        let job = match MpiJob::init(limit) {
            Ok(j) => j,
            Err(e) => {
                eprintln!("fabric-doctor: {e:#}");
                return ExitCode::from(2);
            }
        };
        // Every rank sends a JSON value (`null` from the ranks that audit nothing): MPI
        // refuses an empty buffer in a gather.
        let mine = (job.node().rank == 0).then(|| audit::audit(&Live::new(), opts));
        let mine = serde_json::to_vec(&mine).expect("an audit serializes");
        let Some(all) = job.gather_bytes(&mine, "every node's audit", limit) else {
            return ExitCode::SUCCESS;
        };
        let mut audits: Vec<NodeAudit> = Vec::new();
        for (rank, bytes) in all.iter().enumerate() {
            match serde_json::from_slice::<Option<NodeAudit>>(bytes) {
                Ok(a) => audits.extend(a),
                Err(e) => {
                    eprintln!("fabric-doctor: rank {rank} sent an audit that does not read: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        if let [one] = &audits[..] {
            print!("{}", table(one));
        } else {
            println!(
                "fabric-doctor: {} node(s) audited by {} rank(s)",
                audits.len(),
                job.size()
            );
            for a in &audits {
                print!("{}", node_line(a));
            }
        }
        write_json(cli.json.as_deref(), "mpi", job.size(), audits)
    }

    /// One line a node, for a job of several: its ports and findings, the first one named.
    fn node_line(a: &NodeAudit) -> String {
        let first = a
            .findings
            .first()
            .map(|f| format!(": {} {} {}", f.severity.to_uppercase(), f.code, f.message))
            .unwrap_or_default();
        format!(
            "{:<24} {} port(s), {} finding(s){first}\n",
            a.hostname,
            a.ports.len(),
            a.findings.len()
        )
    }
}

#[cfg(not(feature = "mpi"))]
mod mpi {
    use std::process::ExitCode;

    pub fn run(_: &super::Cli, _: &super::Options) -> ExitCode {
        eprintln!(
            "fabric-doctor: started by an MPI launcher, but built without the `mpi` feature; \
             rebuild with it, or pass --launcher standalone to audit this node alone"
        );
        ExitCode::from(2)
    }
}

/// The audit as a table a person reads on day zero: one block per port, then the host,
/// then the findings.
fn table(a: &NodeAudit) -> String {
    let mut s = String::new();
    let line = |s: &mut String, k: &str, v: String| s.push_str(&format!("  {k:<16} {v}\n"));
    s.push_str(&format!(
        "fabric-doctor: {}  ({}, ethtool {})\n",
        a.hostname,
        a.iproute2.show(|v| v.clone()),
        a.ethtool.show(|v| v.clone())
    ));
    s.push_str(&format!(
        "suite traffic: tclass {} (DSCP {}), SL {}\n",
        a.suite.traffic_class,
        a.suite.dscp(),
        a.suite.service_level
    ));
    if a.ports.is_empty() {
        s.push_str("no RDMA port and no device-backed network interface found\n");
    }
    let prios = |v: &[bool]| {
        let on: Vec<String> = (0..v.len())
            .filter(|&i| v[i])
            .map(|i| i.to_string())
            .collect();
        if on.is_empty() {
            "off on every priority".into()
        } else {
            format!("on {}", on.join(","))
        }
    };
    for p in &a.ports {
        s.push_str(&format!(
            "\nport {}  {}  mtu {}  speed {}  fw {}\n",
            p.name(),
            p.link_layer,
            p.mtu.map_or("?".into(), |m| m.to_string()),
            p.speed_mbit_s
                .map_or("?".into(), |v| format!("{} Gb/s", v / 1000)),
            p.firmware.as_deref().unwrap_or("?")
        ));
        line(
            &mut s,
            "carrier changes",
            p.carrier_changes.show(|v| v.to_string()),
        );
        line(&mut s, "PFC", p.pfc.show(|v| prios(&v.enabled)));
        line(
            &mut s,
            "ETS prio->tc",
            p.ets
                .show(|v| format!("{:?} tsa {:?} bw {:?}", v.prio_tc, v.tc_tsa, v.tc_bw)),
        );
        line(&mut s, "trust", p.trust.show(|v| v.clone()));
        line(
            &mut s,
            "DSCP->prio",
            p.dscp_prio.show(|m| {
                let nonzero: Vec<String> = m
                    .iter()
                    .filter(|(_, &pr)| pr != 0)
                    .map(|(d, pr)| format!("{d}:{pr}"))
                    .collect();
                format!(
                    "{} entries; non-zero {}",
                    m.len(),
                    if nonzero.is_empty() {
                        "none".into()
                    } else {
                        nonzero.join(" ")
                    }
                )
            }),
        );
        line(&mut s, "DCBX", p.dcbx.show(|v| v.join(",")));
        line(
            &mut s,
            "buffers",
            p.buffer.show(|v| {
                format!(
                    "prio->buffer {:?} sizes {:?}",
                    v.prio_buffer, v.buffer_size_bytes
                )
            }),
        );
        line(
            &mut s,
            "ECN np / rp",
            p.ecn
                .show(|e| format!("np {} / rp {}", prios(&e.np_enabled), prios(&e.rp_enabled))),
        );
        line(
            &mut s,
            "DCQCN",
            p.dcqcn.show(|m| format!("{} parameters", m.len())),
        );
        line(
            &mut s,
            "CNP",
            p.cnp.show(|c| {
                format!(
                    "DSCP {} priority {}",
                    c.dscp.map_or("?".into(), |d| d.to_string()),
                    c.priority.map_or("?".into(), |d| d.to_string())
                )
            }),
        );
        line(
            &mut s,
            "suite traffic",
            p.traffic.show(|t| {
                format!(
                    "GID {} {} -> priority {} PFC {} ECN {}",
                    t.gid_index.map_or("?".into(), |g| g.to_string()),
                    t.gid_type.as_deref().unwrap_or("?"),
                    t.priority.map_or("?".into(), |v| v.to_string()),
                    t.pfc_on.map_or("?", |b| if b { "on" } else { "off" }),
                    t.ecn_on.map_or("?", |b| if b { "on" } else { "off" })
                )
            }),
        );
        line(
            &mut s,
            "FEC",
            p.fec.show(|f| {
                format!(
                    "active {} (configured {})",
                    f.active.join(","),
                    f.configured.join(",")
                )
            }),
        );
        line(
            &mut s,
            "driver counters",
            p.driver_counters.show(|c| format!("{} read", c.len())),
        );
        line(
            &mut s,
            "module",
            p.module.show(|m| {
                format!(
                    "{} rx {:?} dBm (low warning {})",
                    m.part_number.as_deref().unwrap_or("?"),
                    m.rx_power_dbm,
                    m.rx_power_thresholds
                        .as_ref()
                        .and_then(|t| t.low_warning)
                        .map_or("?".into(), |v| format!("{v} dBm"))
                )
            }),
        );
    }
    s.push_str("\nhost\n");
    line(
        &mut s,
        "memlock",
        a.host
            .memlock_bytes
            .show(|v| v.map_or("unlimited".into(), |b| format!("{b} bytes"))),
    );
    line(&mut s, "IOMMU", a.host.iommu.show(|v| v.clone()));
    line(
        &mut s,
        "NCCL settings",
        if a.host.nccl.is_empty() {
            "none".into()
        } else {
            a.host
                .nccl
                .iter()
                .map(|(k, v)| format!("{k}={}", v.value))
                .collect::<Vec<_>>()
                .join(" ")
        },
    );
    s.push_str(&format!("\nfindings: {}\n", a.findings.len()));
    for f in &a.findings {
        s.push_str(&format!(
            "  {:<4} {:<18} {}\n       fix: {}\n",
            f.severity.to_uppercase(),
            f.code,
            f.message,
            f.fix
        ));
    }
    s
}
