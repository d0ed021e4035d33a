use serde::Deserialize;
use std::time::Instant;
#[derive(Deserialize)]
#[allow(dead_code)]
struct LeanPeer {
    rank: Option<u32>,
    host: String,
    device: Option<String>,
    port: Option<u32>,
}
#[derive(Deserialize)]
#[allow(dead_code)]
struct LeanPair {
    initiator: LeanPeer,
    responder: LeanPeer,
    round: Option<u32>,
}
#[derive(Deserialize)]
#[allow(dead_code)]
struct Bw {
    avg: f64,
    peak: f64,
}
#[derive(Deserialize)]
#[allow(dead_code)]
struct LeanRow {
    kind: String,
    test: String,
    transport: String,
    size_bytes: u64,
    bidirectional: Option<bool>,
    bw_gbit_s: Option<Bw>,
    interval_gbit_s: Option<Vec<f64>>,
    pair: LeanPair,
    complete: bool,
}
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let bytes = std::fs::read(&path).unwrap();
    eprintln!("read {:.3}", t.elapsed().as_secs_f64());
    let t = Instant::now();
    use sha2::Digest;
    let h = sha2::Sha256::digest(&bytes);
    eprintln!("sha {:.3} {:x}", t.elapsed().as_secs_f64(), h[0]);
    let start = bytes
        .windows(15)
        .position(|w| w == b"\n  \"results\": [")
        .unwrap();
    // rows by lines
    let t = Instant::now();
    let mut rows: Vec<(usize, usize)> = Vec::new();
    let mut i = start + 16;
    let mut row_start = None;
    for line in bytes[i..].split(|&b| b == b'\n') {
        let l = line.len();
        if line == b"    {" {
            row_start = Some(i);
        } else if line == b"    }," || line == b"    }" {
            if let Some(s) = row_start.take() {
                rows.push((s, i + 5));
            }
        } else if line == b"  ]," {
            break;
        }
        i += l + 1;
    }
    eprintln!("split {:.3} rows {}", t.elapsed().as_secs_f64(), rows.len());
    let t = Instant::now();
    let mut n = 0.0;
    for &(s, e) in &rows {
        let r: LeanRow = serde_json::from_slice(&bytes[s..e]).unwrap();
        n += r.bw_gbit_s.map(|b| b.avg).unwrap_or(0.0);
    }
    eprintln!("lean {:.3} {n}", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut n = 0.0;
    for &(s, e) in &rows {
        let r: results::TestResult = serde_json::from_slice(&bytes[s..e]).unwrap();
        n += r.size_bytes() as f64;
    }
    eprintln!("full {:.3} {n}", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut n = 0u64;
    let mut ins = false;
    let mut esc = false;
    for &b in &bytes {
        if ins {
            if esc {
                esc = false
            } else if b == b'\\' {
                esc = true
            } else if b == b'"' {
                ins = false
            }
        } else {
            match b {
                b'"' => ins = true,
                b'{' => n += 1,
                b'}' => n += 1,
                _ => {}
            }
        }
    }
    eprintln!("bytescan {:.3} {n}", t.elapsed().as_secs_f64());
}
