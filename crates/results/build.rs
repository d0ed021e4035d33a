//! Stamps the git commit into the library so every JSON document says which code measured it.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FABCHECK_GIT_COMMIT={commit}");
    // Re-stamp when HEAD moves (checkout, commit), not on every edit. Worktrees keep HEAD
    // in their own git dir, so ask git where it is.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            // Absolute: a relative common dir is relative to this script's working
            // directory (crates/results), not to the git dir. Joined to the git dir it
            // named a file that does not exist, and cargo reran this script, so rebuilt
            // every crate above `results`, on every invocation.
            if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            {
                println!(
                    "cargo:rerun-if-changed={}",
                    std::path::Path::new(&common).join(&r).display()
                );
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
