//! `--pattern isolation`: every rank tries to reach every other on the data fabric (TCP
//! from its `--bind-addr`, and an ICMP echo where the host allows one), as a tenant's job
//! would, while the ranks meet over the launcher's network (`traffic::reach`). With the
//! tenants (`--tenants`, or the plan's `[[tenant]]` tables) the root prints the tenant by
//! tenant picture and every pair that crossed between tenants or failed inside one, and
//! exits 1 on either; `aggregate` judges the same document for the report.

use std::time::Duration;

use p2p::pattern::RailMode;
use p2p_cli::P2pArgs;
use results::reach::Judged;
use results::tenants::Tenants;
use traffic::reach::{ReachSettings, Swept, ATTEMPT_TIMEOUT};

/// The least the job's waits allow (barriers, gathers) while the ranks make attempts.
const JOB_WAIT: Duration = Duration::from_secs(300);

fn refuse(what: &str) -> i32 {
    eprintln!("bench-lat: error: {what}");
    base::exit::ERROR
}

/// Runs the isolation sweep under mpirun/srun.
pub fn run(a: &P2pArgs) -> i32 {
    if a.host.is_some() || a.serve || a.hosts.is_some() {
        return refuse(
            "--pattern isolation runs under mpirun or srun (one rank per rail of every node), \
             not with a host, --serve or --hosts",
        );
    }
    if let Err(e) = base::output::check_writable(a.json.as_deref()) {
        return refuse(&format!("{e:#}"));
    }
    let tenants = match tenants(a) {
        Ok(t) => t,
        Err(e) => return refuse(&e),
    };
    if base::launcher::resolve_launcher(a.launcher) != base::launcher::Launcher::Mpi {
        return refuse(
            "--pattern isolation needs mpirun or srun: every node's ranks try every other \
             node's (e.g. mpirun --map-by ppr:1:node bench-lat --pattern isolation \
             --tenants tenants.toml --bind-addr ADDR)",
        );
    }
    let settings = ReachSettings {
        bind: a.bind_addr,
        all_rails: a.rails == RailMode::All,
        timeout: a
            .timeout()
            .min(ATTEMPT_TIMEOUT)
            .max(Duration::from_millis(100)),
        icmp: true,
    };
    run_mpi(a, &settings, tenants.as_ref())
}

/// `--tenants`, else the plan's tenants, else none.
fn tenants(a: &P2pArgs) -> Result<Option<Tenants>, String> {
    if let Some(path) = &a.tenants {
        return Tenants::load(path).map(Some).map_err(|e| e.0);
    }
    let Some(path) = &a.plan else {
        return Ok(None);
    };
    let plan = results::fabric_plan::load(path, None).map_err(|e| e.0)?;
    let t = plan.tenants().map_err(|e| e.0)?;
    Ok((!t.is_empty()).then_some(t))
}

#[cfg(feature = "mpi")]
fn run_mpi(a: &P2pArgs, settings: &ReachSettings, tenants: Option<&Tenants>) -> i32 {
    base::interrupt::install();
    // The waits around the attempts hold while every rank makes its own: at most two
    // attempt timeouts per peer, IN_FLIGHT peers at once, so minutes on a large fabric;
    // a short --timeout shortens the attempts, not these waits.
    let job = match bootstrap::mpi::MpiJob::init(a.timeout().max(JOB_WAIT)) {
        Ok(j) => j,
        Err(e) => return refuse(&format!("{e:#}")),
    };
    let started_at = results::provenance::now_rfc3339();
    let rank = job.rank();
    let res = traffic::reach::run_job(&mut &job, settings, tenants).and_then(|got| {
        let Some(swept) = got else {
            return Ok(base::exit::OK);
        };
        let judged = tenants.map(|t| swept.run.judge(|n| t.of_node(n).map(|t| t.name.as_str())));
        print_table(&swept, judged.as_ref());
        let code = match &judged {
            Some(j) if !j.breaches.is_empty() || !j.unreached.is_empty() => {
                base::exit::CHECK_FAILED
            }
            _ => base::exit::OK,
        };
        let mut doc = results::Document::new("bench-lat", "mpi", job.size(), started_at);
        doc.hosts = swept.hosts;
        doc.warnings = swept.warnings;
        doc.options.insert("pattern".into(), "isolation".into());
        doc.options.insert("transport".into(), "tcp".into());
        doc.options
            .insert("timeout".into(), settings.timeout.as_secs_f64().into());
        doc.reach = Some(swept.run);
        doc.finish(base::interrupt::interrupted().then(|| "interrupted".to_string()));
        base::output::write_document(a.json.as_deref(), &doc)?;
        Ok(code)
    });
    match res {
        Ok(code) => code,
        Err(e) => {
            base::output::error_line(&format!("bench-lat: rank {rank}: error: {e:#}"));
            if job.size() > 1 {
                job.abort(base::exit::ERROR);
            }
            base::exit::ERROR
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &P2pArgs, _: &ReachSettings, _: Option<&Tenants>) -> i32 {
    refuse("this bench-lat was built without MPI (feature `mpi`), which --pattern isolation needs")
}

/// The attempts at a glance: every method's outcomes, then with tenants the block picture
/// (pairs delivered / judged, from row to column) and each pair at fault.
fn print_table(swept: &Swept, judged: Option<&Judged>) {
    let run = &swept.run;
    let mut counts: std::collections::BTreeMap<(&str, &str), u64> = Default::default();
    for a in &run.attempts {
        *counts
            .entry((a.method.as_str(), a.outcome.as_str()))
            .or_default() += 1;
    }
    println!(
        "# isolation sweep: {} ranks, {} attempts ({}), timeout {} ms, rails {}",
        run.endpoints.len(),
        run.attempts.len(),
        run.methods.join(", "),
        run.timeout_ms,
        run.rail_mode
    );
    for ((method, outcome), n) in &counts {
        println!("#   {method:<5} {outcome:<14} {n}");
    }
    for w in &swept.warnings {
        println!("# warning: {w}");
    }
    let Some(j) = judged else {
        println!("# no --tenants: attempts recorded, nothing judged");
        return;
    };
    print!("{}", blocks_picture(j));
    for f in &j.breaches {
        println!(
            "BREACH    {} ({} {}) -> {} ({} {}): {}",
            f.from.node,
            f.from.tenant.as_deref().unwrap_or("?"),
            f.from.address,
            f.to.node,
            f.to.tenant.as_deref().unwrap_or("?"),
            f.to.address,
            f.attempts.join(", ")
        );
    }
    for f in &j.unreached {
        println!(
            "UNREACHED {} ({}) -> {} ({}): {}",
            f.from.node,
            f.from.address,
            f.to.node,
            f.to.address,
            f.attempts.join(", ")
        );
    }
    if !j.untenanted.is_empty() {
        let nodes: Vec<&str> = j.untenanted.iter().map(String::as_str).collect();
        println!("# in no tenant, not judged: {}", nodes.join(" "));
    }
}

/// Rows and columns are tenants; a cell is `delivered/pairs` from row to column (inside a
/// tenant it must equal the pairs, across it must be 0).
pub fn blocks_picture(j: &Judged) -> String {
    let mut names: Vec<&str> = j
        .blocks
        .keys()
        .flat_map(|(a, b)| [a.as_str(), b.as_str()])
        .collect();
    names.sort_unstable();
    names.dedup();
    let w = names.iter().map(|n| n.len()).max().unwrap_or(4).max(10);
    let mut out = format!("# {:<w$}", "reach");
    for n in &names {
        out += &format!(" {n:>w$}");
    }
    out.push('\n');
    for a in &names {
        out += &format!("# {a:<w$}");
        for b in &names {
            let cell = j
                .blocks
                .get(&(a.to_string(), b.to_string()))
                .map_or("-".to_string(), |blk| {
                    format!("{}/{}", blk.delivered, blk.pairs)
                });
            out += &format!(" {cell:>w$}");
        }
        out.push('\n');
    }
    out
}
