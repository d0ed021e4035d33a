//! Finding the nights of a history: the layout `deploy/nightly.sbatch` writes, one
//! directory per night named by its UTC start (`2026-11-29T0200Z-4711/results/*.json`,
//! beside its `report/` and `compare.*`), and a `last-good` link to one of them.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use verdict::error::{Error, Result};

/// One night found in a history.
#[derive(Debug, Clone, PartialEq)]
pub struct Night {
    /// The directory name (`2026-11-29T0200Z-4711`).
    pub id: String,
    pub dir: PathBuf,
    /// Where its result documents are: `DIR/results` when present, else `DIR`.
    pub results: PathBuf,
    /// When it ran, from its name; `None` when the name holds no date (then the
    /// documents' earliest `started_at` decides, once they are read).
    pub when: Option<SystemTime>,
}

/// A date or time as `--since`/`--until` and night names give it: `2026-11-29`,
/// `2026-11-29T0200Z`, or RFC 3339. A bare date is the start of that day, or its last
/// second when `end_of_day`.
pub fn parse_when(text: &str, end_of_day: bool) -> Option<SystemTime> {
    let t = text.trim();
    let date = t.get(..10)?;
    let b = date.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10)) {
        return None;
    }
    let rest = &t[10..];
    let stamp = if rest.is_empty() || !rest.starts_with(['T', 't', ' ']) {
        format!(
            "{date}T{}Z",
            if end_of_day { "23:59:59" } else { "00:00:00" }
        )
    } else {
        let r = &rest[1..];
        let hm = r.as_bytes();
        if hm.len() >= 4 && hm[..4].iter().all(u8::is_ascii_digit) {
            // nightly.sbatch's compact form: 0200Z.
            format!("{date}T{}:{}:00Z", &r[..2], &r[2..4])
        } else {
            t.to_string()
        }
    };
    humantime::parse_rfc3339_weak(stamp.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(&stamp).ok())
}

/// Days since the Unix epoch, for plots and slopes.
pub fn days(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
        / 86400.0
}

/// RFC 3339, seconds.
pub fn stamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// True for a directory one of `aggregate`'s commands wrote (a report or a trend).
fn is_bundle(dir: &Path) -> bool {
    verdict::input::is_report_bundle(dir)
        || (dir.join("summary.json").is_file() && dir.join("trend.html").is_file())
}

/// True when `dir` holds results itself: a `results/` directory or JSON files.
fn is_night(dir: &Path) -> bool {
    if is_bundle(dir) {
        return false;
    }
    if dir.join("results").is_dir() {
        return true;
    }
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "json") && e.path().is_file())
        })
        .unwrap_or(false)
}

fn night(dir: &Path) -> Night {
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let results = if dir.join("results").is_dir() {
        dir.join("results")
    } else {
        dir.to_path_buf()
    };
    Night {
        when: parse_when(&id, false),
        id,
        dir: dir.to_path_buf(),
        results,
    }
}

/// Every night under the arguments, in time order (then name). Each argument is a
/// history (its subdirectories are nights; links such as `last-good` are skipped, their
/// target is a night already) or one night itself.
pub fn discover(args: &[PathBuf]) -> Result<Vec<Night>> {
    let mut nights = Vec::new();
    for arg in args {
        let meta = fs::metadata(arg)
            .map_err(|e| Error::Input(format!("{}: cannot read: {e}", arg.display())))?;
        if !meta.is_dir() {
            return Err(Error::Input(format!(
                "{}: not a directory; give the nightly history directory (one directory per \
                 night, as deploy/nightly.sbatch writes it) or night directories",
                arg.display()
            )));
        }
        if is_night(arg) {
            nights.push(night(arg));
            continue;
        }
        let mut found = 0;
        let mut entries: Vec<PathBuf> = fs::read_dir(arg)
            .map_err(|e| Error::Input(format!("{}: cannot list: {e}", arg.display())))?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if is_night(&p) {
                nights.push(night(&p));
                found += 1;
            }
        }
        if found == 0 {
            return Err(Error::Input(format!(
                "{}: no nights found (expected directories such as 2026-11-29T0200Z-4711 \
                 holding results/*.json, as deploy/nightly.sbatch writes them)",
                arg.display()
            )));
        }
    }
    nights.sort_by(|a, b| a.when.cmp(&b.when).then_with(|| a.id.cmp(&b.id)));
    nights.dedup_by(|a, b| a.dir == b.dir);
    Ok(nights)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_in_every_form_the_history_uses() {
        let day = parse_when("2026-11-29", false).unwrap();
        assert_eq!(stamp(day), "2026-11-29T00:00:00Z");
        assert_eq!(
            stamp(parse_when("2026-11-29", true).unwrap()),
            "2026-11-29T23:59:59Z"
        );
        assert_eq!(
            stamp(parse_when("2026-11-29T0200Z-4711", false).unwrap()),
            "2026-11-29T02:00:00Z"
        );
        assert_eq!(
            stamp(parse_when("2026-11-29T02:30:00Z", false).unwrap()),
            "2026-11-29T02:30:00Z"
        );
        assert!(parse_when("last-good", false).is_none());
        assert!(parse_when("2026-13-99", false).is_none());
        assert!(parse_when("night-7", false).is_none());
    }

    #[test]
    fn nights_are_found_in_order_and_links_and_bundles_skipped() {
        let h = tempfile::tempdir().unwrap();
        for n in [
            "2026-01-03T0200Z-3",
            "2026-01-01T0200Z-1",
            "2026-01-02T0200Z-2",
        ] {
            fs::create_dir_all(h.path().join(n).join("results")).unwrap();
            fs::write(h.path().join(n).join("results/a.json"), "{}").unwrap();
        }
        std::os::unix::fs::symlink("2026-01-02T0200Z-2", h.path().join("last-good")).unwrap();
        let t = h.path().join("trend-january");
        fs::create_dir_all(&t).unwrap();
        fs::write(t.join("summary.json"), "{}").unwrap();
        fs::write(t.join("trend.html"), "").unwrap();
        let n = discover(&[h.path().to_path_buf()]).unwrap();
        let ids: Vec<&str> = n.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "2026-01-01T0200Z-1",
                "2026-01-02T0200Z-2",
                "2026-01-03T0200Z-3"
            ]
        );
        assert!(n[0].results.ends_with("results"));
        // A night given directly is a night.
        let one = discover(&[h.path().join("2026-01-02T0200Z-2")]).unwrap();
        assert_eq!(one.len(), 1);
        let e = discover(&[t]).unwrap_err();
        assert!(e.to_string().contains("no nights found"), "{e}");
    }
}
