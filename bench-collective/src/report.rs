//! Human output in nccl-tests' layout, column for column, so scripts that parse
//! nccl-tests output and eyes used to it read ours unchanged. Only rank 0 prints.

use results::CollectiveResult;

/// nccl-tests' time column: fewer decimals as the figure grows.
fn time_str(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{us:7.0}")
    } else if us >= 100.0 {
        format!("{us:7.1}")
    } else {
        format!("{us:7.2}")
    }
}

/// The column header of one table.
pub fn header() -> String {
    [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    .join("\n")
}

/// One row: size, count, type, redop, root, then time, algbw, busbw, #wrong for out of
/// place and in place (`N/A` in #wrong when not checked).
pub fn row(r: &CollectiveResult, type_name: &str) -> String {
    let mut s = format!(
        "{:12}  {:12}  {:>8}  {:>6}  {:>6}",
        r.size_bytes, r.count, type_name, r.op, r.root
    );
    for t in [&r.out_of_place, &r.in_place] {
        let wrong = if t.checked {
            t.wrong.to_string()
        } else {
            "N/A".into()
        };
        s.push_str(&format!(
            "  {}  {:6.2}  {:6.2}  {:>5}",
            time_str(t.time_us),
            t.algbw_gbyte_s,
            t.busbw_gbyte_s,
            wrong
        ));
    }
    if !r.complete {
        s.push_str("  (incomplete)");
    }
    s
}

/// The two footers nccl-tests ends with: wrong elements over every row and mode, and
/// the mean busbw over every row and both modes.
pub fn footer(rows: &[CollectiveResult]) -> String {
    let wrong: u64 = rows
        .iter()
        .map(|r| r.out_of_place.wrong + r.in_place.wrong)
        .sum();
    let bws: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.out_of_place.busbw_gbyte_s, r.in_place.busbw_gbyte_s])
        .collect();
    let avg = if bws.is_empty() {
        0.0
    } else {
        bws.iter().sum::<f64>() / bws.len() as f64
    };
    format!(
        "# Out of bounds values : {wrong} {}\n# Avg bus bandwidth    : {avg:.6} \n#",
        if wrong == 0 { "OK" } else { "FAILED" }
    )
}

/// `# ep_dispatch, ep_combine: backend mpi (flat), 8 ranks on 2 nodes, routing node:4, ...`
pub fn ep_title(ep: &crate::ep::EpPlan, backend: &str, ranks: u32, nodes: u32) -> String {
    format!(
        "# {}: backend {backend} ({}), {ranks} ranks on {nodes} node{}, routing {} seed {}, top-{} of {} experts, hidden {}",
        ep.collectives.iter().map(|c| c.name).collect::<Vec<_>>().join(", "),
        ep.variant.name(),
        if nodes == 1 { "" } else { "s" },
        ep.routing.name(),
        ep.seed,
        ep.topk,
        ep.experts,
        ep.hidden,
    )
}

pub fn ep_header() -> String {
    format!(
        "#{:>11} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7} {:>8}\n#{:>11} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7} {:>8}",
        "collective", "tokens", "net bytes", "p50", "p99", "max", "notify", "net", "deepep", "imbal", "#wrong",
        "", "", "(all ranks)", "(us)", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)", "", "",
    )
}

pub fn ep_row(r: &CollectiveResult) -> String {
    let Some(e) = &r.ep else {
        return String::new();
    };
    let wrong = if r.out_of_place.checked {
        r.out_of_place.wrong.to_string()
    } else {
        "N/A".into()
    };
    format!(
        " {:>11} {:>8} {:>12} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.3} {:>9.3} {:>7.3} {:>8}",
        r.collective,
        e.tokens_per_rank,
        e.network_bytes,
        e.step_p50_us,
        e.step_p99_us,
        e.step_max_us,
        e.notify_p50_us,
        e.network_gbyte_s,
        e.deepep_gbyte_s,
        e.imbalance,
        wrong
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use results::{CollectiveTiming, LatencySummary};

    pub(crate) fn timing(time_us: f64, busbw: f64, wrong: u64) -> CollectiveTiming {
        CollectiveTiming {
            time_us,
            algbw_gbyte_s: busbw,
            busbw_gbyte_s: busbw,
            efficiency: None,
            wrong,
            checked: true,
            unchecked_reason: None,
            latency_us: LatencySummary::default(),
            histogram: String::new(),
            slowest_rank: 0,
            rank_time_us: None,
        }
    }

    pub(crate) fn result() -> CollectiveResult {
        CollectiveResult {
            collective: "all_reduce".into(),
            backend: "mpi".into(),
            ranks: 2,
            nodes: Some(1),
            size_bytes: 1048576,
            count: 262144,
            datatype: "float32".into(),
            op: "sum".into(),
            root: -1,
            iterations: 20,
            warmup_iterations: 5,
            busbw_factor: 1.0,
            link_gbit_s: None,
            out_of_place: timing(123.456, 8.5, 0),
            in_place: timing(12345.6, 2.0, 3),
            complete: true,
            ep: None,
        }
    }

    #[test]
    fn rows_line_up_with_the_nccl_tests_header() {
        let r = row(&result(), "float");
        let h = header();
        let cols = h.lines().nth(2).unwrap();
        assert_eq!(r.len(), cols.len(), "\n{cols}\n{r}");
        let fields: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(
            fields,
            [
                "1048576", "262144", "float", "sum", "-1", "123.5", "8.50", "8.50", "0", "12346",
                "2.00", "2.00", "3"
            ]
        );
    }

    #[test]
    fn footers_count_wrong_and_average_both_modes() {
        let f = footer(&[result()]);
        assert!(f.contains("# Out of bounds values : 3 FAILED"), "{f}");
        assert!(f.contains("# Avg bus bandwidth    : 5.250000"), "{f}");
    }
}
