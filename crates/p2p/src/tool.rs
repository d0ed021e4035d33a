//! What a point-to-point tool supplies to the driver: its loop for one size and its table
//! rows ([`PairTool`]), and how rows are printed after a round.

use anyhow::Result;

use base::clock::LoopClock;
use base::link::PeerLink;
use results::{Pair, TestResult};
use transport::EndpointSpec;

use crate::coordinator::RoundReport;
use crate::plan::Plan;

/// What a tool's measurement function gets for one size.
pub struct SizeRun<'a> {
    /// The run's plan.
    pub plan: &'a Plan,
    /// This size's endpoint settings.
    pub spec: EndpointSpec,
    /// The pair's control link.
    pub link: &'a mut dyn PeerLink,
    /// What the pair keeps from size to size (hand it to the transport's connect).
    pub conn: &'a mut transport::Connection,
    /// The loop clock.
    pub clock: &'a LoopClock,
    /// The pair measured.
    pub pair: &'a Pair,
}

/// A tool: its loop for one size, and its human output.
pub trait PairTool {
    /// Runs one size. The initiator returns its result; the responder returns `None`
    /// unless it measured something itself.
    fn run_size(&mut self, run: &mut SizeRun) -> Result<Option<TestResult>>;
    /// Column header (perftest layout).
    fn print_header(&self, plan: &Plan);
    /// One table row.
    fn print_row(&self, result: &TestResult);
}

/// Rounds with at most this many pairs print every row; larger ones a summary line.
pub const ROWS_PER_ROUND: usize = 16;

/// Rows of the pairs the root did not print live (it prints its own pair's as they come
/// when it initiates), after the round; rounds of many pairs only get the progress line.
pub fn print_others(tool: &mut dyn PairTool, all: &[RoundReport], me: u32) {
    let printed_live =
        |r: &TestResult| pair_of(r).is_some_and(|p| p.initiator.rank.is_none_or(|i| i == me));
    let mut current = None;
    for r in all.iter().flat_map(|rep| rep.results.iter()) {
        if printed_live(r) {
            continue;
        }
        let label = pair_of(r).map(|p| match p.round {
            Some(k) => format!("round {k}: {}", p.label()),
            None => p.label(),
        });
        if current != label {
            if let Some(l) = &label {
                println!("# pair {l}");
            }
            current = label;
        }
        tool.print_row(r);
    }
}

fn pair_of(r: &TestResult) -> Option<&Pair> {
    match r {
        TestResult::Latency(l) => Some(&l.pair),
        TestResult::Bandwidth(b) => Some(&b.pair),
        TestResult::Collective(_) => None,
    }
}
