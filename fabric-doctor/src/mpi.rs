//! Under mpirun or srun: the first rank of every node (MPI's node-local rank 0)
//! audits it, rank 0 gathers the audits and writes them into one document; the other
//! ranks of a node audit nothing (the facts are the node's, not the rank's).

use std::process::ExitCode;
use std::time::Duration;

use bootstrap::mpi::MpiJob;
use results::audit::NodeAudit;

use probe::audit::{self, Live, Options};

use crate::cli::Cli;
use crate::document::write_json;
use crate::table::table;

pub fn run(cli: &Cli, opts: &Options) -> ExitCode {
    let limit = Duration::from_secs(cli.timeout);
    let job = match MpiJob::init(limit) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("fabric-doctor: {e:#}");
            return ExitCode::from(2);
        }
    };
    // Every rank sends a JSON value (`null` from the ranks that audit nothing): MPI
    // refuses an empty buffer in a gather.
    let mine = (job.node().rank == 0).then(|| audit::audit(&Live::new(), opts));
    let mine = serde_json::to_vec(&mine).expect("an audit serializes");
    let Some(all) = job.gather_bytes(&mine, "every node's audit", limit) else {
        return ExitCode::SUCCESS;
    };
    let mut audits: Vec<NodeAudit> = Vec::new();
    for (rank, bytes) in all.iter().enumerate() {
        match serde_json::from_slice::<Option<NodeAudit>>(bytes) {
            Ok(a) => audits.extend(a),
            Err(e) => {
                eprintln!("fabric-doctor: rank {rank} sent an audit that does not read: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let [one] = &audits[..] {
        print!("{}", table(one));
    } else {
        println!(
            "fabric-doctor: {} node(s) audited by {} rank(s)",
            audits.len(),
            job.size()
        );
        for a in &audits {
            print!("{}", node_line(a));
        }
    }
    write_json(cli.json.as_deref(), "mpi", job.size(), audits)
}

/// One line a node, for a job of several: its ports and findings, the first one named.
fn node_line(a: &NodeAudit) -> String {
    let first = a
        .findings
        .first()
        .map(|f| format!(": {} {} {}", f.severity.to_uppercase(), f.code, f.message))
        .unwrap_or_default();
    format!(
        "{:<24} {} port(s), {} finding(s){first}\n",
        a.hostname,
        a.ports.len(),
        a.findings.len()
    )
}
