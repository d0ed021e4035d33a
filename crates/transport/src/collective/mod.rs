//! What the collective benchmarks share with their backends: element types and reduction
//! operations, named as nccl-tests names them, the collective primitives with the shape of
//! each library call, and the MPI collective calls ([`mpi`], host memory). The NCCL calls
//! (GPU memory) live in the `cuda` module.
//!
//! A collective moves or combines `count` elements of one [`DataType`] across every rank
//! of a communicator; the backends map these enums onto `MPI_Datatype`/`MPI_Op` and
//! `ncclDataType_t`/`ncclRedOp_t`, and say which combinations they can run. What a call
//! reads and writes for a given count ([`Primitive::elements`]) is defined here once: both
//! backends check their buffers against it before handing pointers to a library, and the
//! benchmark sizes its buffers from it.

#[cfg(feature = "mpi")]
#[allow(unsafe_code)]
pub mod mpi;

/// Whether the MPI backend can run `dt` with `op` (`None`: no reduction). Pure: usable
/// before MPI is initialised, and in builds without MPI.
pub fn mpi_supports(dt: DataType, op: Option<RedOp>) -> anyhow::Result<()> {
    if matches!(
        dt,
        DataType::Float16 | DataType::Bfloat16 | DataType::Float8e4m3 | DataType::Float8e5m2
    ) {
        anyhow::bail!(
            "datatype {} is not available with --backend mpi (MPI has no 16- or 8-bit float type); \
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    /// IEEE 754 binary16 (nccl-tests `half`).
    Float16,
    /// bfloat16: float32's exponent with a 7-bit mantissa.
    Bfloat16,
    Float32,
    Float64,
    /// FP8 E4M3 (OCP "fn": no infinities, 0x7f/0xff NaN, largest 448): NCCL 2.24+'s
    /// `ncclFloat8e4m3`, on sm_90 and newer; gradient traffic compressed to FP8.
    Float8e4m3,
    /// FP8 E5M2 (IEEE-like: infinities, largest finite 57344): `ncclFloat8e5m2`.
    Float8e5m2,
}

impl DataType {
    pub const ALL: [DataType; 12] = [
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
        DataType::Float8e4m3,
        DataType::Float8e5m2,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 | DataType::Float8e4m3 | DataType::Float8e5m2 => 1,
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
            DataType::Float8e4m3 => "float8e4m3",
            DataType::Float8e5m2 => "float8e5m2",
        }
    }

    /// Other names users type for it: nccl-tests' (`half`, `float`, `double`) and the
    /// usual short forms.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            DataType::Float16 => &["half", "fp16"],
            DataType::Bfloat16 => &["bf16"],
            DataType::Float32 => &["float", "fp32"],
            DataType::Float64 => &["double", "fp64"],
            // nccl-tests' names (`-d f8e4m3`) and the usual short forms.
            DataType::Float8e4m3 => &["f8e4m3", "fp8_e4m3", "e4m3"],
            DataType::Float8e5m2 => &["f8e5m2", "fp8_e5m2", "e5m2"],
            _ => &[],
        }
    }

    /// Looks a type up by its name or one of its aliases.
    pub fn from_name(name: &str) -> Option<DataType> {
        Self::ALL
            .into_iter()
            .find(|t| t.name() == name || t.aliases().contains(&name))
    }

    /// Name in the `type` column of the nccl-tests table (`float`, `half`, ...), so tools
    /// that parse nccl-tests output read ours unchanged.
    pub fn nccl_tests_name(self) -> &'static str {
        match self {
            DataType::Float16 => "half",
            DataType::Float32 => "float",
            DataType::Float64 => "double",
            DataType::Float8e4m3 => "f8e4m3",
            DataType::Float8e5m2 => "f8e5m2",
            other => other.name(),
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Float16
                | DataType::Bfloat16
                | DataType::Float32
                | DataType::Float64
                | DataType::Float8e4m3
                | DataType::Float8e5m2
        )
    }
}

/// Reduction operation (`-o/--op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Min,
    Max,
    /// Sum divided by the number of ranks (NCCL 2.10+; MPI has no such operation).
    Avg,
}

impl RedOp {
    pub const ALL: [RedOp; 5] = [RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg];

    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Min => "min",
            RedOp::Max => "max",
            RedOp::Avg => "avg",
        }
    }

    pub fn from_name(name: &str) -> Option<RedOp> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// The collective primitives both backends implement: nccl-tests' set. A benchmark's
/// collective table entry names one of these; each backend has one arm per primitive that
/// maps it onto its library calls (`MPI_Allreduce`, `ncclAllReduce`, a group of
/// `ncclSend`/`ncclRecv`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Primitive {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    /// Each rank sends to rank + 1 and receives from rank - 1 (a ring shift).
    SendRecv,
    /// The root's buffer, cut in one block per rank, block r to rank r.
    Scatter,
    /// Every rank's block lands at its place in the root's buffer.
    Gather,
    /// AllGather by recursive doubling over point-to-point exchanges: log2(n) steps, each
    /// with one partner, the blocks exchanged doubling every step (power-of-two ranks).
    HyperCube,
}

impl Primitive {
    /// Elements the call reads from its input and writes into its output, for `count` =
    /// the count passed to the library call (per rank for all_gather, reduce_scatter,
    /// scatter, gather and hypercube, per peer for alltoall, as NCCL counts them). The
    /// one definition of a call's shape: backends check buffers against it.
    pub fn elements(self, count: usize, ranks: usize) -> (usize, usize) {
        match self {
            Primitive::AllReduce
            | Primitive::Broadcast
            | Primitive::Reduce
            | Primitive::SendRecv => (count, count),
            Primitive::AllGather | Primitive::Gather | Primitive::HyperCube => {
                (count, count * ranks)
            }
            Primitive::ReduceScatter | Primitive::Scatter => (count * ranks, count),
            Primitive::AllToAll => (count * ranks, count * ranks),
        }
    }

    /// The call takes a reduction operation (`MPI_Op`, `ncclRedOp_t`).
    pub fn reduces(self) -> bool {
        matches!(
            self,
            Primitive::AllReduce | Primitive::ReduceScatter | Primitive::Reduce
        )
    }

    /// Whether the primitive can run on `ranks` ranks; the error says why not.
    pub fn runs_on(self, ranks: usize) -> Result<(), String> {
        if self == Primitive::HyperCube && !ranks.is_power_of_two() {
            return Err(format!(
                "hypercube needs a power-of-two number of ranks (recursive doubling), not {ranks}"
            ));
        }
        Ok(())
    }
}

/// Whose rules say where an in-place call finds its input and leaves its output inside
/// its one buffer: the library's, since that is what the call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlaceRules {
    /// NCCL's (and nccl-tests' in-place offsets): AllGather, Gather and HyperCube read the
    /// rank's block at block `rank` of the output; ReduceScatter and Scatter write the
    /// rank's block at block `rank` of the input.
    Nccl,
    /// `MPI_IN_PLACE`'s: as NCCL, except that ReduceScatter (`MPI_Reduce_scatter_block`)
    /// writes the result at the start of the buffer. Where MPI has no in-place form
    /// (non-root ranks of Scatter and Gather, HyperCube's exchanges) NCCL's layout is used,
    /// so the two backends differ only where the libraries do.
    Mpi,
}

impl Primitive {
    /// Element offsets of the input and of the output inside the one buffer of an
    /// in-place call on `rank`, for `count` = the call's count.
    pub fn in_place_offsets(
        self,
        rules: InPlaceRules,
        rank: usize,
        count: usize,
    ) -> (usize, usize) {
        match self {
            Primitive::AllGather | Primitive::Gather | Primitive::HyperCube => (rank * count, 0),
            Primitive::Scatter => (0, rank * count),
            Primitive::ReduceScatter if rules == InPlaceRules::Nccl => (0, rank * count),
            Primitive::ReduceScatter
            | Primitive::AllReduce
            | Primitive::AllToAll
            | Primitive::Broadcast
            | Primitive::Reduce
            | Primitive::SendRecv => (0, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_resolve() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_name(t.name()), Some(t));
            for a in t.aliases() {
                assert_eq!(DataType::from_name(a), Some(t));
            }
        }
        assert_eq!(DataType::from_name("half"), Some(DataType::Float16));
        assert_eq!(DataType::from_name("complex64"), None);
        for o in RedOp::ALL {
            assert_eq!(RedOp::from_name(o.name()), Some(o));
        }
        assert_eq!(RedOp::from_name("mulsum"), None);
    }

    #[test]
    fn hypercube_needs_a_power_of_two() {
        assert!(Primitive::HyperCube.runs_on(4).is_ok());
        assert!(Primitive::HyperCube
            .runs_on(3)
            .unwrap_err()
            .contains("power-of-two"));
        assert!(Primitive::AllReduce.runs_on(3).is_ok());
    }

    #[test]
    fn in_place_layouts_differ_only_where_the_libraries_do() {
        let all = [
            Primitive::AllReduce,
            Primitive::AllGather,
            Primitive::ReduceScatter,
            Primitive::AllToAll,
            Primitive::Broadcast,
            Primitive::Reduce,
            Primitive::SendRecv,
            Primitive::Scatter,
            Primitive::Gather,
            Primitive::HyperCube,
        ];
        for p in all {
            let (n, m) = (
                p.in_place_offsets(InPlaceRules::Nccl, 2, 10),
                p.in_place_offsets(InPlaceRules::Mpi, 2, 10),
            );
            if p == Primitive::ReduceScatter {
                assert_eq!((n, m), ((0, 20), (0, 0)));
            } else {
                assert_eq!(n, m, "{p:?}");
            }
            // Both regions fit in a buffer as large as the larger side of the call.
            let (send, recv) = p.elements(10, 4);
            let len = send.max(recv);
            for (i, o) in [n, m] {
                assert!(i + send <= len && o + recv <= len, "{p:?}");
            }
        }
        assert_eq!(
            Primitive::AllGather.in_place_offsets(InPlaceRules::Mpi, 3, 10),
            (30, 0)
        );
        assert_eq!(
            Primitive::Scatter.in_place_offsets(InPlaceRules::Nccl, 3, 10),
            (0, 30)
        );
    }
}
