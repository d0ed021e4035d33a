//! Metric export, one module per format behind [`Exporter`] (hyperfine's `src/export/`
//! layout): adding a format is one file and one line in [`by_name`].

pub mod prometheus;

use verdict::error::{Error, Result};
use verdict::input::Loaded;
use verdict::judge::Verdict;

/// What an exporter sees: every loaded document, the verdict when a profile was given,
/// the tenants when known.
pub struct ExportData<'a> {
    pub docs: &'a [Loaded],
    pub verdict: Option<&'a Verdict>,
    pub tenants: Option<&'a results::tenants::Tenants>,
}

/// One output format.
pub trait Exporter {
    /// The whole output file.
    fn serialize(&self, data: &ExportData) -> Result<Vec<u8>>;
}

/// Names accepted by `--format`.
pub const FORMATS: &[&str] = &["prometheus"];

/// The exporter for `--format NAME`.
pub fn by_name(name: &str) -> Result<Box<dyn Exporter>> {
    match name {
        "prometheus" => Ok(Box::new(prometheus::Prometheus)),
        other => Err(Error::Usage(format!(
            "--format {other}: unknown format (known: {})",
            FORMATS.join(", ")
        ))),
    }
}
