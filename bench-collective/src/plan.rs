//! Options resolved into a plan before any process talks to another: which collectives,
//! which sizes, how to time and combine, where to write. The command line (`main.rs`)
//! stops here: the harness sees the plan, never the options.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};
use transport::collective::{DataType, RedOp};

use crate::colls::{self, Collective};
use crate::timing::Average;
use crate::{BackendArg, Cli};

/// Backend: which library moves the data, and where the buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// MPI collectives on host memory.
    Mpi,
    /// NCCL collectives on GPU memory (one GPU per rank).
    Nccl,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Mpi => "mpi",
            BackendKind::Nccl => "nccl",
        }
    }
}

/// How sizes grow between steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stepping {
    Factor(u64),
    Bytes(u64),
}

/// A collective to run, and whether the user named it (an explicit request that cannot
/// run is an error; one that came with `all` is skipped with a note, as nccl-tests does).
#[derive(Clone, Copy)]
pub struct Selected {
    pub coll: &'static Collective,
    pub named: bool,
}

/// Everything the options say, validated.
pub struct Plan {
    pub collectives: Vec<Selected>,
    pub sizes: Vec<u64>,
    pub minbytes: u64,
    pub maxbytes: u64,
    pub stepping: Stepping,
    pub iters: u64,
    pub warmup: u64,
    pub check: bool,
    pub op: RedOp,
    pub datatype: DataType,
    pub root: u32,
    pub backend: BackendKind,
    pub average: Average,
    /// Measure on sub-communicators of 2, 4, 8, ... ranks of whole nodes, then all.
    pub scaling: bool,
    pub json: Option<PathBuf>,
    pub timeout: Duration,
    pub link_gbit_s: Option<f64>,
    /// Expert-parallel dispatch and combine (then `collectives` is empty: they run in a
    /// launch of their own, their sizes being tokens).
    pub ep: Option<crate::ep::EpPlan>,
}

/// Other names users know the collectives by.
fn canonical(name: &str) -> &str {
    match name {
        "allreduce" => "all_reduce",
        "allgather" => "all_gather",
        "reducescatter" => "reduce_scatter",
        "all_to_all" | "alltoall" => "alltoall",
        "bcast" => "broadcast",
        "send_recv" => "sendrecv",
        "hyper_cube" => "hypercube",
        other => other,
    }
}

/// Validates the command line and expands sizes and collectives.
pub fn resolve(r: Cli) -> Result<Plan> {
    let (collectives, ep_colls) = select(&r.collectives)?;
    let ep_defaults = r.ep_mode == crate::EpModeArg::Ht;
    let default_size = if ep_colls.is_empty() {
        32 << 20
    } else if ep_defaults {
        4096
    } else {
        128
    };
    let minbytes = r
        .minbytes
        .unwrap_or(r.maxbytes.unwrap_or(default_size).min(default_size));
    let maxbytes = r.maxbytes.unwrap_or(minbytes.max(default_size));
    let stepping = match (r.stepbytes, r.stepfactor) {
        (Some(b), _) => Stepping::Bytes(b),
        (None, f) => Stepping::Factor(f.unwrap_or(2)),
    };
    let sizes = sizes(minbytes, maxbytes, stepping)?;
    if r.backend == BackendArg::Mpi {
        for c in &collectives {
            transport::collective::mpi_supports(r.datatype, c.coll.reduces.then_some(r.op))?;
        }
    }
    let ep = if ep_colls.is_empty() {
        None
    } else {
        Some(ep_plan(&r, ep_colls, &sizes, ep_defaults)?)
    };
    Ok(Plan {
        collectives,
        sizes,
        minbytes,
        maxbytes,
        ep,
        stepping,
        iters: r.iters,
        warmup: r.warmup,
        check: r.check == 1,
        op: r.op,
        datatype: r.datatype,
        root: r.root,
        backend: match r.backend {
            BackendArg::Mpi => BackendKind::Mpi,
            BackendArg::Nccl => BackendKind::Nccl,
        },
        average: r.average,
        scaling: r.scaling,
        json: r.json,
        timeout: Duration::from_secs_f64(r.timeout),
        link_gbit_s: r.link_gbit_s,
    })
}

/// The collectives named (any spelling users know; `all`), and the EP ones apart: they
/// count tokens, the others bytes, so they run in a launch of their own.
fn select(names: &[String]) -> Result<(Vec<Selected>, Vec<&'static crate::ep::EpCollective>)> {
    let mut collectives: Vec<Selected> = Vec::new();
    let mut ep_colls = Vec::new();
    for name in names {
        let name = name.replace('-', "_").to_ascii_lowercase();
        if let Some(c) = colls::ep_by_name(&name) {
            ep_colls.push(c);
            continue;
        }
        if name == "all" {
            collectives.extend(colls::ALL.map(|coll| Selected { coll, named: false }));
            continue;
        }
        match colls::by_name(canonical(&name)) {
            Some(coll) => collectives.push(Selected { coll, named: true }),
            None => bail!(
                "unknown collective '{name}': choose from {}, or all; or {} (in a launch of \
                 their own)",
                colls::ALL.map(|c| c.name).join(", "),
                colls::EP_ALL.map(|c| c.name).join(", ")
            ),
        }
    }
    if !ep_colls.is_empty() && !collectives.is_empty() {
        bail!(
            "ep_dispatch and ep_combine count tokens, the other collectives bytes: run them in a \
             launch of their own"
        );
    }
    Ok((collectives, ep_colls))
}

/// The sizes from `minbytes` to `maxbytes` (nccl-tests' -b, -e, -f or -i), at most 10000.
fn sizes(minbytes: u64, maxbytes: u64, stepping: Stepping) -> Result<Vec<u64>> {
    if minbytes > maxbytes {
        bail!(
            "-b/--minbytes {} is larger than -e/--maxbytes {}: the sweep would be empty",
            minbytes,
            maxbytes
        );
    }
    let mut sizes = Vec::new();
    let mut s = minbytes;
    while s <= maxbytes {
        sizes.push(s);
        s = match stepping {
            Stepping::Bytes(step) => s.saturating_add(step),
            Stepping::Factor(f) => s.saturating_mul(f),
        };
        if sizes.len() > 10_000 {
            bail!("more than 10000 sizes: use a larger -f/--stepfactor or -i/--stepbytes");
        }
        if s == u64::MAX {
            break;
        }
    }
    Ok(sizes)
}

/// The expert-parallel plan: the sizes as tokens, the routing, the model's shape and
/// the variant, checked against the backend.
fn ep_plan(
    r: &Cli,
    collectives: Vec<&'static crate::ep::EpCollective>,
    sizes: &[u64],
    ep_defaults: bool,
) -> Result<crate::ep::EpPlan> {
    crate::ep::check_hidden(r.hidden)?;
    if r.backend == BackendArg::Nccl && r.ep_variant == crate::EpVariantArg::TwoStage {
        bail!(
            "--ep-variant two-stage runs over MPI only (its middle regrouping is host \
             code): use --ep-variant flat with --backend nccl, or --backend mpi"
        );
    }
    if r.backend == BackendArg::Mpi && r.datatype != DataType::Float32 {
        bail!(
            "-d/--datatype does not apply to ep_dispatch/ep_combine (FP8 dispatch, BF16 combine)"
        );
    }
    Ok(crate::ep::EpPlan {
        collectives,
        tokens: sizes
            .iter()
            .map(|&s| match r.ep_unit {
                crate::EpUnitArg::Tokens => s,
                crate::EpUnitArg::Bytes => crate::ep::tokens_of_bytes(s, r.hidden),
            })
            .collect(),
        routing: r.routing.unwrap_or(if ep_defaults {
            crate::ep::Routing::Nodes(4)
        } else {
            crate::ep::Routing::Uniform
        }),
        seed: r.seed,
        topk: r.topk,
        experts: r.experts,
        hidden: r.hidden,
        ranks_per_node: r.ranks_per_node,
        variant: match r.ep_variant {
            crate::EpVariantArg::Flat => crate::ep::Variant::Flat,
            crate::EpVariantArg::TwoStage => crate::ep::Variant::TwoStage,
        },
    })
}

impl Plan {
    /// Every option that shapes the numbers, for the document.
    pub fn options(&self, link: Option<f64>, link_source: Option<String>) -> Map<String, Value> {
        let (factor, bytes) = match self.stepping {
            Stepping::Factor(f) => (Some(f), None),
            Stepping::Bytes(b) => (None, Some(b)),
        };
        let v = json!({
            "collectives": self.collectives.iter().map(|c| c.coll.name).collect::<Vec<_>>(),
            "backend": self.backend.name(),
            "minbytes": self.minbytes,
            "maxbytes": self.maxbytes,
            "stepfactor": factor,
            "stepbytes": bytes,
            "sizes": self.sizes,
            "iters": self.iters,
            "warmup_iters": self.warmup,
            "check": u32::from(self.check),
            "op": self.op.name(),
            "datatype": self.datatype.name(),
            "root": self.root,
            "average": self.average.name(),
            "scaling": self.scaling,
            "timeout_s": self.timeout.as_secs_f64(),
            "link_gbit_s": link,
            "link_source": link_source,
            "ep": self.ep.as_ref().map(|e| json!({
                "collectives": e.collectives.iter().map(|c| c.name).collect::<Vec<_>>(),
                "tokens": e.tokens,
                "routing": e.routing.name(),
                "seed": e.seed,
                "topk": e.topk,
                "experts": e.experts,
                "hidden": e.hidden,
                "ranks_per_node": e.ranks_per_node,
                "variant": e.variant.name(),
            })),
        });
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }
}
