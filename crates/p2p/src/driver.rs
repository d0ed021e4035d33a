//! One process's part of a run once its coordinator is up ([`run_rank`]): agree on the
//! schedule, take part in every round, and on the root gather, print and write the
//! document. Launch modes differ only in the coordinator handed in, patterns only in the
//! schedule they produce, transports only behind the endpoint traits.

use std::net::Ipv4Addr;

use anyhow::Result;
use serde_json::{json, Map, Value};

use base::clock::LoopClock;
use base::{exit, interrupt};
use results::{Pair, Peer, SweepInfo, TestResult};
use transport::Role;

use crate::coordinator::{self, Coordinator, RoundReport, Shared, SideFailure};
use crate::pair;
use crate::pattern::{self, PatternSpec, RankPair, Schedule};
use crate::plan::{Launch, Plan};
use crate::progress;
use crate::record;
use crate::tool::{print_others, PairTool, ROWS_PER_ROUND};

/// What every process of a run shares: the loop clock and the run's start.
pub struct RunCtx<'a> {
    /// The loop clock every measurement is stamped with.
    pub clock: &'a LoopClock,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// The clock's own cost per read, ns (recorded).
    pub overhead_ns: f64,
}

/// The schedule of a run from its roster: every process computes the same rounds from
/// the same members and the root's shared inputs.
pub fn schedule_for(
    launch: &Launch,
    members: &[coordinator::Member],
    shared: &Shared,
) -> Result<Schedule> {
    let slots: Vec<_> = members.iter().map(|m| m.slot()).collect();
    pattern::schedule(&pattern::Request {
        pattern: &launch.pattern,
        slots: &slots,
        rail_mode: launch.rail_mode,
        include_local: launch.include_local,
        fallback_seed: shared.seed,
        file_text: shared.file_text.as_deref(),
        fabric: shared.fabric.as_ref(),
    })
}

/// The document's `options` of a sweep: the plan's, and how pairs were scheduled.
pub fn sweep_options(plan: &Plan, launch: &Launch) -> Map<String, Value> {
    let mut options = plan.options();
    options.insert("pattern".into(), json!(launch.pattern.to_string()));
    options.insert("include_local".into(), json!(launch.include_local));
    options.insert("rails".into(), json!(launch.rail_mode.name()));
    options
}

/// One process's part of a run once its coordinator is up (standalone side, MPI rank,
/// or agent): meet the peers and agree on the schedule, take part in every round, and on
/// the root gather, print and write the document. Returns the exit code.
pub fn run_rank(
    coord: &mut dyn Coordinator,
    launch: &Launch,
    plan: &Plan,
    tool: &mut dyn PairTool,
    ctx: RunCtx,
) -> Result<i32> {
    let Some((shared, schedule)) = agree_schedule(coord, launch, plan)? else {
        return Ok(exit::ERROR);
    };
    let mut rec = recorder(
        &*coord,
        launch,
        plan,
        &schedule,
        ctx.started_at,
        ctx.overhead_ns,
    );
    if let Some(f) = &shared.fabric {
        plan_against_fabric(&*coord, f, &schedule, &mut rec, plan.tool);
    }
    if coord.is_root() {
        tool.print_header(plan);
    }
    let rank = RankRun {
        launch,
        plan,
        clock: ctx.clock,
        seed: shared.seed,
        schedule: &schedule,
    };
    let done = rank.run_rounds(coord, tool, &mut rec)?;
    finish_document(coord, launch, plan, tool, rec, done)
}

/// The sweep against the fabric plan (`--plan`), on the root: the pairs by hop into the
/// document, and the planned nodes missing from the run (and hosts the plan does not
/// know) said before the first round and kept in the document's warnings.
fn plan_against_fabric(
    coord: &dyn Coordinator,
    fabric: &crate::fabric::FabricOrder,
    schedule: &Schedule,
    rec: &mut record::Recorder,
    tool: &str,
) {
    // Only the root writes the document; the other ranks need none of this.
    if !coord.is_root() {
        return;
    }
    let Some(sweep) = rec.sweep.as_mut() else {
        return;
    };
    // Each rank's leaf once (a lookup builds a key), then every scheduled pair by index:
    // an all-pairs sweep of 1024 nodes x 8 rails schedules about 4 million pairs.
    let leaves: Vec<Option<&str>> = coord
        .members()
        .iter()
        .map(|m| fabric.leaf_of(&m.host, m.device.as_deref()))
        .collect();
    let hops = schedule.rounds.iter().flatten().map(|p| {
        crate::fabric::Hop::of(leaves[p.initiator as usize], leaves[p.responder as usize])
    });
    let mut found = fabric.record(&schedule.nodes, hops);
    if let Some(w) = hold_to_uplinks(fabric, schedule, &mut found, tool) {
        rec.warnings.push(w);
    }
    rec.warnings.extend(coverage_warnings(&found));
    for w in &rec.warnings {
        base::output::error_line(&format!("{tool}: warning: {w}"));
    }
    eprintln!(
        "{tool}: plan {}: {} pair(s) on one leaf, {} across the spines, {} not placed by the plan",
        found.source, found.same_leaf_pairs, found.cross_leaf_pairs, found.unknown_pairs
    );
    sweep.plan = Some(found);
}

/// How the plan's oversubscribed uplinks shaped the rounds: when the schedule held each
/// group's cross-spine pairs per round to what its uplinks carry, that is recorded and said;
/// when it could not (`--rails all`), the warning to keep.
fn hold_to_uplinks(
    fabric: &crate::fabric::FabricOrder,
    schedule: &Schedule,
    found: &mut results::schema::SweepPlan,
    tool: &str,
) -> Option<String> {
    if let Some((before, after)) = schedule.cross_capped {
        found.cross_leaf_cap = fabric
            .cross_cap
            .iter()
            .map(|(g, c)| (g.clone(), c.pairs))
            .collect();
        found.rounds_uncapped = Some(before as u64);
        found.held_as_built = fabric.built.clone();
        for (g, c) in &fabric.cross_cap {
            eprintln!(
                "{tool}: plan {}: group {g}'s uplinks are oversubscribed {:.3}:1 ({}), so at \
                 most {} pair(s) of it cross the spines per round: {after} rounds instead of \
                 {before}",
                found.source, c.oversubscription, c.leaf, c.pairs
            );
        }
        None
    } else if !fabric.cross_cap.is_empty() {
        Some(format!(
            "plan {}: the uplinks of {} group(s) are oversubscribed, but with --rails all \
             every rail pair crosses the spines and rounds are not held to what the uplinks \
             carry: pairs of one round share them and measure below line rate",
            found.source,
            fabric.cross_cap.len()
        ))
    } else {
        None
    }
}

/// The plan's nodes without a rank in this run, and the run's hosts the plan lacks.
fn coverage_warnings(found: &results::schema::SweepPlan) -> Vec<String> {
    let list = |v: &[String]| {
        let mut s = v.iter().take(20).cloned().collect::<Vec<_>>().join(", ");
        if v.len() > 20 {
            s.push_str(&format!(" and {} more", v.len() - 20));
        }
        s
    };
    let mut warnings = Vec::new();
    if !found.missing.is_empty() {
        warnings.push(format!(
            "plan {}: {} planned node(s) have no rank in this run, so their links are not measured: {} \
             (launch on every node of the plan, or leave them out of the plan knowingly)",
            found.source,
            found.missing.len(),
            list(&found.missing)
        ));
    }
    if !found.unplanned.is_empty() {
        warnings.push(format!(
            "plan {}: {} host(s) of this run are not in the plan: {} (a host name differs, or \
             the plan is out of date)",
            found.source,
            found.unplanned.len(),
            list(&found.unplanned)
        ));
    }
    warnings
}

/// Meets the peers: the root decides what only it can (seed, the pair list), every rank
/// computes the same rounds from the same roster. `None` after printing (on the root) why
/// there is no schedule.
fn agree_schedule(
    coord: &mut dyn Coordinator,
    launch: &Launch,
    plan: &Plan,
) -> Result<Option<(Shared, Schedule)>> {
    let root = coord.is_root();
    let shared = coord.share(if root {
        let mut s = root_inputs(launch);
        if let Some(f) = s.fabric.as_mut() {
            if plan.tool != "bench-bw" {
                // A latency sweep's messages load no uplink: its rounds are never held.
                f.uncapped();
            } else if !f.leaf_cap.is_empty() {
                for line in f.as_built(&coord.hosts()) {
                    eprintln!(
                        "{}: plan {}: discovery: {line}; its pairs are held by the leaf it is on",
                        plan.tool, f.source
                    );
                }
            }
        }
        s
    } else {
        Shared::default()
    })?;
    if let Some(e) = &shared.error {
        if root {
            eprintln!("{}: error: {e}", plan.tool);
        }
        return Ok(None);
    }
    match schedule_for(launch, coord.members(), &shared) {
        Ok(s) => Ok(Some((shared, s))),
        Err(e) => {
            if root {
                eprintln!("{}: error: {e:#}", plan.tool);
            }
            Ok(None)
        }
    }
}

/// The document's recorder: a sweep's options and schedule under MPI, the plan's alone
/// for a standalone pair.
fn recorder<'a>(
    coord: &dyn Coordinator,
    launch: &'a Launch,
    plan: &'a Plan,
    schedule: &Schedule,
    started_at: String,
    overhead_ns: f64,
) -> record::Recorder<'a> {
    let sweeping = coord.launcher() != "standalone";
    let options = if sweeping {
        sweep_options(plan, launch)
    } else {
        plan.options()
    };
    let mut rec = record::Recorder::new(
        launch.json.as_deref(),
        plan,
        coord.launcher(),
        coord.members().len() as u32,
        coord.hosts(),
        started_at,
        overhead_ns,
        options,
    );
    rec.sweep = sweeping.then(|| sweep_info(schedule));
    rec
}

/// What a rank's rounds leave for the document.
struct RoundsDone {
    /// Why the run stopped early (an interrupt), if it did.
    stopped: Option<String>,
    /// Whether this rank's own pair failed (the root learns of every pair from the reports).
    my_pair_failed: bool,
    progress: progress::Progress,
}

/// What every round of one rank shares.
struct RankRun<'a> {
    launch: &'a Launch,
    plan: &'a Plan,
    clock: &'a LoopClock,
    seed: u64,
    schedule: &'a Schedule,
}

impl RankRun<'_> {
    /// Takes part in every round: this rank's pair, if it has one, then the round's
    /// barrier and gather (the root records and prints what came back).
    fn run_rounds(
        &self,
        coord: &mut dyn Coordinator,
        tool: &mut dyn PairTool,
        rec: &mut record::Recorder,
    ) -> Result<RoundsDone> {
        let schedule = self.schedule;
        let root = coord.is_root();
        let me = coord.rank();
        let mut done = RoundsDone {
            stopped: None,
            my_pair_failed: false,
            progress: progress::Progress::new(root && schedule.rounds.len() > 1, schedule),
        };
        let limit = self.plan.round_limit();
        // What disturbs the run (load, steal, preemptions of this, the measuring, thread) is
        // read before the first round and after the last; it travels with the last report.
        let mut probe = Some(probe::quality::Probe::start());
        for (ri, round) in schedule.rounds.iter().enumerate() {
            let ri = ri as u32;
            let round_start = std::time::Instant::now();
            if !coord.begin_round(ri, limit) {
                done.stopped = Some(interrupt::REASON.to_string());
                break;
            }
            let mut report = RoundReport::default();
            if let Some(rp) = schedule.pair_of(ri as usize, me) {
                self.run_my_pair(coord, tool, rec, ri, rp, &mut report);
                done.my_pair_failed |= !report.failures.is_empty();
            }
            if ri as usize + 1 == schedule.rounds.len() {
                let host = coord.members()[me as usize].host.clone();
                report.quality = probe
                    .take()
                    .map(|p| p.finish_as(&host, coord.ranks_in_results().then_some(me)));
            }
            if let Some(raw) = coord.end_round(report, limit)? {
                let seconds = round_start.elapsed().as_secs_f64();
                if round.len() <= ROWS_PER_ROUND {
                    let all = record::decode_round(&raw);
                    print_others(tool, &all, me);
                    rec.add_round(all, seconds);
                } else {
                    rec.add_round_raw(raw, seconds);
                }
                rec.checkpoint(&[], false);
                done.progress
                    .round_done(ri, round.len(), rec.failed_pairs());
            }
        }
        Ok(done)
    }

    /// Measures this rank's pair of round `ri` into `report`: its results, or its failure
    /// with this side's port state.
    fn run_my_pair(
        &self,
        coord: &mut dyn Coordinator,
        tool: &mut dyn PairTool,
        rec: &mut record::Recorder,
        ri: u32,
        rp: RankPair,
        report: &mut RoundReport,
    ) {
        let rounds = self.schedule.rounds.len();
        let me = coord.rank();
        let pair = pair_record(&*coord, rp, (rounds > 1).then_some(ri));
        let role = if rp.initiator == me {
            Role::Initiator
        } else {
            Role::Responder
        };
        let live = coord.is_root() && role == Role::Initiator;
        if live && rounds > 1 {
            println!("# pair round {ri}: {}", pair.label());
        }
        let out = {
            let mut checkpoint = |done: &[TestResult]| {
                if live {
                    rec.checkpoint(done, false);
                }
            };
            let peer = if role == Role::Initiator {
                rp.responder
            } else {
                rp.initiator
            };
            let link = match coord.peer_gone(peer) {
                Some(why) => Err(anyhow::anyhow!("the peer is gone: {why}")),
                None => coord.pair_link(ri, rp, self.seed),
            };
            match link {
                Ok(link) => {
                    let local_ip = self
                        .launch
                        .bind_addr
                        .or(link.local_ip())
                        .unwrap_or(Ipv4Addr::LOCALHOST.into());
                    let ctx = pair::PairCtx {
                        plan: self.plan,
                        role,
                        clock: self.clock,
                        pair: &pair,
                        local_ip,
                        print_live: live,
                    };
                    pair::run(&ctx, link, tool, &mut checkpoint)
                }
                Err(e) => pair::PairOutcome {
                    failure: Some((None, format!("{e:#}"))),
                    ..Default::default()
                },
            }
        };
        if let Some((size, error)) = out.failure {
            report
                .failures
                .push(side_failure(&*coord, pair, role, ri, size, error));
        }
        report.results = out.results;
        report.interrupted = out.interrupted;
    }
}

/// This side's record of its failed pair, printed as it happens: the error, the size it
/// failed at, and the state of this side's port.
fn side_failure(
    coord: &dyn Coordinator,
    pair: Pair,
    role: Role,
    ri: u32,
    size: Option<u64>,
    error: String,
) -> SideFailure {
    let me = coord.rank();
    let standalone = coord.launcher() == "standalone";
    eprintln!(
        "{}pair {} failed{}: {error}",
        if standalone {
            String::new()
        } else {
            format!("rank {me}: ")
        },
        pair.label(),
        size.map_or(String::new(), |s| format!(" at {s} bytes"))
    );
    let dev = if role == Role::Initiator {
        &pair.initiator
    } else {
        &pair.responder
    };
    let port_state = dev
        .device
        .as_deref()
        .and_then(|d| probe::inventory::port_state(d, dev.port.unwrap_or(1)));
    SideFailure {
        round: ri,
        pair,
        role,
        size_bytes: size,
        port_state,
        error,
    }
}

/// Finishes the document: the root writes it (and tells the coordinator), a standalone
/// server prints and keeps the client's, other ranks are done. Returns the exit code.
fn finish_document(
    coord: &mut dyn Coordinator,
    launch: &Launch,
    plan: &Plan,
    tool: &mut dyn PairTool,
    mut rec: record::Recorder,
    done: RoundsDone,
) -> Result<i32> {
    let standalone = coord.launcher() == "standalone";
    let sweeping = !standalone;
    let RoundsDone {
        mut stopped,
        my_pair_failed,
        progress,
    } = done;
    rec.drain();
    if stopped.is_none() && rec.interrupted {
        stopped = Some(interrupt::REASON.to_string());
    }
    if rec.failed_pairs() > 0 && stopped.is_none() && standalone {
        stopped = rec_failure_reason(&rec);
    }
    if coord.is_root() {
        let doc = rec.document(&[], stopped.clone());
        let code = record::exit_code(&doc, standalone);
        if sweeping
            && doc
                .sweep
                .as_ref()
                .is_some_and(|s| s.rounds > 1 || rec.failed_pairs() > 0)
        {
            progress.summary(&doc);
        }
        if doc.failed_pairs.is_empty() || !standalone {
            coord.finish(Some(&doc))?;
        }
        base::output::write_document(launch.json.as_deref(), &doc)?;
        Ok(code)
    } else if standalone {
        // The server prints the client's document (and keeps it with --json).
        if !my_pair_failed {
            if let Some(doc) = coord.finish(None)? {
                tool.print_header(plan);
                for r in &doc.results {
                    tool.print_row(r);
                }
                base::output::write_document(launch.json.as_deref(), &doc)?;
                return Ok(record::exit_code(&doc, true));
            }
        }
        Ok(if my_pair_failed {
            exit::ERROR
        } else {
            exit::OK
        })
    } else {
        Ok(exit::OK)
    }
}

fn rec_failure_reason(rec: &record::Recorder) -> Option<String> {
    rec.first_failure().map(|f| {
        let size = f
            .size_bytes
            .map_or(String::new(), |s| format!(" at {s} bytes"));
        let why = f
            .initiator_error
            .clone()
            .or_else(|| f.responder_error.clone())
            .unwrap_or_default();
        format!("failed{size}: {why}")
    })
}

/// What only the root decides: the seed (also the job nonce of pair tickets) and the
/// pair list's text.
pub fn root_inputs(launch: &Launch) -> Shared {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ (u64::from(std::process::id()) << 20);
    let mut shared = Shared {
        seed,
        ..Default::default()
    };
    if let Some(path) = &launch.fabric_plan {
        match crate::fabric::FabricOrder::load(path) {
            Ok(f) => shared.fabric = Some(f),
            Err(e) => shared.error = Some(format!("--plan: {e}")),
        }
    }
    if let PatternSpec::File(path) = &launch.pattern {
        match std::fs::read_to_string(path) {
            Ok(t) => shared.file_text = Some(t),
            Err(e) => {
                shared.error = Some(format!(
                    "cannot read the pair list {}: {e} (write one `hostA hostB` per line; \
                     `aggregate report` writes suspects.pairs)",
                    path.display()
                ))
            }
        }
    }
    shared
}

/// The sweep's shape for the document: the pattern, nodes, rails, rounds and seed.
pub fn sweep_info(s: &Schedule) -> SweepInfo {
    SweepInfo {
        pattern: s.pattern.name().into(),
        seed: s.seed,
        file: match &s.pattern {
            PatternSpec::File(p) => Some(p.display().to_string()),
            _ => None,
        },
        nodes: s.nodes.clone(),
        rails: s.rails,
        rail_mode: s.rail_mode.name().into(),
        include_local: s.include_local,
        rounds: s.rounds.len() as u32,
        rounds_done: 0,
        planned_pairs: s.planned_pairs(),
        round_seconds: Vec::new(),
        plan: None,
    }
}

/// Both ends of a scheduled pair as results name them.
fn pair_record(coord: &dyn Coordinator, rp: RankPair, round: Option<u32>) -> Pair {
    pair_of_members(coord.members(), coord.ranks_in_results(), rp, round)
}

/// Both ends of a scheduled pair from the roster; ranks only where the launcher has them.
pub fn pair_of_members(
    members: &[coordinator::Member],
    ranks: bool,
    rp: RankPair,
    round: Option<u32>,
) -> Pair {
    let peer = |r: u32| {
        let m = &members[r as usize];
        Peer {
            rank: ranks.then_some(r),
            host: m.host.clone(),
            device: m.device.clone(),
            port: m.port,
        }
    };
    Pair {
        initiator: peer(rp.initiator),
        responder: peer(rp.responder),
        round,
    }
}
