//! Whether the EP buffers of the largest size fit in this host's memory, decided before
//! anything is allocated.
//!
//! Each rank holds four buffers per size: the dispatch rows it sends and receives (FP8)
//! and the combine rows it sends and receives (BF16). A token goes to at most one copy per
//! destination rank, so a rank sends at most `tokens x min(topk, ranks)` rows, and on
//! average receives as many as it sends (skewed routings receive more on the hot ranks:
//! the figure is a floor). At DeepSeek-V3's shape (hidden 7168, top-8) one token costs
//! 8 x 2 x (7392 + 14336) B = 348 KB per rank, so 64K tokens need 22.8 GB per rank: eight
//! such ranks on one 24 GiB host were killed by the kernel's OOM killer, taking the job
//! with them. Refusing with the largest size that fits is the useful answer.

use anyhow::{bail, Result};

use super::Payload;

/// Host bytes one rank needs at `tokens` tokens (a floor: see the module's doc).
pub fn bytes_per_rank(tokens: u64, topk: u64, ranks: u64, hidden: u64) -> u64 {
    let copies = tokens.saturating_mul(topk.min(ranks).max(1));
    let row = (Payload::Fp8.bytes_per_copy(hidden as usize)
        + Payload::Bf16.bytes_per_copy(hidden as usize)) as u64;
    copies.saturating_mul(2).saturating_mul(row)
}

/// `MemAvailable` of `/proc/meminfo` in bytes: what the kernel says can be allocated
/// without swapping. `None` when it cannot be read (then nothing is refused).
pub fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    mem_available(&text)
}

fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Refuses a largest size whose buffers cannot fit in this host's share of memory.
///
/// `ranks_on_host` ranks share `available` bytes; `what` names the collectives.
pub fn check(
    what: &str,
    largest_tokens: u64,
    topk: u64,
    ranks: u64,
    ranks_on_host: u64,
    hidden: u64,
    available: Option<u64>,
) -> Result<()> {
    let Some(available) = available else {
        return Ok(());
    };
    let need = bytes_per_rank(largest_tokens, topk, ranks, hidden);
    let share = available / ranks_on_host.max(1);
    if need <= share {
        return Ok(());
    }
    let per_token = bytes_per_rank(1, topk, ranks, hidden).max(1);
    let fits = share / per_token;
    bail!(
        "{what} at {largest_tokens} tokens per rank needs at least {} of host memory per rank \
         (up to {} copies of each token, FP8 dispatch and BF16 combine rows of hidden {hidden}, \
         sent and received), and this host has {} available for its {ranks_on_host} rank(s) \
         ({} each). The largest size that fits is {fits} tokens: lower -e/--maxbytes to it, \
         run fewer ranks per host, or use a smaller --hidden or --topk",
        gb(need),
        topk.min(ranks).max(1),
        gb(available),
        gb(share),
    )
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepseek_shape_costs_what_the_doc_says() {
        // 8 copies x 2 (send, receive) x (7392 FP8 + 14336 BF16) B.
        assert_eq!(bytes_per_rank(1, 8, 8, 7168), 347_648);
        assert_eq!(bytes_per_rank(65536, 8, 8, 7168), 22_783_459_328);
        // Two ranks: a token has at most two destinations.
        assert_eq!(bytes_per_rank(1, 8, 2, 7168), 86_912);
    }

    #[test]
    fn the_oom_case_is_refused_with_the_size_that_fits() {
        // mpirun -np 8 on a host with 21.5 GB available, -e 64K tokens.
        let e = check("ep_dispatch", 65536, 8, 8, 8, 7168, Some(21_500_000_000)).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("22.8 GB"), "{msg}");
        assert!(
            msg.contains("21.5 GB available for its 8 rank(s) (2.7 GB each)"),
            "{msg}"
        );
        // 2,687,500,000 / 347,648 = 7730 tokens.
        assert!(
            msg.contains("The largest size that fits is 7730 tokens"),
            "{msg}"
        );
        // That size fits; one more token does not.
        assert!(check("ep_dispatch", 7730, 8, 8, 8, 7168, Some(21_500_000_000)).is_ok());
        assert!(check("ep_dispatch", 7731, 8, 8, 8, 7168, Some(21_500_000_000)).is_err());
    }

    #[test]
    fn unknown_memory_refuses_nothing() {
        assert!(check("ep_dispatch", u64::MAX, 8, 8, 8, 7168, None).is_ok());
    }

    #[test]
    fn meminfo_is_read_in_kib() {
        let text =
            "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(mem_available(text), Some(20_480_000_000));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }
}
