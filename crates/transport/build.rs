//! With the `mpi` feature: compiles the C shim that hands `MPI_IN_PLACE` to Rust, against
//! the same MPI that mpi-sys found (its `mpicc` when there is one).

fn main() {
    println!("cargo:rerun-if-changed=src/collective/mpi_shim.c");
    println!("cargo:rerun-if-env-changed=MPICC");
    if std::env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    let lib = match build_probe_mpi::probe() {
        Ok(lib) => lib,
        Err(errs) => {
            for e in errs {
                println!("cargo:warning=MPI probe: {e}");
            }
            panic!("no MPI found to build the MPI_IN_PLACE shim against (install libopenmpi-dev or MPICH)");
        }
    };
    let mut build = cc::Build::new();
    build.file("src/collective/mpi_shim.c");
    if let Some(mpicc) = lib.mpicc {
        build.compiler(mpicc);
    } else {
        for inc in &lib.include_paths {
            build.include(inc);
        }
    }
    build.compile("fabcheck_mpi_shim");
}
