//! The acceptance run's own record, `OUT/accept.json`: every step's command, result file
//! and outcome, rewritten atomically after each step, so a run killed at any point is
//! resumed (`--resume`) from the last complete document and a reader sees what ran.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub const FILE: &str = "accept.json";
const SCHEMA: u32 = 1;

/// What became of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not run yet.
    Pending,
    /// Ran to the end and wrote its document (exit 0, or 1: measured, a check failed).
    Done,
    /// Ended with an error and no usable document; its checks stay MISSING.
    Failed,
    /// Stopped at its deadline (the stage budget or the time model's bound).
    TimedOut,
    /// Stopped by SIGINT/SIGTERM; `--resume` runs it again.
    Interrupted,
    /// Not run: its stage's budget was spent, or `--stop-on` stopped the run.
    Skipped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub index: usize,
    pub stage: String,
    pub command: String,
    pub json: PathBuf,
    pub feeds: Vec<String>,
    pub projected_s: f64,
    pub status: Status,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub seconds: Option<f64>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub schema_version: u32,
    pub profile: String,
    pub cluster: String,
    pub started: String,
    pub steps: Vec<StepRecord>,
    /// The report's exit code once it ran (0 PASS, 1 FAIL, 2 error).
    #[serde(default)]
    pub verdict_code: Option<i32>,
}

impl State {
    pub fn new(profile: &str, cluster: &str, steps: Vec<StepRecord>) -> State {
        State {
            schema_version: SCHEMA,
            profile: profile.into(),
            cluster: cluster.into(),
            started: results::provenance::now_rfc3339(),
            steps,
            verdict_code: None,
        }
    }

    pub fn path(out: &Path) -> PathBuf {
        out.join(FILE)
    }

    /// Reads the state of a run in `out`, if there is one.
    pub fn read(out: &Path) -> Result<Option<State>> {
        let p = Self::path(out);
        if !p.exists() {
            return Ok(None);
        }
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("{}: cannot read", p.display()))?;
        let s: State = serde_json::from_str(&text).with_context(|| {
            format!(
                "{}: not an acceptance run's state (remove it, or choose another --out)",
                p.display()
            )
        })?;
        if s.schema_version != SCHEMA {
            bail!(
                "{}: state schema {} (this fabcheck writes {SCHEMA}); start afresh in another --out",
                p.display(),
                s.schema_version
            );
        }
        Ok(Some(s))
    }

    /// Writes the state atomically.
    pub fn write(&self, out: &Path) -> Result<()> {
        let p = Self::path(out);
        let bytes = serde_json::to_vec_pretty(self).context("encoding the state")?;
        results::write::write_atomic(&p, &bytes)
            .with_context(|| format!("{}: cannot write", p.display()))
    }

    /// Carries over what a resumed run already did: a step of the same command whose
    /// document is on disk stays done. A plan that changed is refused, so a resumed
    /// verdict never mixes two procedures.
    pub fn resume_from(&mut self, old: &State, out: &Path) -> Result<usize> {
        if old.profile != self.profile || old.cluster != self.cluster {
            bail!(
                "--resume: {} holds a run of profile {} on {}, not {} on {}: resume it with the \
                 same options, or choose another --out",
                out.display(),
                old.profile,
                old.cluster,
                self.profile,
                self.cluster
            );
        }
        let mut kept = 0;
        for s in &mut self.steps {
            let Some(o) = old.steps.iter().find(|o| o.command == s.command) else {
                continue;
            };
            if o.status == Status::Done && out.join(&o.json).is_file() {
                *s = o.clone();
                kept += 1;
            }
        }
        self.started.clone_from(&old.started);
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(i: usize, cmd: &str, status: Status) -> StepRecord {
        StepRecord {
            index: i,
            stage: "links".into(),
            command: cmd.into(),
            json: format!("results/{i:02}.json").into(),
            feeds: vec![],
            projected_s: 1.0,
            status,
            exit_code: None,
            seconds: None,
            note: None,
        }
    }

    #[test]
    fn resume_keeps_only_done_steps_whose_document_is_there() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("results")).unwrap();
        std::fs::write(d.path().join("results/01.json"), "{}").unwrap();
        let old = State::new(
            "p",
            "c",
            vec![
                step(1, "a", Status::Done),
                step(2, "b", Status::Done),
                step(3, "c", Status::Interrupted),
            ],
        );
        old.write(d.path()).unwrap();
        let read = State::read(d.path()).unwrap().unwrap();
        let mut new = State::new(
            "p",
            "c",
            vec![
                step(1, "a", Status::Pending),
                step(2, "b", Status::Pending),
                step(3, "c", Status::Pending),
            ],
        );
        // Step 2's document is gone: it runs again, as does the interrupted one.
        assert_eq!(new.resume_from(&read, d.path()).unwrap(), 1);
        let st: Vec<Status> = new.steps.iter().map(|s| s.status).collect();
        assert_eq!(st, [Status::Done, Status::Pending, Status::Pending]);
        let mut other = State::new("q", "c", vec![]);
        assert!(other.resume_from(&read, d.path()).is_err());
    }
}
