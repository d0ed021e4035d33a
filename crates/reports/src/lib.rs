//! `reports`: what a reader receives. The cluster picture (`cluster`, `heatmap`), the
//! acceptance report in HTML, Markdown and JUnit with inline SVG plots (`report`, `plots`,
//! `templates`), its bundle and SSH signature (`bundle`, `sign`, timed by `clock`), comparisons of two runs
//! (`compare`), nightly trends (`trend`) and metric exporters (`export`).
//!
//! It stands on `diagnosis` and `verdict`; the `aggregate` binary stands on it.

pub mod bundle;
mod clock;
pub mod cluster;
pub mod compare;
pub mod explain;
pub mod export;
pub mod heatmap;
pub mod plots;
pub mod report;
pub mod sign;
pub mod templates;
mod tenant;
pub mod trend;
