//! Reading sysfs the way every probe does: a file's text trimmed (absent when empty or
//! unreadable), a directory's entries sorted by name, and the kernel's rate strings.

use std::fs;
use std::path::Path;

/// A sysfs file's text without surrounding white space; `None` when missing, unreadable
/// or empty (sysfs attributes a driver does not implement read as errors or nothing).
pub fn read_trim(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The names in a directory in natural order (`mlx5_2` before `mlx5_10`: a node's devices
/// in the order people number them, which is each device's rail); empty when it cannot be
/// read.
pub fn dir_names(path: impl AsRef<Path>) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(path)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort_by(|a, b| results::natural::natural_cmp(a, b));
    names
}

/// `100 Gb/sec (4X EDR)` -> 100.0.
pub fn parse_rate_gbit_s(rate: &str) -> Option<f64> {
    rate.split_whitespace().next()?.parse().ok()
}
