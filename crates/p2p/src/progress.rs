//! Progress of a sweep on the root's terminal (standard error, one line per round), and
//! its closing summary. Nothing of it goes into the document.
//!
//! Each line leaves in one `write(2)`: `eprintln!` writes a formatted line in pieces (the
//! standard error stream is unbuffered), and under mpirun, which forwards every rank's
//! output as it comes, other ranks' table rows landed inside a progress line ("round #
//! pair round 0: ... 0 done (1 of 3)"), breaking it for a reader and for `grep`.

use std::io::Write;
use std::time::Instant;

use results::{Document, TestResult};

use crate::pattern::Schedule;

/// Rank 0's progress lines on the terminal: one a round, with the failures so far.
pub struct Progress {
    on: bool,
    rounds: usize,
    start: Instant,
}

impl Progress {
    /// Says the sweep's shape (when `on`) and starts the clock.
    pub fn new(on: bool, schedule: &Schedule) -> Self {
        if on {
            say(&format!(
                "sweep: {} over {} node(s) x {} rail(s): {} pair(s) in {} round(s)",
                schedule.pattern,
                schedule.nodes.len(),
                schedule.rails,
                schedule.planned_pairs(),
                schedule.rounds.len()
            ));
        }
        Self {
            on,
            rounds: schedule.rounds.len(),
            start: Instant::now(),
        }
    }

    /// Says a round is done: its pairs, the failures so far, the time left at this pace.
    pub fn round_done(&mut self, round: u32, pairs: usize, failed_so_far: usize) {
        if !self.on {
            return;
        }
        let done = round as usize + 1;
        let elapsed = self.start.elapsed().as_secs_f64();
        let left = elapsed / done as f64 * (self.rounds - done) as f64;
        say(&format!(
            "round {round} done ({done} of {}): {pairs} pair(s); {failed_so_far} failed so far; \
             {elapsed:.1} s elapsed, about {left:.0} s left",
            self.rounds
        ));
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
        say(&format!(
            "sweep done: {measured} pair(s) measured, {} failed, in {:.1} s",
            doc.failed_pairs.len(),
            self.start.elapsed().as_secs_f64()
        ));
        for f in &doc.failed_pairs {
            let why = [&f.initiator_error, &f.responder_error]
                .into_iter()
                .flatten()
                .cloned()
                .collect::<Vec<_>>()
                .join(" / ");
            say(&format!(
                "  FAILED round {} {}: {why}",
                f.round,
                f.pair.label()
            ));
        }
    }
}

/// Writes `text` and a newline to standard error in one write.
fn say(text: &str) {
    let _ = emit(&mut std::io::stderr().lock(), text);
}

fn emit(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    out.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the writes it is given; takes each whole.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_progress_line_is_one_write() {
        let mut w = Writes::default();
        let (round, done, rounds) = (0, 1, 3);
        emit(
            &mut w,
            &format!("round {round} done ({done} of {rounds}): 2 pair(s)"),
        )
        .unwrap();
        assert_eq!(w.0, vec![b"round 0 done (1 of 3): 2 pair(s)\n".to_vec()]);
        // What eprintln! does with the same line: several writes, which mpirun can
        // interleave with other ranks' output.
        let mut pieces = Writes::default();
        writeln!(pieces, "round {round} done ({done} of {rounds}): 2 pair(s)").unwrap();
        assert!(pieces.0.len() > 1, "{:?}", pieces.0.len());
    }
}
