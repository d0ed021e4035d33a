//! PCIe Access Control Services (ACS) on a switch port, read from its config space.
//!
//! ACS lets a switch port force peer-to-peer requests and completions up to the root
//! complex ("P2P Request Redirect", "P2P Completion Redirect") so an IOMMU can police them:
//! wanted for device assignment to VMs, fatal for GPUDirect, whose GPU-NIC traffic then
//! leaves the switch and crawls through the CPU (NCCL and NVIDIA's GPUDirect docs both say
//! to turn it off on bare metal). `lspci -vvv` shows it as `ACSCtl: ... ReqRedir+ CmpltRedir+`.
//!
//! The capability is a PCIe extended capability (id 0x000D) in the config space above
//! 0x100, which the kernel only lets privileged readers see: an unprivileged read of
//! `config` returns the first 64 bytes, and then the state is [`AcsState::Unknown`].

/// The ACS control register (offset 6 of the capability).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcsControl(pub u16);

impl AcsControl {
    const NAMES: [&'static str; 7] = [
        "SrcValid",
        "TransBlk",
        "ReqRedir",
        "CmpltRedir",
        "UpstreamFwd",
        "EgressCtrl",
        "DirectTrans",
    ];

    /// Peer-to-peer requests or completions are redirected upstream.
    pub fn redirects(self) -> bool {
        self.0 & (0b1100) != 0
    }

    /// `SrcValid+ TransBlk- ReqRedir+ ...`, as lspci prints it.
    pub fn lspci(self) -> String {
        Self::NAMES
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{n}{}", if self.0 & (1 << i) != 0 { '+' } else { '-' }))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a bridge's config space says about ACS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcsState {
    /// The capability is present with this control register.
    Enabled(AcsControl),
    /// No ACS capability: the port cannot redirect.
    Absent,
    /// Not readable (why).
    Unknown(String),
}

const EXT_CAP_START: usize = 0x100;
const ACS_CAP_ID: u32 = 0x000d;

/// Walks the extended capability list of a config space image.
pub fn parse(config: &[u8]) -> AcsState {
    if config.len() < EXT_CAP_START + 4 {
        return AcsState::Unknown(format!(
            "only {} bytes of config space are readable (the extended capabilities above 0x100 \
             need root: run as root, or check with `sudo lspci -vvv | grep ACSCtl`)",
            config.len()
        ));
    }
    let mut off = EXT_CAP_START;
    // A valid list cannot hold more entries than 4-byte slots; bound the walk so a corrupt
    // (cyclic) list cannot loop.
    for _ in 0..(4096 / 4) {
        let Some(hdr) = config.get(off..off + 4) else {
            break;
        };
        let hdr = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        if hdr == 0 || hdr == u32::MAX {
            break;
        }
        if hdr & 0xffff == ACS_CAP_ID {
            return match config.get(off + 6..off + 8) {
                Some(c) => AcsState::Enabled(AcsControl(u16::from_le_bytes([c[0], c[1]]))),
                None => AcsState::Unknown("ACS capability cut short".into()),
            };
        }
        let next = ((hdr >> 20) & 0xffc) as usize;
        if next < EXT_CAP_START || next == off {
            break;
        }
        off = next;
    }
    AcsState::Absent
}

/// The warning and the fix for a bridge that redirects GPU-NIC peer-to-peer traffic.
pub fn advice(bridge: &str, c: AcsControl, gpu: &str, nic: &str) -> String {
    format!(
        "ACS is enabled on PCIe bridge {bridge} between GPU {gpu} and {nic} ({}): peer-to-peer \
         traffic is redirected through the CPU's root complex, usually at a fraction of the \
         bandwidth. Disable it in the BIOS (ACS / PCIe ACS control), or until the next boot \
         with `setpci -s {bridge} ECAP_ACS+0x6.w=0000` (as root; only on bare metal, not where \
         the IOMMU isolates devices for VMs)",
        c.lspci()
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::bridge_config;
    use super::*;

    #[test]
    fn control_register_is_found_behind_other_capabilities() {
        assert_eq!(
            parse(&bridge_config(Some(0x001d))),
            AcsState::Enabled(AcsControl(0x001d))
        );
        assert_eq!(
            parse(&bridge_config(Some(0))),
            AcsState::Enabled(AcsControl(0))
        );
        assert_eq!(parse(&bridge_config(None)), AcsState::Absent);
        assert_eq!(parse(&vec![0u8; 4096]), AcsState::Absent);
    }

    #[test]
    fn lspci_spelling_and_redirect_bits() {
        let c = AcsControl(0x001d);
        assert_eq!(
            c.lspci(),
            "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
        );
        assert!(c.redirects());
        assert!(
            !AcsControl(0x0011).redirects(),
            "SrcValid and UpstreamFwd do not redirect"
        );
        assert!(AcsControl(0x0008).redirects());
        let a = advice("0000:17:00.0", c, "0000:18:00.0", "mlx5_0");
        assert!(
            a.contains("setpci -s 0000:17:00.0 ECAP_ACS+0x6.w=0000"),
            "{a}"
        );
    }

    #[test]
    fn short_and_corrupt_config_spaces_do_not_panic_or_loop() {
        assert!(matches!(parse(&[0u8; 64]), AcsState::Unknown(_)));
        assert!(matches!(parse(&[]), AcsState::Unknown(_)));
        // A capability whose next pointer points at itself.
        let mut c = vec![0u8; 4096];
        let hdr: u32 = 0x0001 | (1 << 16) | (0x100 << 20);
        c[0x100..0x104].copy_from_slice(&hdr.to_le_bytes());
        assert_eq!(parse(&c), AcsState::Absent);
        // ACS header in the last bytes, its control register beyond the end.
        let mut c = vec![0u8; 0x106];
        c[0x100..0x104].copy_from_slice(&0x0001_000du32.to_le_bytes());
        assert!(matches!(parse(&c), AcsState::Unknown(_)));
    }
}
