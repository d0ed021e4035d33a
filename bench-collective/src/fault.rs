//! Test hooks: `FABCHECK_COLLECTIVE_FAULT=die:R|hang:R|corrupt:R` makes rank R abort, stop
//! taking part, or corrupt one checked element, so the end-to-end tests can prove that
//! faults end the run and that `--check` finds wrong data.
//!
//! Compiled into debug builds only (the builds the tests run): a release binary has no
//! hook, does not read the variable, and does not contain its name.

/// What a rank was told to do wrong.
#[cfg_attr(not(debug_assertions), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Die,
    Hang,
    Corrupt,
}

/// The fault the environment asks of job rank `rank`, if any.
#[cfg(debug_assertions)]
pub fn for_rank(rank: u32) -> Option<Fault> {
    let v = std::env::var("FABCHECK_COLLECTIVE_FAULT").ok()?;
    let (kind, r) = v.split_once(':')?;
    if r.parse::<u32>().ok()? != rank {
        return None;
    }
    match kind {
        "die" => Some(Fault::Die),
        "hang" => Some(Fault::Hang),
        "corrupt" => Some(Fault::Corrupt),
        _ => None,
    }
}

/// Release builds: no hook.
#[cfg(not(debug_assertions))]
pub fn for_rank(_rank: u32) -> Option<Fault> {
    None
}

/// Acts on a `die` or `hang` fault before a size is measured.
pub fn before_size(fault: Option<Fault>, rank: u32) {
    match fault {
        Some(Fault::Die) => {
            eprintln!("rank {rank}: test fault: dying");
            std::process::abort();
        }
        Some(Fault::Hang) => {
            eprintln!("rank {rank}: test fault: no longer taking part");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        _ => {}
    }
}
