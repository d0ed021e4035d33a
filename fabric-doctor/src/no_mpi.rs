//! Built without the `mpi` feature: a run under mpirun or srun says how to get one.

use std::process::ExitCode;

pub fn run(_: &crate::cli::Cli, _: &probe::audit::Options) -> ExitCode {
    eprintln!(
        "fabric-doctor: started by an MPI launcher, but built without the `mpi` feature; \
         rebuild with it, or pass --launcher standalone to audit this node alone"
    );
    ExitCode::from(2)
}
