//! What the machine is: read-only probes of sysfs, procfs and the system's tools, no verbs
//! calls and no peers.
//!
//! - [`host`]: the facts every document records per rank (kernel, CPUs, NICs, GPUs from
//!   sysfs, the driver and peermem).
//! - [`inventory`]: RDMA devices and ports (state, rate, width, MTU, PCIe link, counters);
//!   [`counters`]: port counters (and the port netdev's driver counters, [`ethtool`])
//!   read and differenced around a measurement.
//! - [`discovery`]: what each port is plugged into (LLDP from lldpd, InfiniBand SMPs,
//!   `ibnetdiscover`), every fact with its source, "unknown" with why.
//! - [`topology`]: the PCIe tree (which GPU sits next to which NIC, ACS on the switches).
//! - [`numa`]: the online CPUs, each NUMA node's CPUs, the node a NIC hangs off (what a
//!   measuring thread is placed by).
//! - [`quality`]: what disturbed a run (load, steal, preemptions), read before and after.
//! - [`sysfs`]: how every probe reads sysfs.
//!
//! No `unsafe` here.

// Every public item says what it is, and the compiler keeps the rule.
#![warn(missing_docs)]

pub mod audit;
pub mod counters;
pub mod discovery;
pub mod ethtool;
pub mod host;
pub mod inventory;
pub mod numa;
pub mod quality;
pub mod sysfs;
pub mod topology;
