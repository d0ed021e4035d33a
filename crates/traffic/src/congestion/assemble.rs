//! The root's side of a run: the gathered reports into the document's `congestion`
//! block (the split recomputed from the host names and the seed, each canary test's
//! isolated and loaded figures with the impact factors unrounded, what each congestor
//! group moved), GPCNeT's table, and the document around it.

use anyhow::{Context, Result};
use results::congestion::{
    bandwidth_impact, latency_impact, CanaryTest, CongestionNode, CongestionRun, CongestorGroup,
    CongestorThroughput, SkippedTest,
};
use results::{Document, HostInfo, LatencyHistogram};

use super::run::op_of;
use super::split::{self, Split};
use super::{Options, RankReport, NO_ALLREDUCE, TESTS};
use crate::endpoint_flows::Carrier;
use crate::flows::{figures_per_canary, CONGEST_BYTES};

/// The document of a run as its root writes it for `tool` under `launcher` (`mpi`,
/// `agents`): the hosts, the options, the `congestion` block, and the warnings. The caller
/// records its own extra options, then finishes and writes it.
#[allow(clippy::too_many_arguments)]
pub fn document(
    tool: &str,
    launcher: &str,
    started_at: String,
    opts: &Options,
    hosts: Vec<HostInfo>,
    reports: &[RankReport],
    carrier: &Carrier,
    collective: bool,
) -> Result<Document> {
    let names: Vec<String> = hosts.iter().map(|h| h.hostname.clone()).collect();
    let sp = split::of(&split::nodes(&names, opts.include_local), opts)
        .map_err(|e| anyhow::anyhow!(e))?;
    let ring: Vec<u32> = sp.ring.iter().flat_map(|n| n.ranks.clone()).collect();
    let run = assemble(opts, &sp, &ring, reports, carrier, collective)?;
    print_table(&run);
    let mut doc = Document::new(tool, launcher, hosts.len() as u32, started_at);
    doc.hosts = hosts;
    let o = &mut doc.options;
    o.insert("seed".into(), opts.seed.into());
    o.insert("canaries".into(), opts.canaries.into());
    o.insert("phase-seconds".into(), opts.phase_seconds.into());
    o.insert(
        "warmup-seconds".into(),
        super::warmup(std::time::Duration::from_secs_f64(opts.phase_seconds))
            .as_secs_f64()
            .into(),
    );
    o.insert("include-local".into(), opts.include_local.into());
    carrier.record(o);
    if carrier.endpoints().is_none()
        && sp
            .groups
            .iter()
            .any(|g| g.0 != "alltoall" && g.0 != "incast")
    {
        doc.warnings.push(
            "over TCP there is no one-sided operation: put_incast streams into its root and \
             get_bcast streams out of it (the directions GPCNeT's puts and gets load), both \
             two-sided; over verbs they are RDMA WRITE and READ"
                .into(),
        );
    }
    for s in &run.skipped_tests {
        doc.warnings.push(format!("{}: {}", s.test, s.why));
    }
    doc.congestion = Some(run);
    Ok(doc)
}

/// The `congestion` block from every rank's report. Without the collective (over the
/// agents) the allreduce canary is listed as skipped, with why.
pub fn assemble(
    opts: &Options,
    sp: &Split,
    ring: &[u32],
    reports: &[RankReport],
    carrier: &Carrier,
    collective: bool,
) -> Result<CongestionRun> {
    let transport = match carrier.endpoints() {
        None => "tcp",
        Some((settings, _)) => settings.kind.name(),
    };
    let measured = if collective { TESTS.len() } else { 2 };
    let canary_tests = TESTS
        .iter()
        .enumerate()
        .take(measured)
        .map(|(t, &(test, unit))| canary_test(t, test, unit, ring, reports))
        .collect::<Result<Vec<_>>>()?;
    let name = |n: &split::Node| n.name.clone();
    Ok(CongestionRun {
        seed: opts.seed,
        canary_percent: opts.canaries,
        phase_seconds: opts.phase_seconds,
        transport: Some(transport.into()),
        canaries: sp
            .ring
            .iter()
            .map(name)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        ring: sp.ring.iter().map(name).collect(),
        congestor_groups: sp
            .groups
            .iter()
            .map(|(p, ns)| CongestorGroup {
                pattern: p.clone(),
                nodes: ns.iter().map(name).collect(),
            })
            .collect(),
        nodes: roles(sp),
        canary_tests,
        congestor_throughput: throughput(sp, reports, carrier),
        counters_isolated: reports.iter().flat_map(|r| r.counters[0].clone()).collect(),
        counters_loaded: reports.iter().flat_map(|r| r.counters[1].clone()).collect(),
        incast: None,
        canary_tenant: opts.tenants.as_ref().map(|t| t.canary.clone()),
        congestor_tenant: opts.tenants.as_ref().map(|t| t.congestor.clone()),
        skipped_tests: TESTS[measured..]
            .iter()
            .map(|(test, _)| SkippedTest {
                test: test.to_string(),
                why: NO_ALLREDUCE.into(),
            })
            .collect(),
    })
}

/// Every node with its ranks and role (the canaries', then each congestor group's), in
/// name order.
fn roles(sp: &Split) -> Vec<CongestionNode> {
    let mut nodes: Vec<CongestionNode> = sp
        .ring
        .iter()
        .map(|n| CongestionNode {
            node: n.name.clone(),
            ranks: n.ranks.clone(),
            role: "canary".into(),
            group: None,
        })
        .collect();
    for (g, (_, ns)) in sp.groups.iter().enumerate() {
        nodes.extend(ns.iter().map(|n| CongestionNode {
            node: n.name.clone(),
            ranks: n.ranks.clone(),
            role: "congestor".into(),
            group: Some(g as u32),
        }));
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    nodes
}

/// Canary test `t` in both phases: every canary's samples, and all of them merged; the
/// impact factors loaded against isolated (unrounded).
fn canary_test(
    t: usize,
    test: &str,
    unit: &str,
    ring: &[u32],
    reports: &[RankReport],
) -> Result<CanaryTest> {
    let mut phase = [LatencyHistogram::new(), LatencyHistogram::new()];
    let mut each: [Vec<LatencyHistogram>; 2] = [Vec::new(), Vec::new()];
    for &r in ring {
        let rep = &reports[r as usize];
        for (p, h) in phase.iter_mut().enumerate() {
            let enc = rep
                .hist
                .get(p)
                .and_then(|h| h.get(t))
                .with_context(|| format!("canary rank {r} sent no {test} histogram"))?;
            let mine =
                LatencyHistogram::decode(enc).context("a canary sent an unreadable histogram")?;
            h.merge(&mine);
            each[p].push(mine);
        }
    }
    let bandwidth = unit == "gbit_s";
    let (iso, lod) = (
        figures_per_canary(&each[0], &phase[0], bandwidth),
        figures_per_canary(&each[1], &phase[1], bandwidth),
    );
    let (impact_mean, impact_p99) = if bandwidth {
        (
            bandwidth_impact(iso.mean, lod.mean),
            bandwidth_impact(iso.p99, lod.p99),
        )
    } else {
        (
            latency_impact(iso.mean, lod.mean),
            latency_impact(iso.p99, lod.p99),
        )
    };
    let impact_p999 = iso.p999.zip(lod.p999).map(|(i, l)| latency_impact(i, l));
    Ok(CanaryTest {
        test: test.to_string(),
        unit: unit.to_string(),
        isolated: iso,
        loaded: lod,
        impact_mean,
        impact_p99,
        impact_p999,
    })
}

/// What each congestor group moved in the loaded phase: the bytes its flows' receivers
/// (or, over endpoints, its initiators' completions) counted, over the longest flow.
fn throughput(sp: &Split, reports: &[RankReport], carrier: &Carrier) -> Vec<CongestorThroughput> {
    let counted_at = match carrier.endpoints() {
        None => "receiver",
        Some(_) => "initiator completions",
    };
    sp.groups
        .iter()
        .enumerate()
        .map(|(g, (pattern, _))| {
            let mine: Vec<_> = reports
                .iter()
                .flat_map(|r| r.congest.iter())
                .filter(|c| c.0 == g as u32)
                .collect();
            let bytes: u64 = mine.iter().map(|c| c.1).sum();
            let seconds = mine.iter().map(|c| c.2).fold(0.0, f64::max);
            CongestorThroughput {
                group: g as u32,
                pattern: pattern.clone(),
                message_bytes: CONGEST_BYTES as u64,
                op: Some(match carrier.endpoints() {
                    None => "send".into(),
                    Some(_) => op_of(pattern).name().into(),
                }),
                counted_at: Some(counted_at.into()),
                bytes,
                seconds,
                gbit_s: results::units::gbit_s(bytes, seconds),
            }
        })
        .collect()
}

/// GPCNeT's table, with the factors unrounded.
pub fn print_table(run: &CongestionRun) {
    println!(
        "# bench-congestion: seed {}, {} canary nodes, {} congestor groups, {} s per test and phase",
        run.seed,
        run.canaries.len(),
        run.congestor_groups.len(),
        run.phase_seconds
    );
    println!(
        "{:<24} {:>7} {:>14} {:>14} {:>14} {:>14} {:>20} {:>20}",
        "canary test",
        "unit",
        "isolated avg",
        "loaded avg",
        "isolated p99",
        "loaded p99",
        "impact avg",
        "impact p99"
    );
    for t in &run.canary_tests {
        println!(
            "{:<24} {:>7} {:>14.3} {:>14.3} {:>14.3} {:>14.3} {:>20} {:>20}",
            t.test,
            t.unit,
            t.isolated.mean,
            t.loaded.mean,
            t.isolated.p99,
            t.loaded.p99,
            t.impact_mean,
            t.impact_p99
        );
    }
    for c in &run.congestor_throughput {
        println!(
            "# congestor group {} ({}, {} B {} messages): {:.3} Gbit/s over {:.3} s, counted at the {}",
            c.group,
            c.pattern,
            c.message_bytes,
            c.op.as_deref().unwrap_or("send"),
            c.gbit_s,
            c.seconds,
            c.counted_at.as_deref().unwrap_or("receiver")
        );
    }
    for s in &run.skipped_tests {
        println!("# {}: {}", s.test, s.why);
    }
}
