//! `aggregate`: turns fabcheck result documents into a verdict a customer can read and
//! verify. It reads every rank's and run's JSON, merges histograms, judges a delivery
//! profile, renders HTML/Markdown/JUnit reports with inline SVG plots, signs them with an
//! SSH key, compares runs for regressions and exports Prometheus metrics.
//!
//! It depends on the `results` crate only, so it builds anywhere (no verbs, MPI or CUDA).

pub mod audit;
pub mod bundle;
pub mod cluster;
pub mod compare;
pub mod digest;
pub mod error;
pub mod escape;
pub mod export;
mod groups;
pub mod heatmap;
pub mod input;
pub mod inventory;
pub mod judge;
pub mod load;
pub mod matrix;
pub mod metric;
pub mod parallel;
pub mod plots;
pub mod profile;
pub mod report;
pub mod rows;
pub mod scaling;
pub mod sign;
pub mod stream;
pub mod structure;
pub mod suspects;
pub mod tables;
pub mod templates;
pub mod trend;
