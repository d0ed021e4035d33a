//! Scale benchmark of the structure localiser and the cabling checks (issue 18, item 9):
//! a generated rail-optimised fabric (default 8 groups of 128 nodes, 8 rails, 8 spines:
//! 8.4 million directed pair results) with mixed faults from a seed, its plan and every
//! NIC's neighbour; prints the time of each phase and whether exactly the injected
//! faults were named. Run by scripts/bench-structure-scale.sh under /usr/bin/time -v.
//!
//! `structure_scale [GROUPS] [NODES_PER_GROUP] [RAILS] [SPINES] [FAULTS] [SEED]`

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use diagnosis::structure::observe::Observed;
use diagnosis::structure::topology::{Facts, Found, Topology};
use diagnosis::structure::{cabling, named, run};
use synth::fabric::{self, FabricSpec};
use verdict::profile::MatrixSettings;

fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|x| {
            x.parse().unwrap_or_else(|_| {
                eprintln!("usage: structure_scale [GROUPS] [NODES_PER_GROUP] [RAILS] [SPINES] [FAULTS] [SEED]");
                std::process::exit(2)
            })
        })
        .collect();
    let arg = |i: usize, d: u64| a.get(i).copied().unwrap_or(d);
    let mut spec = FabricSpec::new(
        arg(0, 8) as u32,
        arg(1, 128) as u32,
        arg(2, 8) as u32,
        arg(3, 8) as u32,
    );
    spec.rack_nodes = 16.min(spec.nodes_per_group);
    spec.seed = arg(5, 7);
    let faults = fabric::random_faults(&spec, arg(4, 20) as usize, spec.seed);

    let t0 = Instant::now();
    let c = fabric::compact(&spec, &faults);
    let plan = fabric::plan(&spec);
    let mut found = HashMap::new();
    let mut nics: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..spec.nodes() {
        for nb in fabric::neighbors(&spec, &faults, i) {
            let nic = nb.interface.clone().unwrap();
            nics.entry(spec.node(i)).or_default().insert(nic.clone());
            found.insert(
                (spec.node(i), nic),
                Found {
                    switch: nb.system_name.unwrap(),
                    port: nb.port_id,
                    alias: None,
                    width: None,
                    speed: None,
                    source: "lldp".into(),
                },
            );
        }
    }
    let links = fabric::fabric(&spec, &faults).links;
    let generated = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let facts = Facts {
        nodes: c.nodes.clone(),
        nics,
        plan: Some(&plan),
        found,
        latencies: vec![],
        disagreements: vec![],
    };
    let t = Topology::build(&facts);
    let mut o = Observed::new(0, 0);
    o.n = c.nodes.len();
    o.rails = c.values.len();
    o.values = c.values;
    o.flows = c.flows.into_iter().collect();
    let diffs = cabling::check(&t, Some(&plan), &links);
    let t_cabling = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let loc = run(&o, &t, &MatrixSettings::default(), &diffs);
    let t_localise = t2.elapsed().as_secs_f64();

    let got = named(&t, &diffs, &loc);
    let want: BTreeSet<(String, String)> = faults.iter().map(|f| f.expected(&spec)).collect();
    let cells: u64 = loc.cells;
    println!(
        "fabric: {} groups x {} nodes x {} rails, {} spines: {} nodes, {} directed pair results, {} faults (seed {})",
        spec.groups, spec.nodes_per_group, spec.rails, spec.spines, spec.nodes(), cells, faults.len(), spec.seed
    );
    println!("generate: {generated:.3} s (not part of the product)");
    println!(
        "topology + cabling checks: {t_cabling:.3} s ({} difference(s))",
        diffs.len()
    );
    println!(
        "localise: {t_localise:.3} s ({} bad directed links, {} part(s) named)",
        loc.bad_cells,
        loc.picks.len()
    );
    println!(
        "total (topology, cabling, localise): {:.3} s",
        t_cabling + t_localise
    );
    if got == want {
        println!("named exactly the {} injected faults", want.len());
    } else {
        for x in want.difference(&got) {
            println!("MISSED   {} {}", x.0, x.1);
        }
        for x in got.difference(&want) {
            println!("EXTRA    {} {}", x.0, x.1);
        }
        for f in &faults {
            println!("injected {f:?}");
        }
        std::process::exit(1);
    }
}
