//! Progress of a sweep on the root's terminal (standard error, one line per round), and
//! its closing summary. Nothing of it goes into the document.

use std::time::Instant;

use results::{Document, TestResult};

use crate::pattern::Schedule;

pub struct Progress {
    on: bool,
    rounds: usize,
    start: Instant,
}

impl Progress {
    pub fn new(on: bool, schedule: &Schedule) -> Self {
        if on {
            eprintln!(
                "sweep: {} over {} node(s) x {} rail(s): {} pair(s) in {} round(s)",
                schedule.pattern,
                schedule.nodes.len(),
                schedule.rails,
                schedule.planned_pairs(),
                schedule.rounds.len()
            );
        }
        Self {
            on,
            rounds: schedule.rounds.len(),
            start: Instant::now(),
        }
    }

    pub fn round_done(&mut self, round: u32, pairs: usize, failed_so_far: usize) {
        if !self.on {
            return;
        }
        let done = round as usize + 1;
        let elapsed = self.start.elapsed().as_secs_f64();
        let left = elapsed / done as f64 * (self.rounds - done) as f64;
        eprintln!(
            "round {round} done ({done} of {}): {pairs} pair(s); {failed_so_far} failed so far; \
             {elapsed:.1} s elapsed, about {left:.0} s left",
            self.rounds
        );
    }

    /// The sweep in a few lines: pairs measured and failed, and each failed pair's cause.
    pub fn summary(&self, doc: &Document) {
        let measured = doc
            .results
            .iter()
            .filter_map(|r| match r {
                TestResult::Latency(l) => Some(&l.pair),
                TestResult::Bandwidth(b) => Some(&b.pair),
                TestResult::Collective(_) => None,
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        eprintln!(
            "sweep done: {measured} pair(s) measured, {} failed, in {:.1} s",
            doc.failed_pairs.len(),
            self.start.elapsed().as_secs_f64()
        );
        for f in &doc.failed_pairs {
            let why = [&f.initiator_error, &f.responder_error]
                .into_iter()
                .flatten()
                .cloned()
                .collect::<Vec<_>>()
                .join(" / ");
            eprintln!("  FAILED round {} {}: {why}", f.round, f.pair.label());
        }
    }
}
