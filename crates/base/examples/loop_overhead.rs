//! Prints what each piece of the latency loop costs on this machine: the loop clock's raw
//! read, `Instant::now()` (for comparison), a histogram record, and what the timed loop adds
//! to each iteration (`loop_overhead_ns`). Run: `cargo run --release --example loop_overhead -p base`.

use std::hint::black_box;
use std::time::Instant;

use base::clock::LoopClock;
use results::LatencyHistogram;

const N: u32 = 2_000_000;

fn per_iter(f: impl Fn()) -> f64 {
    let t = Instant::now();
    for _ in 0..N {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(N)
}

fn main() {
    let clock = LoopClock::new();
    let raw = per_iter(|| {
        black_box(clock.raw());
    });
    let instant = per_iter(|| {
        black_box(Instant::now());
    });
    let mut h = LatencyHistogram::new();
    let t = Instant::now();
    for i in 0..u64::from(N) {
        h.record(black_box(1000 + (i & 1023)));
    }
    let record = t.elapsed().as_nanos() as f64 / f64::from(N);
    println!("clock source          : {}", LoopClock::source());
    println!("loop clock raw read   : {raw:.1} ns");
    println!("Instant::now()        : {instant:.1} ns");
    println!("histogram record      : {record:.1} ns");
    println!(
        "timed-loop overhead   : {:.1} ns per iteration (1 clock read + 1 store = loop_overhead_ns)",
        clock.loop_overhead_ns()
    );
}
