//! Scaling efficiency: how much bus bandwidth a collective keeps as the communicator
//! grows. nccl-tests' busbw is normalised by the algorithm's traffic (2(n-1)/n for a ring
//! AllReduce), so on a fabric that scales perfectly it stays flat from a few ranks to
//! thousands; `busbw(N) / busbw(base)` is then the delivery figure "scaling efficiency of
//! at least 82% at 512 GPUs". `bench-collective --scaling` measures the whole curve in
//! one launch; separate runs at different sizes combine the same way.
//!
//! A curve is one collective, backend, datatype and message size; its points are the
//! communicator sizes measured (busbw averaged over the rows of each). The base is the
//! communicator size a profile names (`base_ranks`), else the smallest one that spans two
//! nodes (inside one node NVLink, not the network, carries the traffic), else the
//! smallest one (a single host).

use std::collections::BTreeMap;

use results::CollectiveResult;

/// What makes two rows points of the same curve.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CurveKey {
    pub collective: String,
    pub backend: String,
    pub datatype: String,
    pub size_bytes: u64,
}

/// One communicator size of a curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub ranks: u32,
    /// Nodes of the communicator, when the rows say.
    pub nodes: Option<u32>,
    /// Mean out-of-place busbw of its rows, 10^9 byte/s.
    pub busbw: f64,
    pub rows: usize,
}

#[derive(Debug, Clone)]
pub struct Curve {
    pub key: CurveKey,
    /// Ascending communicator size.
    pub points: Vec<Point>,
}

/// The curves of `rows`.
pub fn curves<'a>(rows: impl IntoIterator<Item = &'a CollectiveResult>) -> Vec<Curve> {
    // Per curve, per communicator size: the rows' busbw and the nodes they span.
    type Sizes = BTreeMap<u32, (Vec<f64>, Option<u32>)>;
    let mut by: BTreeMap<CurveKey, Sizes> = BTreeMap::new();
    for r in rows {
        let key = CurveKey {
            collective: r.collective.clone(),
            backend: r.backend.clone(),
            datatype: r.datatype.clone(),
            size_bytes: r.size_bytes,
        };
        let p = by.entry(key).or_default().entry(r.ranks).or_default();
        p.0.push(r.out_of_place.busbw_gbyte_s);
        p.1 = p.1.max(r.nodes);
    }
    by.into_iter()
        .map(|(key, pts)| Curve {
            key,
            points: pts
                .into_iter()
                .map(|(ranks, (bw, nodes))| Point {
                    ranks,
                    nodes,
                    busbw: bw.iter().sum::<f64>() / bw.len() as f64,
                    rows: bw.len(),
                })
                .collect(),
        })
        .collect()
}

impl Curve {
    /// The base point: `named` ranks when given (`None` if the curve lacks it), else the
    /// smallest communicator spanning two nodes, else the smallest.
    pub fn base(&self, named: Option<u32>) -> Option<&Point> {
        match named {
            Some(n) => self.points.iter().find(|p| p.ranks == n),
            None => self
                .points
                .iter()
                .find(|p| p.nodes.is_some_and(|n| n >= 2))
                .or(self.points.first()),
        }
    }

    /// Every point larger than the base with its efficiency, in %.
    pub fn efficiencies(&self, named: Option<u32>) -> Vec<(&Point, &Point, f64)> {
        let Some(base) = self.base(named) else {
            return Vec::new();
        };
        if base.busbw <= 0.0 {
            return Vec::new();
        }
        self.points
            .iter()
            .filter(|p| p.ranks > base.ranks)
            .map(|p| (p, base, p.busbw / base.busbw * 100.0))
            .collect()
    }
}

/// `8 ranks (2 nodes)`.
pub fn describe(p: &Point) -> String {
    match p.nodes {
        Some(n) => format!(
            "{} ranks ({n} node{})",
            p.ranks,
            if n == 1 { "" } else { "s" }
        ),
        None => format!("{} ranks", p.ranks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ranks: u32, nodes: u32, busbw: f64, size: u64) -> CollectiveResult {
        let mut r = match synth::collective_doc(ranks, &[size], busbw, 100.0, 1)
            .results
            .remove(0)
        {
            results::TestResult::Collective(c) => c,
            _ => unreachable!(),
        };
        r.nodes = Some(nodes);
        r.out_of_place.busbw_gbyte_s = busbw;
        r
    }

    #[test]
    fn efficiency_is_busbw_over_the_base() {
        // 8 GPUs per node: one node (NVLink) is fast, the network then decides.
        let rows = [
            row(8, 1, 200.0, 1 << 26),
            row(16, 2, 40.0, 1 << 26),
            row(32, 4, 36.0, 1 << 26),
            row(64, 8, 30.0, 1 << 26),
            row(64, 8, 34.0, 1 << 26),
        ];
        let c = curves(&rows);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].points.len(), 4, "two rows at 64 ranks are one point");
        // Default base: the smallest communicator spanning two nodes.
        assert_eq!(c[0].base(None).unwrap().ranks, 16);
        let e = c[0].efficiencies(None);
        let got: Vec<(u32, f64)> = e.iter().map(|(p, _, e)| (p.ranks, *e)).collect();
        assert_eq!(got, [(32, 90.0), (64, 80.0)]);
        // A named base.
        let e = c[0].efficiencies(Some(32));
        assert_eq!(e.len(), 1);
        assert!((e[0].2 - 32.0 / 36.0 * 100.0).abs() < 1e-9);
        assert!(c[0].efficiencies(Some(12)).is_empty(), "no such base");
    }

    #[test]
    fn one_host_uses_the_smallest_communicator_and_sizes_stay_apart() {
        let rows = [
            row(2, 1, 10.0, 1024),
            row(4, 1, 9.0, 1024),
            row(4, 1, 5.0, 2048),
        ];
        let c = curves(&rows);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].base(None).unwrap().ranks, 2);
        assert_eq!(c[0].efficiencies(None)[0].2, 90.0);
        assert!(c[1].efficiencies(None).is_empty(), "one point, no scaling");
    }
}
