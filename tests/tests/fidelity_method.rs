//! The fidelity scripts' shared method (scripts/lib/fidelity.py) on rounds whose truth is
//! known: a difference it must see, one it must not claim, noise it must not hide behind,
//! and input it must refuse. Issue 34: a verdict a rerun cannot contradict.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use integration::require;
use serde_json::Value;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/lib/fidelity.py")
}

/// One case: rounds of reference, ours, reference. Each round has its own level (the
/// machine's drift, up to 20 %), which pairing must cancel; `ours` is the true ratio,
/// `noise` each run's own jitter, `second` what the second reference run is over the
/// first (a warm-up effect the A/A ratio must show), `aa_noise` the second run's jitter.
struct Case {
    what: &'static str,
    rounds: u32,
    ours: f64,
    noise: f64,
    second: f64,
    aa_noise: f64,
}

fn lines(cases: &[Case]) -> String {
    // Deterministic: each case's rounds are the same on every run of the test.
    let mut rng = synth::Rng::new(7);
    let mut sym = || 2.0 * rng.unit() - 1.0;
    let mut s = String::from("# WHAT ROUND WHO VALUE\n");
    for c in cases {
        for r in 1..=c.rounds {
            let level = 100.0 * (1.0 + 0.2 * sym().abs());
            let a = level * (1.0 + c.noise * sym());
            let o = level * c.ours * (1.0 + c.noise * sym());
            let b = level * c.second * (1.0 + c.aa_noise * sym());
            s += &format!(
                "{} {r} ref {a}\n{} {r} ours {o}\n{} {r} ref {b}\n",
                c.what, c.what, c.what
            );
        }
    }
    s
}

fn judge(input: &str) -> (i32, String, Value) {
    require("python3", "python3");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("f.json");
    let mut child = Command::new("python3")
        .arg(script())
        .args(["--title", "test", "--json"])
        .arg(&json)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = std::fs::read_to_string(&json)
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), text, doc)
}

#[test]
fn verdicts_follow_the_interval_and_the_reference_against_itself() {
    let c = |what, rounds, ours, noise, second, aa_noise| Case {
        what,
        rounds,
        ours,
        noise,
        second,
        aa_noise,
    };
    let cases = [
        // The same timing: within, though rounds drift by 20 %.
        c("same", 9, 1.0, 0.01, 1.0, 0.01),
        // Reliably slower, reliably faster: above, below.
        c("slow", 9, 1.3, 0.01, 1.0, 0.01),
        c("fast", 9, 0.7, 0.01, 1.0, 0.01),
        // 6 % over, with noise that makes the interval straddle 5 %: undecided.
        c("straddle", 9, 1.06, 0.04, 1.0, 0.04),
        // The reference's second run 7 % over its first every round: the A/A ratio
        // shows it, the tolerance widens to it, and ours at the mean of the two is within.
        c("warmup", 9, 1.035, 0.005, 1.07, 0.005),
        // A reference that disagrees with itself by up to 40 %: no verdict at all.
        c("noisy", 9, 1.0, 0.01, 1.0, 0.4),
        // Three rounds: too few to judge.
        c("few", 3, 1.0, 0.01, 1.0, 0.01),
    ];
    let (code, text, doc) = judge(&lines(&cases));
    assert_eq!(code, 0, "{text}");
    let verdict = |w: &str| doc["rows"][w]["verdict"].as_str().unwrap().to_string();
    assert_eq!(verdict("same"), "within", "{text}");
    assert_eq!(verdict("slow"), "above", "{text}");
    assert_eq!(verdict("fast"), "below", "{text}");
    assert_eq!(verdict("straddle"), "undecided", "{text}");
    assert_eq!(verdict("warmup"), "within", "{text}");
    assert!(
        doc["rows"]["warmup"]["tolerance"].as_f64().unwrap() > 0.06,
        "{text}"
    );
    assert_eq!(verdict("noisy"), "undecided (A/A noise)", "{text}");
    assert_eq!(verdict("few"), "undecided (rounds)", "{text}");
    // Pairing: the same case's ratio is near 1 although the rounds' levels differ by 20 %.
    let lo = doc["rows"]["same"]["ratio_interval"][0].as_f64().unwrap();
    let hi = doc["rows"]["same"]["ratio_interval"][1].as_f64().unwrap();
    assert!(lo > 0.98 && hi < 1.02, "{text}");
    // The table names every row with its verdict.
    for w in ["same", "slow", "fast", "straddle", "warmup", "noisy", "few"] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(w)),
            "{text}"
        );
    }
}

#[test]
fn the_same_rounds_give_the_same_figures_twice() {
    let cases = [Case {
        what: "x",
        rounds: 7,
        ours: 1.02,
        noise: 0.03,
        second: 1.0,
        aa_noise: 0.03,
    }];
    let input = lines(&cases);
    let (_, first, _) = judge(&input);
    let (_, second, _) = judge(&input);
    assert_eq!(first, second);
}

#[test]
fn malformed_rounds_are_refused_with_the_line() {
    for (input, want) in [
        ("8 1 ref 1.0\n8 1 theirs 2.0\n", "line 2"),
        ("8 one ref 1.0\n", "line 1: round and value must be numbers"),
        ("# only a comment\n", "no rounds"),
    ] {
        let (code, text, _) = judge(input);
        assert_eq!(code, 2, "{input:?}: {text}");
        assert!(text.contains(want), "{input:?}: {text}");
    }
}
