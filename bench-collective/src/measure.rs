//! One size of one collective on one team: out of place, then in place. For each: the
//! layout (once), fill the input, warm up, line the ranks up, time the loop (nccl-tests'
//! pass, then the per-iteration pass), check one extra call, then combine the ranks'
//! figures.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::Result;
use mpi::collective::SystemOperation;
use mpi::traits::*;

use bootstrap::mpi::Team;
use results::{CollectiveResult, CollectiveTiming, LatencyHistogram};

use crate::backend::{layout, Backend, Buf, Step, Timed};
use crate::colls::{Collective, Ctx};
use crate::plan::Plan;
use crate::scaling::TeamSpec;
use crate::{data, timing};

/// Byte every output buffer is filled with before a checked call: NaN in every float
/// type, -1 or the maximum in integer types, none of which a correct result can be.
const POISON: u8 = 0xff;

/// Where a size runs.
pub struct Site<'a, 't> {
    pub team: &'a Team<'t>,
    pub spec: &'a TeamSpec,
    pub link_gbit_s: Option<f64>,
    /// Test hook: corrupt one checked element on this rank.
    pub corrupt: bool,
}

/// Measures `coll` at `size` bytes. The caller has prepared `backend` for at least
/// [`buffer_bytes`] of this size (`harness::on_team` prepares the team's largest once).
pub fn size(
    plan: &Plan,
    site: &Site,
    backend: &mut dyn Backend,
    coll: &Collective,
    size: u64,
) -> Result<CollectiveResult> {
    let team = site.team;
    let ranks = team.size() as usize;
    let rank = team.rank() as usize;
    let dt = plan.datatype;
    let ts = dt.size();
    let counts = coll.counts(size as usize / ts, ranks, ts);
    let size_bytes = (counts.send.max(counts.recv) * ts) as u64;
    let alg_bytes = coll.alg_bytes(counts.param, ts, ranks);
    let op = coll.reduces.then_some(plan.op);
    let root = plan.root as usize;
    let input = data::fill_input(dt, op, rank, counts.send);
    let ctx = Ctx {
        ranks,
        root,
        op,
        counts,
    };
    let factor = (coll.bus_factor)(ranks);
    let mut timings = Vec::with_capacity(2);
    for in_place in [false, true] {
        let step = Step {
            coll,
            layout: layout(
                coll.primitive,
                backend.rules(),
                in_place,
                rank,
                root,
                counts.param,
            ),
            in_place,
            count: counts.param,
            datatype: dt,
            op: plan.op,
            root,
        };
        let (input_buf, input_at) = step.layout.input;
        backend.write(input_buf, input_at * ts, &input)?;
        let timed = warm_and_time(team, backend, &step, plan, size)?;
        let wrong = if plan.check && step.layout.defined {
            Some(check(site, backend, &step, &ctx, &input, size_bytes)?)
        } else {
            None
        };
        let mut timing = combine(plan, site, &timed, wrong, alg_bytes, factor)?;
        if plan.check {
            timing.unchecked_reason = step.layout.undefined.map(String::from);
        }
        timings.push(timing);
    }
    let in_place = timings.pop().expect("two modes");
    let out_of_place = timings.pop().expect("two modes");
    Ok(CollectiveResult {
        collective: coll.name.into(),
        backend: plan.backend.name().into(),
        ranks: ranks as u32,
        nodes: Some(site.spec.nodes),
        size_bytes,
        count: counts.param as u64,
        datatype: dt.name().into(),
        op: if coll.reduces { plan.op.name() } else { "none" }.into(),
        root: coll.root_of(root),
        iterations: plan.iters,
        warmup_iterations: plan.warmup,
        busbw_factor: factor,
        link_gbit_s: site.link_gbit_s,
        out_of_place,
        in_place,
        complete: true,
        ep: None,
    })
}

/// The warm-up calls, then the timed loop once the ranks are lined up (as nccl-tests
/// does), each under the team's watchdog: a rank that stops taking part ends the job.
fn warm_and_time(
    team: &Team,
    backend: &mut dyn Backend,
    step: &Step,
    plan: &Plan,
    size: u64,
) -> Result<Timed> {
    let name = step.coll.name;
    {
        let _g = team.watchdog().arm(format!("in the warm-up of {name}"));
        backend.calls(step, plan.warmup)?;
    }
    team.barrier("before the timed loop");
    let progress = Arc::new(AtomicU64::new(0));
    let _g = team.watchdog().arm_progress(
        format!(
            "in {name} at {size} bytes: an iteration made no progress (a rank stopped taking part)"
        ),
        Arc::clone(&progress),
    );
    backend.timed(step, plan.iters, &progress)
}

/// One more call on poisoned output buffers, its result compared element by element with
/// what the collective must give: the number of wrong elements on this rank.
fn check(
    site: &Site,
    backend: &mut dyn Backend,
    step: &Step,
    ctx: &Ctx,
    input: &[u8],
    size_bytes: u64,
) -> Result<u64> {
    let ts = step.datatype.size();
    let rank = site.team.rank() as usize;
    // The bytes this size uses (`buffer_bytes`), not the whole buffer prepared for the
    // sweep's largest size: what the per-size buffers held.
    backend.fill(Buf::Recv, POISON, (size_bytes as usize).max(1))?;
    let (input_buf, input_at) = step.layout.input;
    backend.write(input_buf, input_at * ts, input)?;
    {
        let _g = site
            .team
            .watchdog()
            .arm(format!("in the checked call of {}", step.coll.name));
        backend.calls(step, 1)?;
    }
    let mut out = vec![0u8; ctx.counts.recv * ts];
    let (output_buf, output_at) = step.layout.output;
    backend.read(output_buf, output_at * ts, &mut out)?;
    if site.corrupt && !out.is_empty() {
        out[..ts].fill(POISON);
    }
    Ok(data::count_wrong(
        step.datatype,
        ctx.op,
        ctx.ranks,
        &out,
        |j| (step.coll.expected)(ctx, rank, j),
    ))
}

/// Bytes each of a rank's two buffers needs for `coll` at `size` on `ranks` ranks (in
/// place, the one buffer holds input and output at offsets inside this length).
pub fn buffer_bytes(plan: &Plan, coll: &Collective, size: u64, ranks: usize) -> usize {
    let ts = plan.datatype.size();
    let c = coll.counts(size as usize / ts, ranks, ts);
    (c.send.max(c.recv) * ts).max(1)
}

/// Combines one mode's figures across the team's ranks (every rank calls it and gets the
/// same result): the loop times as nccl-tests' `-a` says, the per-iteration times into
/// the slowest rank's per iteration, and the wrong-element counts summed. `wrong` is
/// `None` on every rank or on none (the layout decides, the same everywhere).
pub(crate) fn combine(
    plan: &Plan,
    site: &Site,
    timed: &Timed,
    wrong: Option<u64>,
    alg_bytes: u64,
    factor: f64,
) -> Result<CollectiveTiming> {
    let comm = site.team.comm();
    let _g = site
        .team
        .watchdog()
        .arm("combining the iteration times of all ranks");
    let iters = timed.iteration_ns.len().max(1) as f64;
    let mine_us = timed.loop_ns as f64 / iters / 1000.0;
    let mut per_rank_us = vec![0f64; comm.size() as usize];
    comm.all_gather_into(&mine_us, &mut per_rank_us[..]);
    let mut slowest = vec![0u64; timed.iteration_ns.len()];
    comm.all_reduce_into(
        &timed.iteration_ns[..],
        &mut slowest[..],
        SystemOperation::max(),
    );
    let local_wrong = wrong.unwrap_or(0);
    let mut total_wrong = 0u64;
    comm.all_reduce_into(&local_wrong, &mut total_wrong, SystemOperation::sum());

    let mut hist = LatencyHistogram::new();
    for &t in &slowest {
        hist.record(t);
    }
    let rank_times = timing::rank_times(&per_rank_us);
    let time_us = plan.average.pick(&rank_times);
    let algbw = results::units::gbyte_s(alg_bytes, time_us / 1e6);
    let busbw = algbw * factor;
    Ok(CollectiveTiming {
        time_us,
        algbw_gbyte_s: algbw,
        busbw_gbyte_s: busbw,
        efficiency: site.link_gbit_s.map(|l| busbw * 8.0 / l),
        wrong: total_wrong,
        checked: wrong.is_some(),
        unchecked_reason: None,
        latency_us: hist.summary_us(),
        histogram: hist.encode(),
        slowest_rank: site.spec.members[timing::slowest(&per_rank_us)],
        rank_time_us: Some(rank_times),
    })
}
