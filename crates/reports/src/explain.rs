//! `aggregate profile explain`: every check of a profile with the run that feeds it, by
//! stage, then the distinct runs once each with the checks each feeds: what an acceptance
//! run must do for the profile to be judged at all (`verdict::feed` holds the table).

use std::fmt::Write;

use verdict::feed::{self, Run, Stage};
use verdict::profile::Profile;

/// The explanation, as plain text for a terminal.
pub fn explain(p: &Profile) -> String {
    let rows = feed::for_profile(p);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "profile {} ({}): {} check(s) and table(s), from {}",
        p.name,
        p.description,
        rows.len(),
        p.source
    );
    let width = rows.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
    for stage in Stage::ALL {
        let of_stage: Vec<&(String, Run)> = rows.iter().filter(|(_, r)| r.stage == stage).collect();
        if of_stage.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\nstage {}", stage.name());
        for (id, run) in of_stage {
            let _ = writeln!(out, "  {id:<width$}  {}", run.command());
        }
    }
    let runs = feed::runs(p);
    let _ = writeln!(out, "\n{} distinct run(s), each once:", runs.len());
    for (i, (run, ids)) in runs.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. [{}] {} ({}) feeds {}",
            i + 1,
            run.stage.name(),
            run.command(),
            run.launch.describe(),
            ids.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_of_roce_100g_is_listed_with_its_run() {
        let p = verdict::profile::load("roce-100g").unwrap();
        let text = explain(&p);
        for c in &p.checks {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{} ", c.id)))
                .unwrap_or_else(|| panic!("{} not listed:\n{text}", c.id));
            assert!(line.contains("bench-"), "{line}");
        }
        assert!(text.contains("lossless-*"), "{text}");
        assert!(text.contains("stage links") && text.contains("stage collectives"));
        // The latency check is fed by a latency sweep (the README's sweep ran write).
        let lat = text
            .lines()
            .find(|l| l.trim_start().starts_with("send-lat-small "))
            .unwrap();
        assert!(
            lat.contains("bench-lat") && lat.contains("--test send"),
            "{lat}"
        );
    }
}
