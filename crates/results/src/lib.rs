//! The fabcheck result schema: what every benchmark writes and `aggregate` reads.
//!
//! One JSON [`Document`] per run. Units live in the key names (`_us`, `_bytes`,
//! `_gbit_s` = 10^9 bit/s, `_gbyte_s` = 10^9 byte/s) and histograms travel inside as
//! base64 HDR V2+deflate so runs and ranks can be merged later. This crate has no system
//! dependencies: it builds anywhere `aggregate` has to run.

pub mod audit;
pub mod collective;
pub mod congestion;
pub mod discovery;
pub mod document;
pub mod fabric_plan;
pub mod histogram;
pub mod hostlist;
pub mod ibnet;
pub mod limits;
pub mod natural;
pub mod peak;
pub mod pma;
pub mod provenance;
pub mod quality;
pub mod reach;
pub mod schema;
pub mod tenants;
pub mod units;
pub mod write;

pub use histogram::LatencyHistogram;
pub use schema::*;
