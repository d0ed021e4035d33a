//! The result document of a point-to-point run: built the same way by every launch mode,
//! checkpointed while the run goes on, written atomically at the end.
//!
//! Checkpoints keep what was measured when a job is killed outright (mpirun tears ranks
//! down on Ctrl-C before any final gather): after every round, and after every size of the
//! root's own pair. Rewriting a large sweep's document after each of a thousand rounds
//! would cost more than the sweep, so a checkpoint is skipped while the time since the
//! last one is under ten times what the last one cost: small documents are rewritten
//! every time, a huge one at most a tenth of the run's time.
//!
//! At 1024 nodes x 8 rails a round is 4096 pairs whose reports take the root tens of
//! milliseconds to decode; every rank would wait that long at the next barrier. So large
//! rounds are decoded by a background thread while the next round measures, and a
//! checkpoint holds the rounds decoded so far (small rounds are decoded at once, so their
//! rows print in order and every checkpoint is exact).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use results::{Document, FailedPair, HostInfo, Pair, SweepInfo, TestResult};

use crate::coordinator::{RoundReport, SideFailure};
use crate::plan::Plan;
use base::clock::LoopClock;
use transport::Role;

/// Everything the document of a run is made of, kept by the root.
pub struct Recorder<'a> {
    path: Option<&'a Path>,
    plan: &'a Plan,
    launcher: &'static str,
    ranks: u32,
    hosts: Vec<HostInfo>,
    /// The whole fabric from this (root) rank, when FABCHECK_IBNETDISCOVER asks for it.
    fabric: Option<results::discovery::FabricDiscovery>,
    started_at: String,
    overhead_ns: f64,
    /// The sweep's shape, for the document.
    pub sweep: Option<SweepInfo>,
    /// What the document's readers should know (planned nodes left out of the run).
    pub warnings: Vec<String>,
    /// The options the document records.
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Every result so far.
    pub results: Vec<TestResult>,
    failures: BTreeMap<(u32, Pair), FailedPair>,
    /// Some pair stopped early on Ctrl-C.
    pub interrupted: bool,
    /// Every rank's measurement quality (from the last round's reports).
    quality: Vec<results::quality::HostQuality>,
    last_write: Option<Instant>,
    last_cost: Duration,
    decoder: Option<Decoder>,
}

/// Rounds handed to the background decoder, and what it has decoded so far.
type Decoded = Arc<Mutex<Vec<(Vec<RoundReport>, f64)>>>;

struct Decoder {
    tx: mpsc::Sender<(Vec<Vec<u8>>, f64)>,
    done: Decoded,
    handle: JoinHandle<()>,
}

/// Decodes one round's serialized reports; an unreadable one is named and skipped.
pub fn decode_round(raw: &[Vec<u8>]) -> Vec<RoundReport> {
    raw.iter()
        .enumerate()
        .filter_map(|(rank, b)| match base::wire::decode_json(b) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("warning: rank {rank} sent an unreadable round report ({e}); its pair is left out");
                None
            }
        })
        .collect()
}

impl<'a> Recorder<'a> {
    /// A recorder writing to `path` (checkpoints beside it) for the run these arguments describe.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        path: Option<&'a Path>,
        plan: &'a Plan,
        launcher: &'static str,
        ranks: u32,
        hosts: Vec<HostInfo>,
        started_at: String,
        overhead_ns: f64,
        options: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        Self {
            path,
            plan,
            launcher,
            ranks,
            // Only the rank holding the gathered host facts (the root) asks.
            fabric: hosts
                .first()
                .and_then(|h| probe::discovery::fabric_from_env(&h.hostname)),
            hosts,
            started_at,
            overhead_ns,
            sweep: None,
            warnings: Vec::new(),
            options,
            results: Vec::new(),
            failures: BTreeMap::new(),
            interrupted: false,
            quality: Vec::new(),
            last_write: None,
            last_cost: Duration::ZERO,
            decoder: None,
        }
    }

    /// Hands a large round to the background decoder (started on first use).
    pub fn add_round_raw(&mut self, raw: Vec<Vec<u8>>, seconds: f64) {
        let d = self.decoder.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<(Vec<Vec<u8>>, f64)>();
            let done: Decoded = Arc::default();
            let out = Arc::clone(&done);
            let handle = std::thread::spawn(move || {
                for (raw, secs) in rx {
                    let reports = decode_round(&raw);
                    if let Ok(mut v) = out.lock() {
                        v.push((reports, secs));
                    }
                }
            });
            Decoder { tx, done, handle }
        });
        let _ = d.tx.send((raw, seconds));
        self.absorb();
    }

    /// Takes in what the background decoder has finished.
    fn absorb(&mut self) {
        if let Some(done) = self.decoder.as_ref().map(|d| Arc::clone(&d.done)) {
            self.add_decoded(&done);
        }
    }

    /// Waits for every round handed to the decoder (before the final document).
    pub fn drain(&mut self) {
        if let Some(d) = self.decoder.take() {
            drop(d.tx);
            let _ = d.handle.join();
            self.add_decoded(&d.done);
        }
    }

    /// Takes the rounds decoded so far out of `done` and adds them in order.
    fn add_decoded(&mut self, done: &Decoded) {
        let ready = done
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        for (reports, secs) in ready {
            self.add_round(reports, secs);
        }
    }

    /// Takes in every rank's report of a finished round, and how long the round took.
    pub fn add_round(&mut self, reports: Vec<RoundReport>, seconds: f64) {
        for r in reports {
            self.interrupted |= r.interrupted;
            self.quality.extend(r.quality);
            self.results.extend(r.results);
            for f in r.failures {
                self.add_failure(f);
            }
        }
        if let Some(s) = &mut self.sweep {
            s.rounds_done += 1;
            s.round_seconds.push((seconds * 1e6).round() / 1e6);
        }
    }

    /// Both sides of a failed pair report it; they become one record with each side's
    /// own cause.
    fn add_failure(&mut self, f: SideFailure) {
        let rec = self
            .failures
            .entry((f.round, f.pair.clone()))
            .or_insert_with(|| FailedPair {
                round: f.round,
                pair: f.pair.clone(),
                ..Default::default()
            });
        rec.size_bytes = rec.size_bytes.or(f.size_bytes);
        match f.role {
            Role::Initiator => {
                rec.initiator_error = Some(f.error);
                rec.initiator_port_state = f.port_state;
            }
            Role::Responder => {
                rec.responder_error = Some(f.error);
                rec.responder_port_state = f.port_state;
            }
        }
    }

    /// Pairs that failed so far.
    pub fn failed_pairs(&self) -> usize {
        self.failures.len()
    }

    /// The first failed pair in the document's order (`failed_pairs[0]` of [`Self::document`]).
    pub fn first_failure(&self) -> Option<&FailedPair> {
        self.failures.values().next()
    }

    /// The document as it stands, with `extra` (the root's pair of the current round)
    /// appended.
    pub fn document(&self, extra: &[TestResult], stopped: Option<String>) -> Document {
        let mut doc = Document::new(
            self.plan.tool,
            self.launcher,
            self.ranks,
            self.started_at.clone(),
        );
        doc.loop_overhead_ns = Some(self.overhead_ns);
        doc.clock = Some(LoopClock::source().into());
        doc.hosts = self.hosts.clone();
        doc.fabric = self.fabric.clone();
        doc.options = self.options.clone();
        doc.results = self.results.iter().chain(extra).cloned().collect();
        doc.sweep = self.sweep.clone();
        doc.warnings.extend(self.warnings.iter().cloned());
        doc.failed_pairs = self.failures.values().cloned().collect();
        if !self.quality.is_empty() {
            doc.attach_quality(self.quality.clone());
        }
        doc.finish(stopped);
        doc
    }

    /// Writes what is measured so far, marked incomplete, unless the last checkpoint was
    /// too recent for its cost (see the module doc); `force` writes regardless.
    pub fn checkpoint(&mut self, extra: &[TestResult], force: bool) {
        self.absorb();
        let Some(path) = self.path else { return };
        if !force {
            if let Some(at) = self.last_write {
                if at.elapsed() < self.last_cost * 10 {
                    return;
                }
            }
        }
        let t0 = Instant::now();
        let reason = match &self.sweep {
            Some(s) if s.rounds > 1 => format!(
                "checkpoint: {} of {} rounds finished when this was written; the run did not finish",
                s.rounds_done, s.rounds
            ),
            _ => format!(
                "checkpoint: {} of {} sizes measured when this was written; the run did not finish",
                self.results.len() + extra.len(),
                self.plan.sizes.len()
            ),
        };
        let doc = self.document(extra, Some(reason));
        if let Err(e) = results::write::write_document_atomic(path, &doc) {
            eprintln!(
                "warning: cannot write the checkpoint {}: {e}",
                path.display()
            );
        }
        self.last_cost = t0.elapsed();
        self.last_write = Some(Instant::now());
    }
}

/// The exit code of a finished run, by the one policy of `base::exit` (a failure
/// outranks wrong bytes, which outrank an interrupt). A standalone pair that failed is an
/// environment error (2: the one peer died or could not connect); under a launcher a
/// failed pair is a finding about the fabric (1), the rest of the sweep having run.
pub fn exit_code(doc: &Document, standalone: bool) -> i32 {
    let wrong = doc
        .results
        .iter()
        .any(|r| matches!(r, TestResult::Bandwidth(b) if b.check_wrong_bytes.unwrap_or(0) > 0));
    if wrong {
        eprintln!("check failed: some bytes arrived wrong (see check_wrong_bytes)");
    }
    let failed_pairs = !doc.failed_pairs.is_empty();
    base::exit::code_for(
        failed_pairs && standalone,
        (failed_pairs && !standalone) || wrong,
        !doc.complete,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{BandwidthResult, Peer};

    fn plan() -> Plan {
        Plan {
            tool: "bench-bw",
            test: "send_bw".into(),
            op: transport::Op::Send,
            transport: transport::TransportKind::Tcp,
            sizes: vec![64, 128],
            iterations: 10,
            duration_s: None,
            warmup: 0,
            streams: 1,
            tx_depth: 1,
            bidirectional: false,
            timeout: Duration::from_secs(5),
            verbs: Default::default(),
            extra: Default::default(),
            local: Default::default(),
        }
    }

    fn pair(a: u32, b: u32) -> Pair {
        let p = |r: u32| Peer {
            rank: Some(r),
            host: format!("n{r}"),
            ..Default::default()
        };
        Pair {
            initiator: p(a),
            responder: p(b),
            round: Some(0),
        }
    }

    fn side(role: Role, error: &str) -> SideFailure {
        SideFailure {
            round: 0,
            pair: pair(0, 1),
            role,
            size_bytes: Some(64),
            error: error.into(),
            port_state: Some("1: DOWN".into()),
        }
    }

    fn bw(wrong: Option<u64>) -> TestResult {
        let doc: BandwidthResult = serde_json::from_value(serde_json::json!({
            "test": "send_bw", "transport": "tcp", "size_bytes": 64, "iterations": 1,
            "duration_s": 1.0, "bidirectional": false, "streams": 1, "tx_depth": 1,
            "bw_gbit_s": {"avg": 1.0, "peak": 1.0}, "msg_rate_mpps": 1.0, "interval_s": 0.1,
            "interval_gbit_s": [], "cpu": {"initiator_cores": 0.0, "responder_cores": 0.0},
            "pair": pair(0, 1), "complete": true, "check_wrong_bytes": wrong,
        }))
        .unwrap();
        TestResult::Bandwidth(doc)
    }

    fn recorder(plan: &Plan) -> Recorder<'_> {
        Recorder::new(
            None,
            plan,
            "mpi",
            2,
            vec![],
            "t".into(),
            10.0,
            Default::default(),
        )
    }

    #[test]
    fn both_sides_of_a_failed_pair_make_one_record() {
        let p = plan();
        let mut rec = recorder(&p);
        rec.add_round(
            vec![
                RoundReport {
                    failures: vec![side(Role::Initiator, "IBV_WC_RETRY_EXC_ERR")],
                    ..Default::default()
                },
                RoundReport {
                    failures: vec![side(Role::Responder, "the peer gave up")],
                    ..Default::default()
                },
            ],
            0.5,
        );
        assert_eq!(rec.failed_pairs(), 1);
        let doc = rec.document(&[], None);
        let f = &doc.failed_pairs[0];
        assert_eq!(f.initiator_error.as_deref(), Some("IBV_WC_RETRY_EXC_ERR"));
        assert_eq!(f.responder_error.as_deref(), Some("the peer gave up"));
        assert_eq!(f.initiator_port_state.as_deref(), Some("1: DOWN"));
        assert_eq!(rec.first_failure(), doc.failed_pairs.first());
    }

    #[test]
    fn the_exit_policy_ranks_failed_pairs_then_wrong_bytes_then_interrupts() {
        let p = plan();
        let mut rec = recorder(&p);
        rec.add_round(
            vec![RoundReport {
                results: vec![bw(Some(0))],
                ..Default::default()
            }],
            0.1,
        );
        assert_eq!(exit_code(&rec.document(&[], None), false), base::exit::OK);
        assert_eq!(
            exit_code(&rec.document(&[], Some("interrupted".into())), false),
            base::exit::INTERRUPTED
        );
        let wrong = rec.document(&[bw(Some(3))], Some("interrupted".into()));
        assert_eq!(
            exit_code(&wrong, false),
            base::exit::CHECK_FAILED,
            "wrong bytes outrank an interrupt"
        );
        rec.add_round(
            vec![RoundReport {
                failures: vec![side(Role::Initiator, "x")],
                ..Default::default()
            }],
            0.1,
        );
        let failed = rec.document(&[bw(Some(3))], None);
        assert_eq!(
            exit_code(&failed, false),
            base::exit::CHECK_FAILED,
            "a sweep's failed pair: 1"
        );
        assert_eq!(
            exit_code(&failed, true),
            base::exit::ERROR,
            "the standalone pair's dead peer: 2"
        );
    }

    #[test]
    fn the_exit_code_of_every_combination() {
        let p = plan();
        let rec = recorder(&p);
        for failed in [false, true] {
            for standalone in [false, true] {
                for wrong in [false, true] {
                    for interrupted in [false, true] {
                        let mut doc = rec.document(
                            &[bw(Some(if wrong { 3 } else { 0 }))],
                            interrupted.then(|| "interrupted".into()),
                        );
                        if failed {
                            doc.failed_pairs.push(FailedPair::default());
                        }
                        let want = if failed && standalone {
                            base::exit::ERROR
                        } else if failed || wrong {
                            base::exit::CHECK_FAILED
                        } else if interrupted {
                            base::exit::INTERRUPTED
                        } else {
                            base::exit::OK
                        };
                        assert_eq!(
                            exit_code(&doc, standalone),
                            want,
                            "failed {failed} standalone {standalone} wrong {wrong} interrupted {interrupted}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn checkpoints_are_skipped_while_they_would_cost_more_than_a_tenth() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let p = plan();
        let mut rec = recorder(&p);
        rec.path = Some(&path);
        rec.checkpoint(&[], false);
        assert!(path.exists());
        std::fs::remove_file(&path).unwrap();
        // Pretend the last write took a minute: the next one is not due yet...
        rec.last_cost = Duration::from_secs(60);
        rec.checkpoint(&[], false);
        assert!(!path.exists(), "throttled");
        // ...unless forced.
        rec.checkpoint(&[], true);
        assert!(path.exists());
        let doc: results::Document =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(!doc.complete && doc.incomplete_reason.unwrap().starts_with("checkpoint"));
    }
}
