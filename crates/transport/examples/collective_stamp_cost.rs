//! What per-iteration stamps would cost nccl-tests' time, measured on bench-collective's
//! real call path: `MPI_Allreduce` of float32 sum, prepared once through
//! `collective::mpi::Collectives::prepare`, timed as nccl-tests times it (one timer around
//! the loop, loop time / iterations, mean over ranks), once as the plain loop
//! (`LoopClock::time_loop`, which makes `time_us`) and once with `clock::LoopStamps` (one
//! cycle-counter read and a store per iteration, the per-iteration pass). A second plain
//! loop in the same round gives the noise floor. The three take turns first within a
//! round. This measurement is why bench-collective times the two in separate passes.
//!
//! Run: `cargo build --release -p transport --features mpi --example collective_stamp_cost`, then
//! `mpirun -np 2 target/release/examples/collective_stamp_cost [SIZE_BYTES] [ITERS] [ROUNDS]`
//! (defaults 8, 20000, 21). Rank 0 prints the medians and the ratios; the last line is
//! `stamp_cost size_bytes=.. ranks=.. plain_us=.. stamped_us=.. ratio=.. noise_ratio=..`.

use std::sync::atomic::AtomicU64;

use base::clock::{LoopClock, LoopStamps};
use mpi::collective::SystemOperation;
use mpi::traits::*;
use transport::collective::mpi::{Buffers, Call, Collectives};
use transport::collective::{DataType, Primitive, RedOp};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    PlainA,
    Stamped,
    PlainB,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let arg = |i: usize, default: u64| -> u64 {
        std::env::args()
            .nth(i)
            .map(|s| s.parse().expect("a number"))
            .unwrap_or(default)
    };
    let (size, iters, rounds) = (arg(1, 8), arg(2, 20_000), arg(3, 21));
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let ranks = world.size() as f64;
    let colls = Collectives::new(&world);
    let count = (size / 4) as usize;
    let send = vec![1u8; count * 4];
    let mut recv = vec![0u8; count * 4];
    let call = Call {
        primitive: Primitive::AllReduce,
        count,
        datatype: DataType::Float32,
        op: RedOp::Sum,
        root: 0,
    };
    let prepared = colls
        .prepare(
            &call,
            Buffers::Separate {
                send: &send,
                recv: &mut recv,
            },
        )
        .expect("a valid call");
    let run = || prepared.call();
    for _ in 0..iters / 10 {
        run().expect("warm-up call");
    }
    let clock = LoopClock::new();
    let progress = AtomicU64::new(0);
    let kinds = [Kind::PlainA, Kind::Stamped, Kind::PlainB];
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds as usize {
        for k in 0..3 {
            let kind = kinds[(round + k) % 3];
            world.barrier();
            let ns = if kind == Kind::Stamped {
                LoopStamps::run(&clock, iters as usize, &progress, run)
                    .expect("stamped loop")
                    .total_ns(&clock)
            } else {
                clock.time_loop(iters, &progress, run).expect("plain loop")
            };
            let mine = ns as f64 / iters as f64 / 1000.0;
            let mut sum = 0f64;
            world.all_reduce_into(&mine, &mut sum, SystemOperation::sum());
            let i = kinds.iter().position(|x| *x == kind).expect("a kind");
            times[i].push(sum / ranks);
        }
    }
    if world.rank() == 0 {
        let [mut a, mut s, mut b] = times;
        let (ma, ms, mb) = (median(&mut a), median(&mut s), median(&mut b));
        println!(
            "# MPI_Allreduce float32 sum {size} B, {} ranks, {iters} iterations x {rounds} rounds",
            world.size()
        );
        println!(
            "# median per-iteration time (us): plain {ma:.4}, stamped {ms:.4}, plain again {mb:.4}"
        );
        println!(
            "# stamped / plain = {:.4}; plain again / plain = {:.4} (the noise floor)",
            ms / ma,
            mb / ma
        );
        println!(
            "stamp_cost size_bytes={size} ranks={} plain_us={ma:.4} stamped_us={ms:.4} ratio={:.4} noise_ratio={:.4}",
            world.size(),
            ms / ma,
            mb / ma
        );
    }
}
