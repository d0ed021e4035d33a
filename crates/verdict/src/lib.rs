//! `verdict`: aggregate's ground floor. It reads every rank's and run's result documents
//! (`input`, `stream`), merges them into rows keyed by what was measured (`rows`, `metric`,
//! `tables`), parses delivery profiles (`profile`) and judges each check (`judge`): a check
//! with no matching data is MISSING, never PASS.
//!
//! It depends on the `results` crate only, so it builds anywhere (no verbs, MPI or CUDA).
//! The diagnosis (`diagnosis`) and the reports (`reports`) stand on it; it knows neither.

pub mod counters;
pub mod digest;
pub mod error;
pub mod escape;
pub mod feed;
mod groups;
pub mod input;
pub mod judge;
pub mod metric;
pub mod parallel;
pub mod profile;
pub mod rows;
pub mod scaling;
pub mod stream;
pub mod tables;
pub mod tenant_view;
