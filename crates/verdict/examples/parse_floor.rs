//! The floor under `aggregate report`'s load phase: each input file read and parsed by
//! serde into the result schema (`results::Document`), spread over the cores as the load
//! is (`verdict::parallel`), and nothing else: no digest, no size estimate, no
//! histogram decoding, no copy. Run by scripts/bench-aggregate-scale.sh beside the report,
//! so the load's distance from what reading and parsing alone cost is printed every time.
//!
//! `parse_floor FILE...`: prints the seconds, the bytes and the documents' result rows.

use std::time::Instant;

use verdict::parallel::map_in_order;

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: parse_floor FILE...");
        std::process::exit(2);
    }
    let start = Instant::now();
    let parsed = map_in_order(&files, |f| {
        let bytes = std::fs::read(f).map_err(|e| format!("{f}: cannot read: {e}"))?;
        let doc: results::Document =
            serde_json::from_slice(&bytes).map_err(|e| format!("{f}: not a document: {e}"))?;
        Ok::<_, String>((bytes.len(), doc.results.len()))
    });
    let seconds = start.elapsed().as_secs_f64();
    let (mut bytes, mut rows) = (0, 0);
    for p in parsed {
        match p {
            Ok((b, r)) => {
                bytes += b;
                rows += r;
            }
            Err(e) => {
                eprintln!("parse_floor: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("{seconds:.3} s, {bytes} bytes, {rows} rows");
}
