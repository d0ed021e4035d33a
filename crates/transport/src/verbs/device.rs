//! RDMA devices: listing them, opening one by name, its port and the GID to send from.
//!
//! A device context is the process's handle on the adapter (or on Soft-RoCE's `rxe`);
//! everything else (protection domain, queues, memory registrations) hangs off it.

use std::ffi::CStr;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use rdma_sys::*;

use super::gid::{self, GidEntry};
use super::{errno_text, last_errno};
use probe::counters::SYSFS_ROOT;

/// `ibv_port_attr.link_layer` values (an anonymous enum in verbs.h).
const LINK_LAYER_INFINIBAND: u8 = 1;
const LINK_LAYER_ETHERNET: u8 = 2;

/// The devices libibverbs sees (`ibv_get_device_list`), freed on drop.
pub struct DeviceList {
    list: *mut *mut ibv_device,
    n: usize,
}

impl DeviceList {
    /// Lists the devices, or says plainly why there are none.
    pub fn get() -> Result<Self> {
        let mut n: i32 = 0;
        // SAFETY: `n` is a valid out-pointer; the returned array (or NULL) is owned by us
        // and released with ibv_free_device_list in Drop.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            let errno = last_errno();
            let why = if errno == libc::ENOSYS {
                "this kernel has no RDMA support (no /sys/class/infiniband, no uverbs)".to_string()
            } else {
                format!("ibv_get_device_list failed: {}", errno_text(errno))
            };
            bail!(
                "no RDMA device: {why}. Use --transport tcp for the TCP baseline, or load the \
                 driver of the adapter (for Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 \
                 type rxe netdev eth0)"
            );
        }
        let me = Self {
            list,
            n: n.max(0) as usize,
        };
        if me.n == 0 {
            let sysfs = std::fs::read_dir(SYSFS_ROOT)
                .map(|d| d.count())
                .unwrap_or(0);
            let why = if sysfs > 0 {
                format!(
                    "{sysfs} device(s) under {SYSFS_ROOT} but libibverbs found none: install \
                     the provider library (Debian: ibverbs-providers) and check /dev/infiniband/uverbs*"
                )
            } else {
                format!("ibv_get_device_list found none and {SYSFS_ROOT} is empty or missing")
            };
            bail!("no RDMA device: {why}. Use --transport tcp for the TCP baseline");
        }
        Ok(me)
    }

    fn device(&self, i: usize) -> *mut ibv_device {
        // SAFETY: i < n, and the array holds n valid device pointers while self lives.
        unsafe { *self.list.add(i) }
    }

    /// Device names, in the library's order.
    pub fn names(&self) -> Vec<String> {
        (0..self.n)
            .map(|i| {
                // SAFETY: a listed device has a NUL-terminated name valid while the list lives.
                unsafe { CStr::from_ptr(ibv_get_device_name(self.device(i))) }
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    /// Opens `name`, or the first device whose `port` is ACTIVE.
    pub fn open(&self, name: Option<&str>, port: u8) -> Result<Context> {
        let names = self.names();
        let i = match name {
            Some(want) => names.iter().position(|n| n == want).ok_or_else(|| {
                anyhow!(
                    "no RDMA device named {want}; found: {} (pick one with -d)",
                    names.join(", ")
                )
            })?,
            None => names
                .iter()
                .position(|n| port_state_sysfs(n, port).as_deref() == Some("ACTIVE"))
                .ok_or_else(|| {
                    anyhow!(
                        "no RDMA device has port {port} ACTIVE: {} (check the links with \
                         `ibv_devinfo`; pick a device with -d and a port with -i)",
                        names
                            .iter()
                            .map(|n| format!(
                                "{n} port {port} is {}",
                                port_state_sysfs(n, port).unwrap_or_else(|| "missing".into())
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?,
        };
        // SAFETY: the device pointer comes from the live list; the context stays valid
        // after the list is freed (libibverbs documents this).
        let ctx = unsafe { ibv_open_device(self.device(i)) };
        if ctx.is_null() {
            bail!(
                "cannot open RDMA device {}: {} (is /dev/infiniband/uverbs* accessible to this user?)",
                names[i],
                errno_text(last_errno())
            );
        }
        Ok(Context {
            ctx,
            name: names[i].clone(),
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: list came from ibv_get_device_list and is freed exactly once.
        unsafe { ibv_free_device_list(self.list) }
    }
}

/// `ACTIVE`, `DOWN`, ... from sysfs (`4: ACTIVE`), for choosing without opening.
fn port_state_sysfs(dev: &str, port: u8) -> Option<String> {
    let p = PathBuf::from(SYSFS_ROOT)
        .join(dev)
        .join(format!("ports/{port}/state"));
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.split(':').nth(1).unwrap_or(&s).trim().to_string())
}

/// An open device.
pub struct Context {
    pub(crate) ctx: *mut ibv_context,
    pub name: String,
}

/// What the endpoint needs to know about its port.
#[derive(Debug, Clone)]
pub struct PortInfo {
    pub port: u8,
    pub lid: u16,
    /// Ethernet (RoCE) ports address by GID; InfiniBand ports by LID (GID optional).
    pub ethernet: bool,
    pub active_mtu: u32,
    pub gid_table_len: u32,
    /// Device limits used to size queues.
    pub max_qp_wr: u32,
    pub max_qp_rd_atom: u32,
}

impl Context {
    /// Port attributes, refusing a port that is not ACTIVE.
    pub fn port(&self, port: u8) -> Result<PortInfo> {
        // SAFETY: ctx is open; attr is a plain C struct that zeroed() makes valid.
        let mut dev: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open and dev is a valid out-pointer.
        let rc = unsafe { ibv_query_device(self.ctx, &mut dev) };
        if rc != 0 {
            bail!("cannot query RDMA device {}: {}", self.name, errno_text(rc));
        }
        if port == 0 || port > dev.phys_port_cnt {
            bail!(
                "RDMA device {} has no port {port}: its ports are 1..{} (pick one with -i)",
                self.name,
                dev.phys_port_cnt
            );
        }
        // SAFETY: as above.
        let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open, port exists, attr is a valid out-pointer.
        let rc = unsafe { ___ibv_query_port(self.ctx, port, &mut attr) };
        if rc != 0 {
            bail!(
                "cannot query port {port} of {}: {}",
                self.name,
                errno_text(rc)
            );
        }
        if attr.state != ibv_port_state::IBV_PORT_ACTIVE {
            bail!(
                "port {port} of {} is {} (not ACTIVE): no traffic can flow. Check the link \
                 (`ibv_devinfo -d {}`: cable, switch port, subnet manager on InfiniBand, \
                 netdev up on RoCE), or pick another device/port with -d/-i",
                self.name,
                port_state_name(attr.state),
                self.name
            );
        }
        Ok(PortInfo {
            port,
            lid: attr.lid,
            ethernet: attr.link_layer == LINK_LAYER_ETHERNET
                || (attr.link_layer != LINK_LAYER_INFINIBAND && attr.lid == 0),
            active_mtu: mtu_bytes(attr.active_mtu),
            gid_table_len: attr.gid_tbl_len.max(0) as u32,
            max_qp_wr: dev.max_qp_wr.max(1) as u32,
            max_qp_rd_atom: dev.max_qp_rd_atom.max(1) as u32,
        })
    }

    /// The GID to send from: `-x` checked against the table, or perftest's default.
    /// `None` on InfiniBand without `-x` (local routing by LID needs no GID).
    pub fn choose_gid(
        &self,
        port: &PortInfo,
        want: Option<u32>,
    ) -> Result<Option<(GidEntry, [u8; 16])>> {
        let dir = PathBuf::from(SYSFS_ROOT)
            .join(&self.name)
            .join(format!("ports/{}", port.port));
        let table = gid::read_table(&dir);
        let what = format!("{} port {}", self.name, port.port);
        let entry = match want {
            Some(i) => gid::validate(i, &table, port.gid_table_len, &what)?,
            None if !port.ethernet => return Ok(None),
            None => {
                let i = gid::default_index(&table).ok_or_else(|| {
                    anyhow!(
                        "{what} has no usable GID (RoCE needs an IP address on the port's \
                         netdev: `ip addr`; then pick the GID with -x)"
                    )
                })?;
                gid::validate(i, &table, port.gid_table_len, &what)?
            }
        };
        let raw = self.query_gid(port.port, entry.index)?;
        if raw == [0u8; 16] {
            bail!(
                "GID index {} of {what} is empty: pick a used one with -x: {}",
                entry.index,
                gid::list(&table)
            );
        }
        Ok(Some((entry, raw)))
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16]> {
        // SAFETY: ibv_gid is a 16-byte union of plain integers; zero is valid.
        let mut g: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open and g is a valid out-pointer.
        let rc = unsafe { ibv_query_gid(self.ctx, port, index as i32, &mut g) };
        if rc != 0 {
            bail!(
                "cannot read GID index {index} of {} port {port}: {} (pick another with -x)",
                self.name,
                errno_text(last_errno())
            );
        }
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { g.raw })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: ctx was opened by ibv_open_device; every object created from it (PD, CQ,
        // channel, and through them MRs and QPs) holds an Rc to this context, so all are gone.
        unsafe {
            ibv_close_device(self.ctx);
        }
    }
}

fn port_state_name(s: ibv_port_state::Type) -> &'static str {
    match s {
        ibv_port_state::IBV_PORT_DOWN => "DOWN",
        ibv_port_state::IBV_PORT_INIT => "INIT",
        ibv_port_state::IBV_PORT_ARMED => "ARMED",
        ibv_port_state::IBV_PORT_ACTIVE => "ACTIVE",
        ibv_port_state::IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

/// `ibv_mtu` enum to bytes.
pub fn mtu_bytes(m: ibv_mtu::Type) -> u32 {
    match m {
        ibv_mtu::IBV_MTU_256 => 256,
        ibv_mtu::IBV_MTU_512 => 512,
        ibv_mtu::IBV_MTU_1024 => 1024,
        ibv_mtu::IBV_MTU_2048 => 2048,
        _ => 4096,
    }
}

/// Bytes to the `ibv_mtu` enum; `None` unless a valid path MTU.
pub fn mtu_enum(bytes: u32) -> Option<ibv_mtu::Type> {
    Some(match bytes {
        256 => ibv_mtu::IBV_MTU_256,
        512 => ibv_mtu::IBV_MTU_512,
        1024 => ibv_mtu::IBV_MTU_1024,
        2048 => ibv_mtu::IBV_MTU_2048,
        4096 => ibv_mtu::IBV_MTU_4096,
        _ => return None,
    })
}

/// The path MTU to use: `-m` (must be a power of two 256..4096) clamped to the port's active
/// MTU, with a warning when clamped.
pub fn path_mtu(requested: Option<u32>, active: u32, what: &str) -> Result<u32> {
    match requested {
        None => Ok(active),
        Some(m) if mtu_enum(m).is_none() => bail!(
            "-m {m} is not a path MTU: use 256, 512, 1024, 2048 or 4096 (the port's active MTU is {active})"
        ),
        Some(m) if m > active => {
            eprintln!(
                "warning: -m {m} is above the active MTU of {what} ({active}): using {active} \
                 (raise the netdev MTU, e.g. 9000 for 4096, to go higher)"
            );
            Ok(active)
        }
        Some(m) => Ok(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_is_clamped_and_validated() {
        assert_eq!(path_mtu(None, 1024, "rxe0").unwrap(), 1024);
        assert_eq!(path_mtu(Some(4096), 1024, "rxe0").unwrap(), 1024);
        assert_eq!(path_mtu(Some(512), 1024, "rxe0").unwrap(), 512);
        let e = path_mtu(Some(1500), 1024, "rxe0").unwrap_err().to_string();
        assert!(e.contains("256, 512, 1024, 2048 or 4096"), "{e}");
        assert_eq!(mtu_bytes(mtu_enum(2048).unwrap()), 2048);
    }
}
