//! Choosing and connecting a transport: `auto` resolved, options checked before anything
//! is measured, and the pair's endpoints made ready per size ([`connect_latency`],
//! [`connect_bandwidth`]) over the control link, keeping what can be kept from size to size
//! in the pair's [`Connection`].

use std::time::Instant;

use anyhow::{bail, Result};

use base::link::PeerLink;
use results::Setup;

use crate::endpoint::{
    BandwidthEndpoint, EndpointSpec, LatencyEndpoint, Op, TransportChoice, TransportKind,
    VerbsOptions,
};
use crate::tcp;
#[cfg(feature = "verbs")]
use crate::verbs;

/// Is an RDMA device visible to this process? (`/sys/class/infiniband` non-empty.)
pub fn rdma_present() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

/// Resolves `auto`; returns the kind and a sentence saying why, for the log.
pub fn resolve(choice: TransportChoice) -> Result<(TransportKind, String)> {
    match choice {
        TransportChoice::Tcp => Ok((TransportKind::Tcp, "tcp (as requested)".into())),
        TransportChoice::Verbs => {
            verbs_available()?;
            Ok((TransportKind::Verbs, "verbs (as requested)".into()))
        }
        TransportChoice::Auto if rdma_present() && verbs_available().is_ok() => Ok((
            TransportKind::Verbs,
            "verbs (auto: an RDMA device is present)".into(),
        )),
        TransportChoice::Auto => Ok((
            TransportKind::Tcp,
            "tcp (auto: no RDMA device under /sys/class/infiniband)".into(),
        )),
    }
}

#[cfg(feature = "verbs")]
fn verbs_available() -> Result<()> {
    verbs::probe()
}

#[cfg(not(feature = "verbs"))]
fn verbs_available() -> Result<()> {
    bail!(
        "this binary was built without the verbs transport (cargo feature `verbs`): \
         use --transport tcp, or rebuild with the feature (needs libibverbs-dev)"
    )
}

/// Refuses verbs options that are not implemented, before anything is measured.
pub fn check_verbs_options(kind: TransportKind, opts: &VerbsOptions) -> Result<()> {
    if kind == TransportKind::Verbs && opts.rdma_cm {
        bail!(
            "-R/--rdma-cm is not implemented yet: leave it out; queue pairs are then connected \
             over the standalone TCP handshake or MPI, which works on the same fabrics"
        );
    }
    #[cfg(feature = "verbs")]
    if kind == TransportKind::Verbs {
        // Device, port, GID and MTU are checked now, so a typo fails at once on the
        // server too, not when the first client arrives.
        verbs::validate_local(opts)?;
    }
    Ok(())
}

/// Which ops a transport can measure.
pub fn check_supported(kind: TransportKind, op: Op) -> Result<()> {
    if op.is_copy() {
        bail!(
            "--test {} is a GPU copy baseline: it runs in one process on one host's GPUs \
             (bench-bw --test {} --use-cuda N), not over a transport between two peers",
            op.name(),
            op.name()
        );
    }
    if kind == TransportKind::Tcp && op != Op::Send {
        bail!(
            "{} needs RDMA: TCP has no one-sided {}s. Use --transport verbs on an RDMA device, \
             or --test send for the TCP baseline",
            op.name(),
            op.name()
        );
    }
    Ok(())
}

/// What a pair keeps from one size to the next, for as long as the pair runs (one round):
/// the verbs session (device, registered memory, connected queue pairs). Made empty when
/// the pair starts, dropped when it ends; an error in any size ends the pair, so a
/// connection in doubt is never reused.
#[derive(Default)]
pub struct Connection {
    #[cfg(feature = "verbs")]
    verbs: Option<verbs::session::Session>,
}

/// Times a connect and records whether it connected anew.
fn timed<E>(connect: impl FnOnce() -> Result<(E, bool)>) -> Result<(E, Setup)> {
    let start = Instant::now();
    let (ep, connected) = connect()?;
    let setup = Setup {
        connected,
        seconds: start.elapsed().as_secs_f64(),
    };
    Ok((ep, setup))
}

/// A latency endpoint of `kind`, connected and ready for `spec`'s size (verbs: the pair's
/// connection in `conn`, made at its first size and re-armed after), and how it was made
/// ready.
pub fn connect_latency<'a>(
    kind: TransportKind,
    spec: &EndpointSpec,
    link: &mut dyn PeerLink,
    conn: &'a mut Connection,
) -> Result<(Box<dyn LatencyEndpoint + 'a>, Setup)> {
    check_supported(kind, spec.op)?;
    match kind {
        TransportKind::Tcp => timed(|| {
            let ep: Box<dyn LatencyEndpoint> = Box::new(tcp::TcpLatency::connect(spec, link)?);
            Ok((ep, true))
        }),
        #[cfg(feature = "verbs")]
        TransportKind::Verbs => timed(|| {
            let (ep, connected) = verbs::VerbsLatency::connect(spec, link, &mut conn.verbs)?;
            let ep: Box<dyn LatencyEndpoint + 'a> = Box::new(ep);
            Ok((ep, connected))
        }),
        #[cfg(not(feature = "verbs"))]
        TransportKind::Verbs => {
            let _ = conn;
            verbs_available().map(|_| unreachable!())
        }
    }
}

/// A bandwidth endpoint of `kind`, connected and ready for `spec`'s size; see
/// [`connect_latency`].
pub fn connect_bandwidth<'a>(
    kind: TransportKind,
    spec: &EndpointSpec,
    link: &mut dyn PeerLink,
    conn: &'a mut Connection,
) -> Result<(Box<dyn BandwidthEndpoint + 'a>, Setup)> {
    check_supported(kind, spec.op)?;
    match kind {
        TransportKind::Tcp => timed(|| {
            let ep: Box<dyn BandwidthEndpoint> = Box::new(tcp::TcpBandwidth::connect(spec, link)?);
            Ok((ep, true))
        }),
        #[cfg(feature = "verbs")]
        TransportKind::Verbs => timed(|| {
            let (ep, connected) = verbs::VerbsBandwidth::connect(spec, link, &mut conn.verbs)?;
            let ep: Box<dyn BandwidthEndpoint + 'a> = Box::new(ep);
            Ok((ep, connected))
        }),
        #[cfg(not(feature = "verbs"))]
        TransportKind::Verbs => {
            let _ = conn;
            verbs_available().map(|_| unreachable!())
        }
    }
}
