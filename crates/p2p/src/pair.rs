//! One pair of one round: walk the sizes in step with the peer, hand each size to the
//! tool's loop, and turn whatever goes wrong into a failure record instead of an exit.
//! The pair's [`Connection`] lives here, so a transport that can (verbs) connects at the
//! first size and re-arms for the next; it is dropped with the pair, and after an error.
//!
//! The initiator leads: before each size it tells the responder the size, or that it
//! stops (the sizes ran out, or Ctrl-C). A side that cannot go on (QPs that do not
//! connect, a failed work completion, a peer silent past the timeout) tells the other
//! why, so both record the same failure, each with its own cause, and the sweep moves on.

use std::net::IpAddr;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use results::{Pair, TestResult};

use crate::plan::Plan;
use crate::tool::{PairTool, SizeRun};
use base::clock::LoopClock;
use base::interrupt;
use base::link::{recv_json, send_abort, send_json, PeerLink};
use transport::{Connection, EndpointSpec, Role};

/// Per-size instruction from initiator to responder.
#[derive(Serialize, Deserialize)]
enum Step {
    Size(u64),
    /// The initiator stops; the reason is empty when the sizes simply ran out.
    Stop(String),
}

/// How a pair ended.
#[derive(Default)]
pub struct PairOutcome {
    pub results: Vec<TestResult>,
    /// The size in flight (if any) and what went wrong.
    pub failure: Option<(Option<u64>, String)>,
    /// Stopped early on Ctrl-C.
    pub interrupted: bool,
}

/// What one pair runs with.
pub struct PairCtx<'a> {
    pub plan: &'a Plan,
    pub role: Role,
    pub clock: &'a LoopClock,
    pub pair: &'a Pair,
    /// Address for this side's data connections.
    pub local_ip: IpAddr,
    /// Print each row as it comes (the root's own pair).
    pub print_live: bool,
}

/// Runs every size of the plan on one connected pair. `on_result` sees the results so
/// far after each size (the root checkpoints there).
pub fn run(
    ctx: &PairCtx,
    link: &mut dyn PeerLink,
    tool: &mut dyn PairTool,
    on_result: &mut dyn FnMut(&[TestResult]),
) -> PairOutcome {
    let mut out = PairOutcome::default();
    let mut current = None;
    if let Err(e) = sizes(ctx, link, tool, on_result, &mut out, &mut current) {
        let msg = format!("{e:#}");
        send_abort(link, &msg);
        out.failure = Some((current, msg));
    }
    out
}

fn sizes(
    ctx: &PairCtx,
    link: &mut dyn PeerLink,
    tool: &mut dyn PairTool,
    on_result: &mut dyn FnMut(&[TestResult]),
    out: &mut PairOutcome,
    current: &mut Option<u64>,
) -> Result<()> {
    let PairCtx {
        plan,
        role,
        clock,
        pair,
        local_ip,
        print_live,
    } = *ctx;
    let mut next_sizes = plan.sizes.iter().copied();
    let largest = plan.sizes.iter().copied().max().unwrap_or(0);
    // The pair connects at its first size and keeps the connection for the others.
    let mut conn = Connection::default();
    loop {
        let Some(size) = agree_next_size(role, link, &mut next_sizes, out)? else {
            return Ok(());
        };
        *current = Some(size);
        let spec = EndpointSpec {
            op: plan.op,
            role,
            size,
            largest,
            streams: plan.streams,
            tx_depth: plan.tx_depth,
            bidirectional: plan.bidirectional,
            timeout: plan.timeout,
            local_ip,
            verbs: plan.verbs.clone(),
            iterations: plan.duration_s.is_none().then_some(plan.messages()),
        };
        let mut run = SizeRun {
            plan,
            spec,
            link: &mut *link,
            conn: &mut conn,
            clock,
            pair,
        };
        if let Some(r) = tool.run_size(&mut run)? {
            if print_live {
                tool.print_row(&r);
            }
            let partial = !result_complete(&r);
            out.results.push(r);
            on_result(&out.results);
            if partial {
                // Ctrl-C cut the loop short: tell the responder nothing more is coming.
                out.interrupted = true;
                let _ = send_json(link, &Step::Stop(interrupt::REASON.into()));
                return Ok(());
            }
        }
        *current = None;
    }
}

/// The initiator says the next size (or stop: sizes done, or Ctrl-C), the responder hears
/// it: the size both measure next, `None` when the pair is done (`out.interrupted` when it
/// stopped for an interrupt).
fn agree_next_size(
    role: Role,
    link: &mut dyn PeerLink,
    next_sizes: &mut impl Iterator<Item = u64>,
    out: &mut PairOutcome,
) -> Result<Option<u64>> {
    let step = match role {
        Role::Initiator => {
            let step = match (next_sizes.next(), interrupt::interrupted()) {
                (_, true) => Step::Stop(interrupt::REASON.into()),
                (Some(s), false) => Step::Size(s),
                (None, false) => Step::Stop(String::new()),
            };
            send_json(link, &step)?;
            step
        }
        Role::Responder => recv_json::<Step>(link)?,
    };
    match step {
        Step::Size(s) => Ok(Some(s)),
        Step::Stop(why) => {
            out.interrupted = !why.is_empty();
            Ok(None)
        }
    }
}

fn result_complete(r: &TestResult) -> bool {
    match r {
        TestResult::Latency(l) => l.complete,
        TestResult::Bandwidth(b) => b.complete,
        TestResult::Collective(c) => c.complete,
    }
}
