//! `fabcheck accept`: the delivery's procedure in one run. The profile says what must be
//! judged; `verdict::feed` says which run feeds each check; the steps run stage by stage
//! (config, links, the retest of suspects, collectives, load), each an ordinary command of
//! the suite; `aggregate report` judges everything and signs it. The exit code is the
//! verdict's (0 PASS, 1 FAIL, 2 error, 130 interrupted: `--resume` goes on).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use verdict::feed::Stage;
use verdict::profile::Profile;

use crate::cluster::Cluster;
use crate::execute;
use crate::model::show;
use crate::plan::{self, Settings, Step};
use crate::state::{State, Status, StepRecord};

/// Everything `accept` was asked, resolved at the edge (paths absolute).
#[derive(Debug, Clone)]
pub struct Options {
    /// A shipped profile's name or a TOML file's absolute path.
    pub profile: String,
    pub cluster: Cluster,
    pub settings: Settings,
    pub out: PathBuf,
    pub sign: Option<PathBuf>,
    pub identity: String,
    pub stages: Vec<Stage>,
    pub budgets: BTreeMap<Stage, Duration>,
    pub dry_run: bool,
    pub resume: bool,
    /// Stop before the links when the configuration stage finds a fault.
    pub stop_on_config: bool,
    /// Retest the links' suspects next to known-good nodes.
    pub retest: bool,
}

/// What an acceptance run ended with.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The verdict's exit code (0 PASS, 1 FAIL, 2 error, 130 interrupted).
    pub code: i32,
    /// The suspects the report named (`SUSPECT` lines).
    pub suspects: Vec<String>,
    /// Steps that ended without a document (their result files).
    pub not_done: Vec<String>,
    /// "4 step(s)": what ran.
    pub steps_done: String,
}

/// The whole procedure; returns the exit code.
pub fn run(o: &Options) -> Result<i32> {
    Ok(execute(o)?.code)
}

/// The whole procedure, with what the report found.
pub fn execute(o: &Options) -> Result<Outcome> {
    let profile = verdict::profile::load(&o.profile)?;
    let steps = plan::steps(&profile, &o.cluster, &o.settings, &o.stages);
    if steps.is_empty() {
        bail!(
            "profile {} asks for no run in the stages chosen ({}): see `aggregate profile \
             explain {}`",
            profile.name,
            o.stages
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(","),
            o.profile
        );
    }
    if o.dry_run {
        print!("{}", dry_run(&profile, o, &steps));
        return Ok(Outcome::default());
    }
    let mut state = prepare(o, &profile, &steps)?;
    let stop = execute::interrupt_flag()?;
    println!(
        "acceptance: profile {} on {}; {} step(s), projected {}; state in {}",
        profile.name,
        o.cluster.describe(),
        steps.len(),
        show(steps.iter().map(|s| s.projected).sum()),
        State::path(&o.out).display()
    );
    let mut halted: Option<String> = None;
    for stage in Stage::ALL {
        if !steps.iter().any(|s| s.stage == stage) {
            continue;
        }
        if let Some(code) = run_stage(o, stage, &steps, &mut state, &halted, &stop)? {
            return Ok(Outcome {
                code,
                ..Outcome::default()
            });
        }
        if stage == Stage::Config && o.stop_on_config {
            halted = config_fault(&state, &steps);
        }
        if stage == Stage::Links && o.retest && halted.is_none() {
            retest(o, &steps, &mut state, &stop)?;
        }
        state.write(&o.out)?;
    }
    if let Some(why) = &halted {
        println!("stopped: {why}; the report judges what ran");
    }
    judge(o, &mut state, &stop)
}

/// The steps of one stage, each kept (done before an interruption), skipped (halted, not
/// runnable through this launcher, the stage's budget spent) or run to its deadline.
/// `Some(exit code)` when an interruption ended the run.
fn run_stage(
    o: &Options,
    stage: Stage,
    steps: &[Step],
    state: &mut State,
    halted: &Option<String>,
    stop: &AtomicBool,
) -> Result<Option<i32>> {
    let of_stage: Vec<&Step> = steps.iter().filter(|s| s.stage == stage).collect();
    let budget = o.budgets.get(&stage).copied();
    let mut spent = Duration::ZERO;
    for (i, step) in of_stage.iter().enumerate() {
        let at = format!("[{} {}/{}]", stage.name(), i + 1, of_stage.len());
        let rec = &mut state.steps[step.index - 1];
        let left = budget.map(|b| b.saturating_sub(spent));
        if let Some(why) = not_to_run(rec, step, halted, left, stage) {
            if let Some(line) = why {
                println!("{at} {line}");
            }
            continue;
        }
        let deadline = deadline_of(step.projected, left);
        println!(
            "{at} {} (projected {}, stopped after {})",
            step.command(),
            show(step.projected),
            show(deadline)
        );
        let ended = execute::run_step(
            &step.argv,
            &o.out,
            &o.out.join(step.log()),
            &o.out.join(&step.json),
            deadline,
            stop,
        )?;
        spent += Duration::from_secs_f64(ended.last.seconds);
        record(rec, &ended);
        report_step(&o.out, step, rec);
        state.write(&o.out)?;
        if ended.last.status == Status::Interrupted {
            return Ok(Some(interrupted(state, o)?));
        }
    }
    Ok(None)
}

/// Whether a step is left alone, recorded as such: `None` to run it; `Some(line)` not to,
/// with the line to print (none for a step skipped after a halt, said once at the end).
fn not_to_run(
    rec: &mut StepRecord,
    step: &Step,
    halted: &Option<String>,
    left: Option<Duration>,
    stage: Stage,
) -> Option<Option<String>> {
    if rec.status == Status::Done {
        return Some(Some(format!(
            "kept from the interrupted run: {}",
            rec.json.display()
        )));
    }
    let (why, line) = if let Some(why) = halted {
        (why.clone(), None)
    } else if let Some(why) = &step.not_here {
        (why.clone(), Some(format!("not run: {why}")))
    } else if left == Some(Duration::ZERO) {
        (
            format!("the {} stage's --budget was spent", stage.name()),
            Some("skipped: budget spent".to_string()),
        )
    } else {
        return None;
    };
    rec.status = Status::Skipped;
    rec.note = Some(why);
    Some(line)
}

/// The report over every document, the retest's outcome, the verdict kept in the state.
fn judge(o: &Options, state: &mut State, stop: &AtomicBool) -> Result<Outcome> {
    let (code, suspects) = final_report(o, stop)?;
    if let Some(before) = retested_suspects(o, state) {
        print!("{}", retest_outcome(&before, &suspects));
    }
    state.verdict_code = Some(code);
    state.write(&o.out)?;
    let done = |s: &&StepRecord| s.status == Status::Done;
    Ok(Outcome {
        code,
        suspects,
        not_done: state
            .steps
            .iter()
            .filter(|s| !done(s))
            .map(|s| s.json.display().to_string())
            .collect(),
        steps_done: format!("{} step(s)", state.steps.iter().filter(done).count()),
    })
}

/// A step's deadline: its stage's budget left, else three times its projection (at least
/// two minutes more than it): a step never runs unbounded.
fn deadline_of(projected: Duration, budget_left: Option<Duration>) -> Duration {
    let model = (projected * 3).max(projected + Duration::from_secs(120));
    match budget_left {
        Some(b) => b.min(model),
        None => model,
    }
}

fn record(rec: &mut StepRecord, a: &execute::Attempts) {
    let e = &a.last;
    rec.status = e.status;
    rec.exit_code = e.exit_code;
    rec.seconds = Some(e.seconds);
    let note = match e.status {
        Status::TimedOut => Some("stopped at its deadline; its checks are MISSING".to_string()),
        Status::Failed => Some("no usable document; its checks are MISSING".to_string()),
        _ => None,
    };
    let relaunch = (!a.crashed.is_empty()).then(|| {
        let each: Vec<String> = a
            .crashed
            .iter()
            .map(|(e, kept)| {
                let name = kept.file_name().unwrap_or_default().to_string_lossy();
                format!("after {:.0}s ({}), log {name}", e.seconds, e.how())
            })
            .collect();
        format!(
            "launched {} times: crashed before writing its document {}",
            a.crashed.len() + 1,
            each.join("; ")
        )
    });
    rec.note = match (relaunch, note) {
        (Some(r), Some(n)) => Some(format!("{r}; {n}")),
        (r, n) => r.or(n),
    };
}

fn report_step(out: &Path, step: &Step, rec: &StepRecord) {
    let took = show(Duration::from_secs_f64(rec.seconds.unwrap_or(0.0)));
    match rec.status {
        Status::Done => println!(
            "  done in {took} (exit {}): {}",
            rec.exit_code.unwrap_or(0),
            step.json.display()
        ),
        _ => {
            println!(
                "  {:?} after {took} (exit {}): its checks stay MISSING; log {}",
                rec.status,
                rec.exit_code.map_or("none".to_string(), |c| c.to_string()),
                step.log().display()
            );
            for line in execute::tail(&out.join(step.log()), 5).lines() {
                println!("    | {line}");
            }
        }
    }
}

fn interrupted(state: &mut State, o: &Options) -> Result<i32> {
    for s in &mut state.steps {
        if s.status == Status::Pending {
            s.status = Status::Interrupted;
        }
    }
    state.write(&o.out)?;
    eprintln!(
        "fabcheck: interrupted; what was measured is kept in {}. Go on with the same \
         command and --resume",
        o.out.display()
    );
    Ok(130)
}

/// Creates the output directory and the state, or resumes the one there.
fn prepare(o: &Options, profile: &Profile, steps: &[Step]) -> Result<State> {
    std::fs::create_dir_all(o.out.join("results"))
        .with_context(|| format!("{}: cannot create", o.out.display()))?;
    let records = steps
        .iter()
        .map(|s| StepRecord {
            index: s.index,
            stage: s.stage.name().into(),
            command: s.command(),
            json: s.json.clone(),
            feeds: s.feeds.clone(),
            projected_s: s.projected.as_secs_f64(),
            status: Status::Pending,
            exit_code: None,
            seconds: None,
            note: None,
        })
        .collect();
    let mut state = State::new(&profile.name, &o.cluster.describe(), records);
    match (State::read(&o.out)?, o.resume) {
        (Some(old), true) => {
            let kept = state.resume_from(&old, &o.out)?;
            println!(
                "resuming: {kept} step(s) kept from {}",
                State::path(&o.out).display()
            );
        }
        (Some(_), false) => bail!(
            "{} holds an acceptance run already: add --resume to go on with it, or choose \
             another --out",
            o.out.display()
        ),
        (None, true) => bail!(
            "--resume: {} holds no acceptance run ({} is missing); drop --resume to start one",
            o.out.display(),
            State::path(&o.out).display()
        ),
        (None, false) => {}
    }
    state.write(&o.out)?;
    Ok(state)
}

/// Why `--stop-on config` stops: an audit that failed its checks or did not run.
fn config_fault(state: &State, steps: &[Step]) -> Option<String> {
    steps
        .iter()
        .filter(|s| s.stage == Stage::Config)
        .map(|s| &state.steps[s.index - 1])
        .find(|r| r.status != Status::Done || r.exit_code != Some(0))
        .map(|r| {
            format!(
                "--stop-on config: the configuration stage found a fault ({} ended {:?}, exit {})",
                r.json.display(),
                r.status,
                r.exit_code.map_or("none".into(), |c| c.to_string())
            )
        })
}

/// The retest stage: a report over the links so far names suspect pairs
/// (`suspects.pairs`, each suspect paired with known-good nodes); they are measured again
/// with the bandwidth sweep's own command, so the final report holds both runs.
fn retest(o: &Options, steps: &[Step], state: &mut State, stop: &AtomicBool) -> Result<()> {
    let Some(sweep) = steps.iter().find(|s| {
        s.stage == Stage::Links
            && s.run.tool == "bench-bw"
            && state.steps[s.index - 1].status == Status::Done
    }) else {
        return Ok(());
    };
    let Some(pairs) = suspect_pairs(o, stop)? else {
        println!("[retest] no suspect after the links: nothing to retest");
        return Ok(());
    };
    let step = retest_step(sweep, &pairs, state.steps.len() + 1);
    let command = step.command();
    if let Some(done) = state
        .steps
        .iter()
        .find(|r| r.feeds == ["retest"] && r.status == Status::Done)
    {
        println!(
            "[retest] kept from the interrupted run: {}",
            done.json.display()
        );
        return Ok(());
    }
    println!("[retest] the suspects next to known-good nodes: {command}");
    let ended = execute::run_step(
        &step.argv,
        &o.out,
        &o.out.join(step.log()),
        &o.out.join(&step.json),
        deadline_of(sweep.projected, None),
        stop,
    )?;
    let mut rec = StepRecord {
        index: step.index,
        stage: "retest".into(),
        command,
        json: step.json.clone(),
        feeds: step.feeds.clone(),
        projected_s: step.projected.as_secs_f64(),
        status: Status::Pending,
        exit_code: None,
        seconds: None,
        note: None,
    };
    record(&mut rec, &ended);
    report_step(&o.out, &step, &rec);
    state.steps.push(rec);
    state.write(&o.out)?;
    Ok(())
}

/// A report over the results so far (`links-report/`): the file of suspect pairs it
/// wrote, if it named any.
fn suspect_pairs(o: &Options, stop: &AtomicBool) -> Result<Option<PathBuf>> {
    let scratch = o.out.join("links-report");
    let mut argv = vec![
        o.settings.bin.join("aggregate").display().to_string(),
        "report".into(),
        "results".into(),
        "--profile".into(),
        o.profile.clone(),
        "--out".into(),
        scratch.display().to_string(),
        "--force".into(),
    ];
    if let Some(p) = &o.settings.fabric_plan {
        argv.extend(["--plan".into(), p.display().to_string()]);
    }
    let log = o.out.join("links-report.log");
    execute::run(&argv, &o.out, &log, None, Duration::from_secs(600), stop)?;
    let pairs = scratch.join("suspects.pairs");
    Ok(pairs.is_file().then_some(pairs))
}

/// The bandwidth sweep's own command over the suspect pairs only, as step `index`.
fn retest_step(sweep: &Step, pairs: &Path, index: usize) -> Step {
    let json = PathBuf::from("results").join(format!("{index:02}-retest-bench-bw.json"));
    let mut argv = sweep.argv.clone();
    let mut i = 0;
    while i + 1 < argv.len() {
        match argv[i].as_str() {
            "--pattern" => argv[i + 1] = format!("file:{}", pairs.display()),
            "--json" => argv[i + 1] = json.display().to_string(),
            _ => {}
        }
        i += 1;
    }
    Step {
        index,
        stage: Stage::Links,
        run: sweep.run.clone(),
        feeds: vec!["retest".into()],
        argv,
        json,
        not_here: None,
        // A retest is a sweep over fewer pairs: bounded by the sweep's own projection.
        projected: sweep.projected,
    }
}

/// The suspects the links' own report named, when a retest of them ran.
fn retested_suspects(o: &Options, state: &State) -> Option<Vec<String>> {
    state
        .steps
        .iter()
        .any(|r| r.feeds == ["retest"] && r.status == Status::Done)
        .then(|| {
            let log = std::fs::read_to_string(o.out.join("links-report.log")).unwrap_or_default();
            log.lines()
                .filter_map(|l| l.strip_prefix("SUSPECT"))
                .map(|l| l.trim().to_string())
                .collect()
        })
}

/// What the retest did to the links' suspects: each one the final report (both runs
/// together) names again is confirmed; the others were cleared by their retest.
fn retest_outcome(before: &[String], after: &[String]) -> String {
    // A suspect is its kind and part: `link g0n1 rail1 - g1n1 rail1: explains ...`.
    let part = |s: &str| s.split(':').next().unwrap_or(s).trim().to_string();
    let now: Vec<String> = after.iter().map(|s| part(s)).collect();
    let (confirmed, cleared): (Vec<String>, Vec<String>) = before
        .iter()
        .map(|s| part(s))
        .partition(|p| now.contains(p));
    let mut out = format!(
        "[retest] {} of {} suspect(s) confirmed next to known-good nodes",
        confirmed.len(),
        before.len()
    );
    if !confirmed.is_empty() {
        out.push_str(&format!(": {}", confirmed.join("; ")));
    }
    out.push('\n');
    if !cleared.is_empty() {
        out.push_str(&format!(
            "[retest] cleared by the retest (not named with both runs judged): {}\n",
            cleared.join("; ")
        ));
    }
    out
}

/// `aggregate report` over every document, its output on this terminal; its exit code
/// is the run's, with the suspects it named.
fn final_report(o: &Options, stop: &AtomicBool) -> Result<(i32, Vec<String>)> {
    let mut cmd = Command::new(o.settings.bin.join("aggregate"));
    cmd.current_dir(&o.out).args([
        "report",
        "results",
        "--profile",
        &o.profile,
        "--out",
        "report",
        "--force",
        // A rank's broken file must not hide every other result; the report names it.
        "--skip-bad",
    ]);
    if let Some(p) = &o.settings.fabric_plan {
        cmd.arg("--plan").arg(p);
    }
    if let Some(k) = &o.sign {
        cmd.arg("--sign").arg(k).args(["--identity", &o.identity]);
    }
    println!(
        "[report] aggregate report results --profile {} --out report",
        o.profile
    );
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", o.settings.bin.join("aggregate").display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    let suspects = text
        .lines()
        .filter_map(|l| l.strip_prefix("SUSPECT"))
        .map(|l| l.trim().to_string())
        .collect();
    println!(
        "report bundle: {}",
        o.out.join("report").join("report.html").display()
    );
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok((130, suspects));
    }
    Ok((out.status.code().unwrap_or(2), suspects))
}

/// `--dry-run`: every command, by stage, with the projection of each and of each stage.
pub fn dry_run(profile: &Profile, o: &Options, steps: &[Step]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "acceptance plan: profile {} on {}",
        profile.name,
        o.cluster.describe()
    );
    for stage in Stage::ALL {
        let of: Vec<&Step> = steps.iter().filter(|x| x.stage == stage).collect();
        if of.is_empty() {
            continue;
        }
        let total: Duration = of.iter().map(|x| x.projected).sum();
        let budget = o
            .budgets
            .get(&stage)
            .map(|b| format!(", budget {}", show(*b)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "\nstage {} (projected {}{budget})",
            stage.name(),
            show(total)
        );
        for x in of {
            if let Some(why) = &x.not_here {
                let _ = writeln!(
                    s,
                    "  {}. {} ({why}; feeds {})",
                    x.index,
                    x.run.tool,
                    x.feeds.join(", ")
                );
                continue;
            }
            let _ = writeln!(s, "  {}. {}", x.index, x.command());
            let _ = writeln!(
                s,
                "     projected {}; feeds {}",
                show(x.projected),
                x.feeds.join(", ")
            );
        }
        if stage == Stage::Links && o.retest {
            let _ = writeln!(
                s,
                "  then: the suspects of the links, if any, retested next to known-good nodes (--pattern file:links-report/suspects.pairs)"
            );
        }
    }
    let total: Duration = steps.iter().map(|x| x.projected).sum();
    let _ = writeln!(s, "\ntotal projected: {}", show(total));
    let _ = writeln!(
        s,
        "then: aggregate report results --profile {} --out report{}",
        o.profile,
        if o.sign.is_some() { " --sign KEY" } else { "" }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retest_confirms_or_clears_each_suspect_by_its_part() {
        let before = [
            "one_way g1n2 rail0 -> g0n3 rail0: explains 1 of the 26 bad links".to_string(),
            "node g0n2: explains 6 of 7".to_string(),
        ];
        let after =
            ["one_way g1n2 rail0 -> g0n3 rail0: explains 2 of the 28 bad links".to_string()];
        let text = retest_outcome(&before, &after);
        assert!(
            text.contains("1 of 2 suspect(s) confirmed next to known-good nodes: one_way g1n2 rail0 -> g0n3 rail0"),
            "{text}"
        );
        assert!(text.contains("cleared by the retest (not named with both runs judged): node g0n2"));
    }

    #[test]
    fn a_step_is_bounded_by_its_budget_or_its_projection() {
        let p = Duration::from_secs(600);
        assert_eq!(deadline_of(p, None), Duration::from_secs(1800));
        assert_eq!(
            deadline_of(Duration::from_secs(10), None),
            Duration::from_secs(130)
        );
        assert_eq!(
            deadline_of(p, Some(Duration::from_secs(60))),
            Duration::from_secs(60)
        );
    }
}
