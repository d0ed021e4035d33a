//! What the collective benchmarks share with their backends: element types and reduction
//! operations, named as nccl-tests names them, and the MPI collective calls
//! ([`mpi`], host memory). The NCCL calls (GPU memory) live in [`crate::cuda`].
//!
//! A collective moves or combines `count` elements of one [`DataType`] across every rank
//! of a communicator; the backends map these enums onto `MPI_Datatype`/`MPI_Op` and
//! `ncclDataType_t`/`ncclRedOp_t`, and say which combinations they can run.

#[cfg(feature = "mpi")]
pub mod mpi;

/// Whether the MPI backend can run `dt` with `op` (`None`: no reduction). Pure: usable
/// before MPI is initialised, and in builds without MPI.
pub fn mpi_supports(dt: DataType, op: Option<RedOp>) -> anyhow::Result<()> {
    if matches!(dt, DataType::Float16 | DataType::Bfloat16) {
        anyhow::bail!(
            "datatype {} is not available with --backend mpi (MPI has no 16-bit float type); \
             use int8, uint8, int32, uint32, int64, uint64, float32 or float64, or --backend nccl",
            dt.name()
        );
    }
    if op == Some(RedOp::Avg) {
        anyhow::bail!(
            "reduction avg is not available with --backend mpi (MPI has no average); \
             use sum, prod, min or max, or --backend nccl"
        );
    }
    Ok(())
}

/// Element type of a collective buffer (`-d/--datatype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    /// IEEE 754 binary16 (nccl-tests `half`).
    #[value(alias = "half", alias = "fp16")]
    Float16,
    /// bfloat16: float32's exponent with a 7-bit mantissa.
    #[value(alias = "bf16")]
    Bfloat16,
    #[value(alias = "float", alias = "fp32")]
    Float32,
    #[value(alias = "double", alias = "fp64")]
    Float64,
}

impl DataType {
    pub const ALL: [DataType; 10] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Float16,
        DataType::Bfloat16,
        DataType::Float32,
        DataType::Float64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
        }
    }

    /// Canonical name (the option value and the JSON `datatype`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Float16 => "float16",
            DataType::Bfloat16 => "bfloat16",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
        }
    }

    /// Name in the `type` column of the nccl-tests table (`float`, `half`, ...), so tools
    /// that parse nccl-tests output read ours unchanged.
    pub fn nccl_tests_name(self) -> &'static str {
        match self {
            DataType::Float16 => "half",
            DataType::Float32 => "float",
            DataType::Float64 => "double",
            other => other.name(),
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Float16 | DataType::Bfloat16 | DataType::Float32 | DataType::Float64
        )
    }
}

/// Reduction operation (`-o/--op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum RedOp {
    Sum,
    Prod,
    Min,
    Max,
    /// Sum divided by the number of ranks (NCCL 2.10+; MPI has no such operation).
    Avg,
}

impl RedOp {
    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Min => "min",
            RedOp::Max => "max",
            RedOp::Avg => "avg",
        }
    }
}

/// The collective primitives both backends implement. A benchmark's collective table
/// entry names one of these; each backend maps it onto its library call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Primitive {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
}

impl Primitive {
    /// Elements the call reads from the send buffer and writes into the receive buffer,
    /// for `count` = the count passed to the library call (per rank for all_gather and
    /// reduce_scatter, per peer for alltoall, as NCCL counts them).
    pub fn elements(self, count: usize, ranks: usize) -> (usize, usize) {
        match self {
            Primitive::AllReduce | Primitive::Broadcast | Primitive::Reduce => (count, count),
            Primitive::AllGather => (count, count * ranks),
            Primitive::ReduceScatter => (count * ranks, count),
            Primitive::AllToAll => (count * ranks, count * ranks),
        }
    }
}
