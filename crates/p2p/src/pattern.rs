//! Which pairs a point-to-point run measures, and in which rounds.
//!
//! A cluster is accepted link by link: every node pair on every rail. A pattern turns the
//! roster of ranks into rounds of disjoint pairs; the pairs of a round run at once (each
//! rank is in at most one of them, so no NIC is shared), rounds run one after another.
//!
//! - `pairs`: ranks (0,1), (2,3), ... in one round: perftest under mpirun, today's default.
//! - `all-pairs`: every unordered node pair exactly once, by the circle method (N-1 rounds
//!   of N/2 pairs for even N; N rounds with one node idle for odd N), as SuperBench does.
//! - `ring`: each node with the next one (node i with i+1, the last with the first).
//! - `random[:ROUNDS[:SEED]]`: ROUNDS random perfect matchings of the nodes (imbue's host
//!   validation ranks hosts by pass ratio over such shuffles); the seed is recorded.
//! - `file:PATH`: an explicit list of node pairs (`hostA hostB`, or `hostA:mlx5_0
//!   hostB:mlx5_1` to name the devices), packed greedily into rounds of disjoint pairs:
//!   how suspects are measured again (`aggregate` writes such a list).
//!
//! Pairs are between nodes (hosts), not ranks. With several ranks per node (one per NIC,
//! "rails"), local rank r of node A pairs with local rank r of node B (rail-aligned, as
//! rail-optimised fabrics are wired); with `--rails all` every rail of A meets every rail
//! of B, in R sub-rounds of a node round. Two ranks of one host are never paired unless
//! `--include-local`, where every rank counts as a node of its own.
//!
//! Everything here is pure: the same roster and pattern give the same schedule on every
//! rank, so each rank computes it for itself and no schedule travels.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};

/// The pattern named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternSpec {
    /// Ranks (0,1), (2,3), ... in one round.
    Pairs,
    /// Every node with every other, in rounds of disjoint pairs (the circle method).
    AllPairs,
    /// Each node with the next, around the ring.
    Ring,
    /// Random disjoint pairs for a number of rounds.
    Random {
        /// How many rounds.
        rounds: u32,
        /// The seed (`None`: drawn once and recorded).
        seed: Option<u64>,
    },
    /// The pairs listed in a file (`file:PATH`: `hostA hostB` per line).
    File(PathBuf),
    /// N senders to one receiver, every rank the receiver in turn (0: all others send).
    /// Not rounds of pairs: `bench-bw` runs it itself (the incast module).
    Incast(u32),
    /// Every rank tries to reach every other (`bench-lat`'s isolation sweep, `reach`):
    /// not rounds of pairs either.
    Isolation,
}

impl PatternSpec {
    /// The name recorded in the document (`sweep.pattern`).
    pub fn name(&self) -> &'static str {
        match self {
            PatternSpec::Pairs => "pairs",
            PatternSpec::AllPairs => "all-pairs",
            PatternSpec::Ring => "ring",
            PatternSpec::Random { .. } => "random",
            PatternSpec::File(_) => "file",
            PatternSpec::Incast(_) => "incast",
            PatternSpec::Isolation => "isolation",
        }
    }
}

impl fmt::Display for PatternSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternSpec::Random { rounds, seed } => match seed {
                Some(s) => write!(f, "random:{rounds}:{s}"),
                None => write!(f, "random:{rounds}"),
            },
            PatternSpec::File(p) => write!(f, "file:{}", p.display()),
            PatternSpec::Incast(n) if *n > 0 => write!(f, "incast:{n}"),
            other => f.write_str(other.name()),
        }
    }
}

/// Rounds of `random` when none are given.
pub const DEFAULT_RANDOM_ROUNDS: u32 = 4;

impl FromStr for PatternSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "use pairs, all-pairs, ring, random[:ROUNDS[:SEED]], file:PATH incast[:N] (bench-bw) or isolation (bench-lat)";
        match s {
            "pairs" => return Ok(PatternSpec::Pairs),
            "all-pairs" | "all_pairs" | "allpairs" => return Ok(PatternSpec::AllPairs),
            "ring" => return Ok(PatternSpec::Ring),
            "isolation" => return Ok(PatternSpec::Isolation),
            _ => {}
        }
        if s == "incast" {
            return Ok(PatternSpec::Incast(0));
        }
        if let Some(n) = s.strip_prefix("incast:") {
            return n
                .parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .map(PatternSpec::Incast)
                .ok_or_else(|| {
                    format!("incast:{n}: N (senders per round) must be a whole number >= 1")
                });
        }
        if let Some(path) = s.strip_prefix("file:") {
            if path.is_empty() {
                return Err(format!("file: needs a path ({usage})"));
            }
            return Ok(PatternSpec::File(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix("random") {
            let mut parts = rest.split(':').skip(1);
            if !rest.is_empty() && !rest.starts_with(':') {
                return Err(format!("unknown pattern '{s}': {usage}"));
            }
            let rounds = match parts.next() {
                None | Some("") => DEFAULT_RANDOM_ROUNDS,
                Some(r) => r
                    .parse::<u32>()
                    .ok()
                    .filter(|&r| r >= 1)
                    .ok_or_else(|| format!("random:{r}: ROUNDS must be a whole number >= 1"))?,
            };
            let seed = match parts.next() {
                None | Some("") => None,
                Some(v) => Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("random:{rounds}:{v}: SEED must be a whole number"))?,
                ),
            };
            if parts.next().is_some() {
                return Err(format!("'{s}': too many fields ({usage})"));
            }
            return Ok(PatternSpec::Random { rounds, seed });
        }
        Err(format!("unknown pattern '{s}': {usage}"))
    }
}

/// How the ranks of two nodes pair up when nodes have several (one per rail).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RailMode {
    /// Local rank r with local rank r (rail-optimised wiring).
    #[default]
    Aligned,
    /// Every rail of one node with every rail of the other.
    All,
}

impl RailMode {
    /// The mode as the command line names it.
    pub fn name(self) -> &'static str {
        match self {
            RailMode::Aligned => "aligned",
            RailMode::All => "all",
        }
    }
}

impl FromStr for RailMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "aligned" => Ok(RailMode::Aligned),
            "all" => Ok(RailMode::All),
            _ => Err(format!(
                "--rails {s}: use aligned (local rank r with local rank r) or all"
            )),
        }
    }
}

/// A rank as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Its rank in the run.
    pub rank: u32,
    /// Its host name.
    pub host: String,
    /// Index among the ranks of its host, in rank order (its rail).
    pub local_rank: u32,
    /// RDMA device it measures with, when known (for `file:` pairs naming devices).
    pub device: Option<String>,
}

/// One scheduled pair of ranks: the initiator drives the loop, the responder answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RankPair {
    /// The rank that drives the loop.
    pub initiator: u32,
    /// The rank that answers.
    pub responder: u32,
}

impl RankPair {
    /// Whether `rank` is one of the two.
    pub fn has(&self, rank: u32) -> bool {
        self.initiator == rank || self.responder == rank
    }
}

/// The rounds of a run and what produced them.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The pattern that made it.
    pub pattern: PatternSpec,
    /// Node names in order (hosts; `host/rank` with `--include-local`).
    pub nodes: Vec<String>,
    /// Rails per node (the most ranks any host has).
    pub rails: u32,
    /// Rail-aligned pairs or every rail with every rail.
    pub rail_mode: RailMode,
    /// Each rank counted as a node (one machine, for testing).
    pub include_local: bool,
    /// Seed actually used by `random`.
    pub seed: Option<u64>,
    /// The rounds, each a set of disjoint rank pairs run at once.
    pub rounds: Vec<Vec<RankPair>>,
    /// Node rounds before and after holding cross-leaf pairs to what oversubscribed
    /// uplinks carry (`FabricOrder::cross_cap`), when that applied.
    pub cross_capped: Option<(usize, usize)>,
}

impl Schedule {
    /// Pairs over all rounds.
    pub fn planned_pairs(&self) -> u64 {
        self.rounds.iter().map(|r| r.len() as u64).sum()
    }

    /// This rank's pair in `round`, if it has one.
    pub fn pair_of(&self, round: usize, rank: u32) -> Option<RankPair> {
        self.rounds
            .get(round)?
            .iter()
            .copied()
            .find(|p| p.has(rank))
    }
}

/// Everything a schedule is computed from, identical on every rank.
pub struct Request<'a> {
    /// The pattern asked for.
    pub pattern: &'a PatternSpec,
    /// Every rank of the run.
    pub slots: &'a [Slot],
    /// Rail-aligned or every rail.
    pub rail_mode: RailMode,
    /// Each rank counted as a node.
    pub include_local: bool,
    /// Seed for `random` without one (the caller draws it once and shares it).
    pub fallback_seed: u64,
    /// Text of the `file:` pattern's list (read once, by the caller).
    pub file_text: Option<&'a str>,
    /// The fabric plan: nodes are scheduled in its order.
    pub fabric: Option<&'a crate::fabric::FabricOrder>,
}

/// The node a slot belongs to.
pub fn node_name(slot: &Slot, include_local: bool) -> String {
    if include_local {
        format!("{}/{}", slot.host, slot.rank)
    } else {
        slot.host.clone()
    }
}

/// Computes the rounds. Errors name what cannot be scheduled and what to do.
pub fn schedule(req: &Request) -> Result<Schedule> {
    let slots = req.slots;
    let (nodes, rails_of) = nodes_and_rails(req);
    let rails = rails_of.values().map(|r| r.len() as u32).max().unwrap_or(0);
    let mut seed = None;
    let mut cross_capped = None;
    let rounds = match req.pattern {
        PatternSpec::Incast(_) => bail!(
            "--pattern incast is not a schedule of pairs: bench-bw runs its rounds itself \
             (bench-lat has no incast)"
        ),
        PatternSpec::Isolation => bail!(
            "--pattern isolation is not a schedule of pairs: bench-lat runs it itself \
             (bench-bw has no isolation sweep)"
        ),
        PatternSpec::Pairs => neighbours(slots.len() as u32)?,
        other => {
            if nodes.len() < 2 {
                bail!(
                    "--pattern {} needs at least two nodes, and all {} rank(s) run on {}: launch \
                     ranks on several hosts, or add --include-local to count each rank as a node \
                     (one machine, for testing)",
                    other.name(),
                    slots.len(),
                    nodes.first().map_or("no host", |s| s.as_str())
                );
            }
            let node_rounds = node_rounds(req, other, &nodes, &mut seed)?;
            let (node_rounds, capped) = held_to_uplinks(req, &nodes, &rails_of, rails, node_rounds);
            cross_capped = capped;
            expand(&node_rounds, &nodes, &rails_of, rails, req.rail_mode)
        }
    };
    Ok(Schedule {
        pattern: req.pattern.clone(),
        nodes,
        rails,
        rail_mode: req.rail_mode,
        include_local: req.include_local,
        seed,
        rounds,
        cross_capped,
    })
}

/// The nodes in order of their first rank (or the plan's order), and each node's ranks by
/// local rank (its rails).
fn nodes_and_rails(req: &Request) -> (Vec<String>, HashMap<String, BTreeMap<u32, u32>>) {
    let mut nodes: Vec<String> = Vec::new();
    let mut rails_of: HashMap<String, BTreeMap<u32, u32>> = HashMap::new();
    for s in req.slots {
        let node = node_name(s, req.include_local);
        let local = if req.include_local { 0 } else { s.local_rank };
        let entry = rails_of.entry(node.clone()).or_insert_with(|| {
            nodes.push(node.clone());
            BTreeMap::new()
        });
        entry.insert(local, s.rank);
    }
    if let Some(f) = req.fabric {
        f.order(&mut nodes);
    }
    (nodes, rails_of)
}

/// `--pattern pairs`: ranks (0,1), (2,3), ... in one round.
fn neighbours(n: u32) -> Result<Vec<Vec<RankPair>>> {
    if n < 2 || !n.is_multiple_of(2) {
        bail!(
            "{n} rank(s) cannot be paired: with --pattern pairs ranks pair up as (0,1), \
             (2,3), ..., so launch an even number (e.g. mpirun -np 2), or use \
             --pattern all-pairs"
        );
    }
    Ok(vec![(0..n / 2)
        .map(|i| RankPair {
            initiator: 2 * i,
            responder: 2 * i + 1,
        })
        .collect()])
}

/// The rounds of node pairs a pattern asks for (`seed`: the random pattern's, recorded).
fn node_rounds(
    req: &Request,
    pattern: &PatternSpec,
    nodes: &[String],
    seed: &mut Option<u64>,
) -> Result<Vec<Vec<NodePair>>> {
    Ok(match pattern {
        PatternSpec::AllPairs => circle(nodes.len()),
        PatternSpec::Ring => pack(ring(nodes.len())),
        PatternSpec::Random { rounds, seed: s } => {
            let s = s.unwrap_or(req.fallback_seed);
            *seed = Some(s);
            random(nodes.len(), *rounds, s)
        }
        PatternSpec::File(path) => {
            let text = req
                .file_text
                .ok_or_else(|| anyhow!("the pair list {} was not read", path.display()))?;
            let pairs = parse_pair_list(text, nodes, req.slots, req.include_local)
                .with_context(|| format!("in the pair list {}", path.display()))?;
            pack(pairs)
        }
        PatternSpec::Pairs | PatternSpec::Incast(_) | PatternSpec::Isolation => unreachable!(),
    })
}

/// With a plan whose uplinks are oversubscribed, each group's cross-spine pairs per round
/// held to what its uplinks carry (and the round counts before and after). Rail-aligned
/// pairs cross the spines only between groups; with --rails all every pair of rails does,
/// which no per-group budget describes: left as they are.
fn held_to_uplinks(
    req: &Request,
    nodes: &[String],
    rails_of: &HashMap<String, BTreeMap<u32, u32>>,
    rails: u32,
    node_rounds: Vec<Vec<NodePair>>,
) -> (Vec<Vec<NodePair>>, Option<(usize, usize)>) {
    let device: HashMap<u32, &str> = req
        .slots
        .iter()
        .filter_map(|s| Some((s.rank, s.device.as_deref()?)))
        .collect();
    let nic = |node: usize, rail: usize| {
        let rank = rails_of.get(&nodes[node])?.values().nth(rail)?;
        device.get(rank).map(|d| d.to_string())
    };
    let caps = req
        .fabric
        .filter(|_| req.rail_mode == RailMode::Aligned)
        .and_then(|f| f.caps_of(nodes, rails as usize, nic));
    match caps {
        Some((leaves, caps)) => {
            let before = node_rounds.len();
            let after = cap_cross(node_rounds, &leaves, &caps);
            let counts = (before, after.len());
            (after, Some(counts))
        }
        None => (node_rounds, None),
    }
}

/// A pair of nodes (indices into the node list), optionally pinned to one rail each
/// (`file:` pairs that name devices carry the ranks themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodePair {
    a: usize,
    b: usize,
    /// Exact ranks when the pair named devices.
    ranks: Option<(u32, u32)>,
}

fn np(a: usize, b: usize) -> NodePair {
    NodePair { a, b, ranks: None }
}

/// Round-robin tournament (circle method): node 0 stays, the others rotate one place per
/// round; with an odd count a phantom node makes the one who meets it sit out.
fn circle(n: usize) -> Vec<Vec<NodePair>> {
    let m = if n.is_multiple_of(2) { n } else { n + 1 };
    let mut rounds = Vec::with_capacity(m - 1);
    for r in 0..m - 1 {
        let at = |k: usize| if k == 0 { 0 } else { 1 + (k - 1 + r) % (m - 1) };
        let mut round = Vec::with_capacity(m / 2);
        for i in 0..m / 2 {
            let (a, b) = (at(i), at(m - 1 - i));
            if a >= n || b >= n {
                continue;
            }
            // Alternate who initiates, so every node drives about half of its links.
            round.push(if (r + i) % 2 == 0 { np(a, b) } else { np(b, a) });
        }
        rounds.push(round);
    }
    rounds
}

fn ring(n: usize) -> Vec<NodePair> {
    if n == 2 {
        return vec![np(0, 1)];
    }
    (0..n).map(|i| np(i, (i + 1) % n)).collect()
}

/// splitmix64: a tiny, well-mixed generator, so a seed gives the same matchings on every
/// rank and every platform.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn random(n: usize, rounds: u32, seed: u64) -> Vec<Vec<NodePair>> {
    let mut state = seed;
    (0..rounds)
        .map(|_| {
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            order.chunks_exact(2).map(|c| np(c[0], c[1])).collect()
        })
        .collect()
}

/// Packs pairs into rounds greedily: each pair goes into the first round where neither of
/// its ranks is busy (a proper edge colouring; at most 2*max_degree - 1 rounds).
fn pack(pairs: Vec<NodePair>) -> Vec<Vec<NodePair>> {
    let mut rounds: Vec<Vec<NodePair>> = Vec::new();
    let mut busy: Vec<std::collections::HashSet<usize>> = Vec::new();
    for p in pairs {
        let slot = busy
            .iter()
            .position(|b| !b.contains(&p.a) && !b.contains(&p.b));
        let i = slot.unwrap_or_else(|| {
            rounds.push(Vec::new());
            busy.push(Default::default());
            rounds.len() - 1
        });
        busy[i].insert(p.a);
        busy[i].insert(p.b);
        rounds[i].push(p);
    }
    rounds
}

/// Holds every round to the pairs across the spines each leaf's uplinks carry at line
/// rate (`caps[leaf]`, `u32::MAX` for none). A node pair crosses on each rail whose two
/// NICs are on different leaves (`on[node][rail]`, as built where discovery said so), and
/// counts once against both leaves of each such rail. Pairs that cross nothing held stay
/// where they are; one that does not fit goes to the first round where both its nodes are
/// free and its leaves have room, new rounds appended as needed. An oversubscribed fabric
/// so takes longer to sweep (the uplinks cannot carry more at line rate), and no measured
/// pair is slowed by the others of its round.
fn cap_cross(
    rounds: Vec<Vec<NodePair>>,
    on: &[Vec<Option<usize>>],
    caps: &[u32],
) -> Vec<Vec<NodePair>> {
    let n = on.len();
    let loads = |p: &NodePair| held_leaves(p, on, caps);
    let room = || Room {
        busy: vec![false; n],
        used: vec![0; caps.len()],
    };
    let mut out: Vec<Vec<NodePair>> = Vec::with_capacity(rounds.len());
    let mut rooms: Vec<Room> = Vec::with_capacity(rounds.len());
    let mut waiting = Vec::new();
    for round in rounds {
        let mut r = room();
        let mut kept = Vec::with_capacity(round.len());
        for p in round {
            let load = loads(&p);
            if !r.fits(&p, &load, caps) {
                waiting.push((p, load));
                continue;
            }
            r.take(&p, &load);
            kept.push(p);
        }
        out.push(kept);
        rooms.push(r);
    }
    // Rounds fill up only, so the first round a leaf may still have room never moves
    // back: the search for each waiting pair starts at the latest such round of its leaves.
    let mut open = vec![0usize; caps.len()];
    for (p, load) in waiting {
        let from = load.iter().map(|&l| open[l]).max().unwrap_or(0);
        let at = (from..rooms.len()).find(|&i| rooms[i].fits(&p, &load, caps));
        let i = at.unwrap_or_else(|| {
            rooms.push(room());
            out.push(Vec::new());
            rooms.len() - 1
        });
        rooms[i].take(&p, &load);
        out[i].push(p);
        for &l in &load {
            while open[l] < rooms.len() && rooms[open[l]].used[l] >= caps[l] {
                open[l] += 1;
            }
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// The held leaves a pair loads, once per rail it crosses on (`u32::MAX`: not held).
fn held_leaves(p: &NodePair, on: &[Vec<Option<usize>>], caps: &[u32]) -> Vec<usize> {
    let mut v = Vec::new();
    for (x, y) in on[p.a].iter().zip(&on[p.b]) {
        if let (Some(x), Some(y)) = (*x, *y) {
            if x != y {
                v.extend([x, y].into_iter().filter(|&l| caps[l] != u32::MAX));
            }
        }
    }
    v
}

/// One round's room: which nodes are busy, how many crossing pairs each leaf carries.
struct Room {
    busy: Vec<bool>,
    used: Vec<u32>,
}

impl Room {
    fn fits(&self, p: &NodePair, load: &[usize], caps: &[u32]) -> bool {
        !self.busy[p.a]
            && !self.busy[p.b]
            && load
                .iter()
                .all(|&l| self.used[l] + load.iter().filter(|&&x| x == l).count() as u32 <= caps[l])
    }

    fn take(&mut self, p: &NodePair, load: &[usize]) {
        self.busy[p.a] = true;
        self.busy[p.b] = true;
        for &l in load {
            self.used[l] += 1;
        }
    }
}

/// Node rounds -> rank rounds, rail by rail.
fn expand(
    node_rounds: &[Vec<NodePair>],
    nodes: &[String],
    rails_of: &HashMap<String, BTreeMap<u32, u32>>,
    rails: u32,
    mode: RailMode,
) -> Vec<Vec<RankPair>> {
    let rank_at = |node: usize, rail: u32| -> Option<u32> {
        rails_of
            .get(&nodes[node])
            .and_then(|r| r.values().nth(rail as usize).copied())
    };
    let shifts = match mode {
        RailMode::Aligned => 1,
        RailMode::All => rails.max(1),
    };
    let mut out = Vec::new();
    for round in node_rounds {
        for shift in 0..shifts {
            let mut pairs = Vec::new();
            for p in round {
                if let Some((i, r)) = p.ranks {
                    if shift == 0 {
                        pairs.push(RankPair {
                            initiator: i,
                            responder: r,
                        });
                    }
                    continue;
                }
                for rail in 0..rails {
                    let other = (rail + shift) % rails;
                    if let (Some(i), Some(r)) = (rank_at(p.a, rail), rank_at(p.b, other)) {
                        pairs.push(RankPair {
                            initiator: i,
                            responder: r,
                        });
                    }
                }
            }
            if !pairs.is_empty() {
                out.push(pairs);
            }
        }
    }
    out
}

/// Reads `hostA hostB` / `hostA:dev hostB:dev` lines (`#` comments, blank lines, commas
/// allowed) against the nodes of this run.
fn parse_pair_list(
    text: &str,
    nodes: &[String],
    slots: &[Slot],
    include_local: bool,
) -> Result<Vec<NodePair>> {
    let ends = Ends {
        index: nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect(),
        nodes,
        slots,
        include_local,
    };
    let mut pairs = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").replace(',', " ");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.len() {
            0 => continue,
            2 => {}
            _ => bail!(
                "line {}: '{}' is not a pair: write two nodes per line (`hostA hostB`, or \
                 `hostA:mlx5_0 hostB:mlx5_0`)",
                n + 1,
                raw.trim()
            ),
        }
        let (a, ra) = ends.resolve(words[0], n + 1)?;
        let (b, rb) = ends.resolve(words[1], n + 1)?;
        if a == b {
            bail!("line {}: '{}' pairs a node with itself", n + 1, raw.trim());
        }
        let ranks = match (ra, rb) {
            (Some(x), Some(y)) => Some((x, y)),
            (None, None) => None,
            _ => bail!(
                "line {}: name a device on both sides or on neither ('{}')",
                n + 1,
                raw.trim()
            ),
        };
        pairs.push(NodePair { a, b, ranks });
    }
    if pairs.is_empty() {
        bail!("no pairs in it: write one pair per line (`hostA hostB`)");
    }
    Ok(pairs)
}

/// The run's nodes and ranks, as a pair list's words name them.
struct Ends<'a> {
    index: HashMap<&'a str, usize>,
    nodes: &'a [String],
    slots: &'a [Slot],
    include_local: bool,
}

impl Ends<'_> {
    /// `node` or `node:device`: the node's index, and with a device the rank using it.
    fn resolve(&self, word: &str, line: usize) -> Result<(usize, Option<u32>)> {
        let (node, device) = match word.rsplit_once(':') {
            Some((n, d)) if self.index.contains_key(n) => (n, Some(d)),
            _ => (word, None),
        };
        let i = *self.index.get(node).ok_or_else(|| {
            anyhow!(
                "line {line}: no node named '{node}' in this run (nodes: {})",
                self.known()
            )
        })?;
        let Some(dev) = device else {
            return Ok((i, None));
        };
        let on_node = || {
            self.slots
                .iter()
                .filter(move |s| node_name(s, self.include_local) == node)
        };
        let rank = on_node()
            .find(|s| s.device.as_deref() == Some(dev))
            .map(|s| s.rank)
            .ok_or_else(|| {
                let devs: Vec<String> = on_node().filter_map(|s| s.device.clone()).collect();
                anyhow!(
                    "line {line}: no rank on {node} uses device {dev} (devices there: {})",
                    if devs.is_empty() {
                        "none named".to_string()
                    } else {
                        devs.join(", ")
                    }
                )
            })?;
        Ok((i, Some(rank)))
    }

    /// The first dozen nodes' names, for a message.
    fn known(&self) -> String {
        let k: Vec<&str> = self.nodes.iter().take(12).map(|s| s.as_str()).collect();
        let more = if self.nodes.len() > 12 { ", ..." } else { "" };
        format!("{}{more}", k.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn slots(hosts: usize, per_host: u32) -> Vec<Slot> {
        let mut v = Vec::new();
        for h in 0..hosts {
            for l in 0..per_host {
                v.push(Slot {
                    rank: v.len() as u32,
                    host: format!("node{h:02}"),
                    local_rank: l,
                    device: Some(format!("mlx5_{l}")),
                });
            }
        }
        v
    }

    fn run(p: &str, s: &[Slot], mode: RailMode, file: Option<&str>) -> Result<Schedule> {
        schedule(&Request {
            pattern: &p.parse().unwrap(),
            slots: s,
            rail_mode: mode,
            include_local: false,
            fallback_seed: 7,
            file_text: file,
            fabric: None,
        })
    }

    /// Two groups of four hosts, two rails, each leaf holding `pairs` across the spines.
    fn capped_order(pairs: u32) -> crate::fabric::FabricOrder {
        let mut f = crate::fabric::FabricOrder::default();
        for h in 0..8 {
            for r in 0..2 {
                let leaf = format!("leaf-r{r}-g{}", h / 4);
                f.leaf.insert(format!("node{h:02} mlx5_{r}"), leaf.clone());
                f.leaf_cap.insert(leaf, pairs);
            }
        }
        f
    }

    fn run_capped(p: &str, s: &[Slot], f: &crate::fabric::FabricOrder) -> Schedule {
        schedule(&Request {
            pattern: &p.parse().unwrap(),
            slots: s,
            rail_mode: RailMode::Aligned,
            include_local: false,
            fallback_seed: 7,
            file_text: None,
            fabric: Some(f),
        })
        .unwrap()
    }

    #[test]
    fn oversubscribed_groups_cross_no_more_than_their_uplinks_carry() {
        let s = slots(8, 2);
        let plain = run("all-pairs", &s, RailMode::Aligned, None).unwrap();
        for cap in [1u32, 2] {
            let f = capped_order(cap);
            let capped = run_capped("all-pairs", &s, &f);
            check_disjoint(&capped);
            let host = |r: u32| s[r as usize].host.clone();
            let group = |r: u32| host(r)[4..].parse::<u32>().unwrap() / 4;
            // Every pair of every rail exactly once, as without the cap.
            let set = |x: &Schedule| {
                let mut v: Vec<(u32, u32)> = x
                    .rounds
                    .iter()
                    .flatten()
                    .map(|p| (p.initiator.min(p.responder), p.initiator.max(p.responder)))
                    .collect();
                v.sort();
                v
            };
            assert_eq!(set(&capped), set(&plain));
            for (i, round) in capped.rounds.iter().enumerate() {
                // Per rail (the two ranks of a host are its two rails' NICs).
                for rail in 0..2 {
                    let cross = round
                        .iter()
                        .filter(|p| s[p.initiator as usize].local_rank == rail)
                        .filter(|p| group(p.initiator) != group(p.responder))
                        .count();
                    assert!(cross as u32 <= cap, "round {i} rail {rail}: {cross} across");
                }
            }
            // 16 cross pairs a rail, at most `cap` a round.
            let (before, after) = capped.cross_capped.unwrap();
            assert_eq!(before, 7);
            assert_eq!(after, capped.rounds.len());
            assert!(after >= (16 / cap) as usize, "{after} rounds for cap {cap}");
        }
        // Latency sweeps and fabrics without oversubscription keep the circle.
        let uncapped = run_capped("all-pairs", &s, &crate::fabric::FabricOrder::default());
        assert_eq!(uncapped.rounds.len(), 7);
        assert!(uncapped.cross_capped.is_none());
        // Discovery puts node00's rail-0 NIC on g0's rail-1 leaf and back (a swapped
        // cable): its pairs inside g0 now cross, and no round loads a leaf more than once
        // but for a pair of node00's, which crosses on both rails and so loads both of
        // g0's leaves twice by itself.
        let mut f = capped_order(1);
        f.built.insert("node00 mlx5_0".into(), "leaf-r1-g0".into());
        f.built.insert("node00 mlx5_1".into(), "leaf-r0-g0".into());
        let swapped = run_capped("all-pairs", &s, &f);
        check_disjoint(&swapped);
        let host = |r: u32| s[r as usize].host.clone();
        let on = |rank: u32| {
            let key = format!("{} mlx5_{}", host(rank), s[rank as usize].local_rank);
            f.built.get(&key).unwrap_or(&f.leaf[&key]).clone()
        };
        for (i, round) in swapped.rounds.iter().enumerate() {
            let mut load: BTreeMap<String, u32> = BTreeMap::new();
            let mut node00 = false;
            for p in round {
                node00 |= host(p.initiator) == "node00" || host(p.responder) == "node00";
                let (a, b) = (on(p.initiator), on(p.responder));
                if a != b {
                    *load.entry(a).or_default() += 1;
                    *load.entry(b).or_default() += 1;
                }
            }
            let most = if node00 { 2 } else { 1 };
            assert!(load.values().all(|&c| c <= most), "round {i}: {load:?}");
        }
        let held = swapped.cross_capped.unwrap().1;
        let before = run_capped("all-pairs", &s, &capped_order(1)).rounds.len();
        assert!(
            held > before,
            "{held} rounds with the swap, {before} without"
        );
    }

    /// Every round's pairs are disjoint; returns the unordered host pairs (with rails).
    fn check_disjoint(s: &Schedule) {
        for (i, round) in s.rounds.iter().enumerate() {
            let mut seen = HashSet::new();
            for p in round {
                assert!(
                    seen.insert(p.initiator),
                    "round {i}: rank {} twice",
                    p.initiator
                );
                assert!(
                    seen.insert(p.responder),
                    "round {i}: rank {} twice",
                    p.responder
                );
            }
        }
    }

    #[test]
    fn all_pairs_meets_every_node_pair_once_for_odd_and_even_counts() {
        for n in 2..=17 {
            let sl = slots(n, 1);
            let s = run("all-pairs", &sl, RailMode::Aligned, None).unwrap();
            check_disjoint(&s);
            let expected_rounds = if n % 2 == 0 { n - 1 } else { n };
            assert_eq!(s.rounds.len(), expected_rounds, "n={n}");
            let mut met = HashSet::new();
            for p in s.rounds.iter().flatten() {
                let k = (p.initiator.min(p.responder), p.initiator.max(p.responder));
                assert!(met.insert(k), "n={n}: {k:?} twice");
            }
            assert_eq!(met.len(), n * (n - 1) / 2, "n={n}");
            for r in &s.rounds {
                assert_eq!(r.len(), n / 2, "n={n}: pairs per round");
            }
        }
    }

    #[test]
    fn ranks_of_one_host_are_not_paired_and_rails_align() {
        let sl = slots(4, 2);
        let s = run("all-pairs", &sl, RailMode::Aligned, None).unwrap();
        check_disjoint(&s);
        assert_eq!(s.rounds.len(), 3);
        assert_eq!(s.rails, 2);
        for p in s.rounds.iter().flatten() {
            let (a, b) = (&sl[p.initiator as usize], &sl[p.responder as usize]);
            assert_ne!(a.host, b.host);
            assert_eq!(a.local_rank, b.local_rank, "rail-aligned");
        }
        assert_eq!(s.planned_pairs(), 6 * 2);
        // --rails all: every rail meets every rail: 6 node pairs x 4 rail pairs.
        let s = run("all-pairs", &sl, RailMode::All, None).unwrap();
        check_disjoint(&s);
        assert_eq!(s.planned_pairs(), 6 * 4);
        assert_eq!(s.rounds.len(), 3 * 2);
    }

    #[test]
    fn one_host_needs_include_local() {
        let mut sl = slots(1, 4);
        let e = run("all-pairs", &sl, RailMode::Aligned, None).unwrap_err();
        assert!(e.to_string().contains("--include-local"), "{e}");
        let s = schedule(&Request {
            pattern: &PatternSpec::AllPairs,
            slots: &sl,
            rail_mode: RailMode::Aligned,
            include_local: true,
            fallback_seed: 1,
            file_text: None,
            fabric: None,
        })
        .unwrap();
        assert_eq!(
            s.nodes,
            vec!["node00/0", "node00/1", "node00/2", "node00/3"]
        );
        assert_eq!(s.planned_pairs(), 6);
        sl.truncate(3);
        let s = run("pairs", &sl, RailMode::Aligned, None);
        assert!(s.unwrap_err().to_string().contains("even number"));
    }

    #[test]
    fn pairs_is_todays_rank_pairing() {
        let s = run("pairs", &slots(1, 6), RailMode::Aligned, None).unwrap();
        assert_eq!(s.rounds.len(), 1);
        let r: Vec<(u32, u32)> = s.rounds[0]
            .iter()
            .map(|p| (p.initiator, p.responder))
            .collect();
        assert_eq!(r, vec![(0, 1), (2, 3), (4, 5)]);
    }

    #[test]
    fn ring_links_neighbours() {
        for n in [2usize, 3, 4, 5, 8] {
            let s = run("ring", &slots(n, 1), RailMode::Aligned, None).unwrap();
            check_disjoint(&s);
            let mut met: HashSet<(u32, u32)> = HashSet::new();
            for p in s.rounds.iter().flatten() {
                met.insert((p.initiator.min(p.responder), p.initiator.max(p.responder)));
            }
            let want: HashSet<(u32, u32)> = (0..n as u32)
                .map(|i| {
                    let j = (i + 1) % n as u32;
                    (i.min(j), i.max(j))
                })
                .collect();
            assert_eq!(met, want, "n={n}");
        }
    }

    #[test]
    fn random_matchings_repeat_with_their_seed() {
        let sl = slots(9, 1);
        let a = run("random:5:42", &sl, RailMode::Aligned, None).unwrap();
        let b = run("random:5:42", &sl, RailMode::Aligned, None).unwrap();
        let c = run("random:5:43", &sl, RailMode::Aligned, None).unwrap();
        assert_eq!(a.rounds, b.rounds);
        assert_ne!(a.rounds, c.rounds);
        assert_eq!(a.seed, Some(42));
        assert_eq!(a.rounds.len(), 5);
        check_disjoint(&a);
        for r in &a.rounds {
            assert_eq!(r.len(), 4, "9 nodes: 4 pairs, one idle");
        }
        let d = run("random", &sl, RailMode::Aligned, None).unwrap();
        assert_eq!(d.seed, Some(7), "the fallback seed is used and recorded");
        assert_eq!(d.rounds.len(), DEFAULT_RANDOM_ROUNDS as usize);
    }

    #[test]
    fn file_pairs_pack_into_disjoint_rounds_and_name_devices() {
        let sl = slots(4, 2);
        let text = "# retest\nnode00 node01\nnode00 node02, \n\nnode01:mlx5_1 node03:mlx5_1\n";
        let s = run("file:x", &sl, RailMode::Aligned, Some(text)).unwrap();
        check_disjoint(&s);
        let all: Vec<(u32, u32)> = s
            .rounds
            .iter()
            .flatten()
            .map(|p| (p.initiator, p.responder))
            .collect();
        // node00-node01 on both rails, node00-node02 on both rails, one pinned pair.
        assert_eq!(all.len(), 5, "{all:?}");
        assert!(all.contains(&(3, 7)));
        assert_eq!(s.rounds.len(), 2, "node00 is in two pairs: two rounds");
        for (bad, why) in [
            ("node00 node09\n", "no node named 'node09'"),
            ("node00 node00\n", "with itself"),
            ("node00 node01 node02\n", "not a pair"),
            (
                "node00:mlx5_7 node01:mlx5_0\n",
                "no rank on node00 uses device mlx5_7",
            ),
            ("node00:mlx5_0 node01\n", "on both sides or on neither"),
            ("# nothing\n", "no pairs"),
        ] {
            let e = run("file:x", &sl, RailMode::Aligned, Some(bad)).unwrap_err();
            assert!(format!("{e:#}").contains(why), "{bad:?}: {e:#}");
        }
    }

    #[test]
    fn pattern_names_parse_and_bad_ones_explain() {
        assert_eq!(
            "all-pairs".parse::<PatternSpec>(),
            Ok(PatternSpec::AllPairs)
        );
        assert_eq!(
            "random:3".parse::<PatternSpec>(),
            Ok(PatternSpec::Random {
                rounds: 3,
                seed: None
            })
        );
        assert_eq!(
            "random:3:9".parse::<PatternSpec>().unwrap().to_string(),
            "random:3:9"
        );
        assert_eq!("incast".parse::<PatternSpec>(), Ok(PatternSpec::Incast(0)));
        assert_eq!(
            "incast:3".parse::<PatternSpec>().unwrap().to_string(),
            "incast:3"
        );
        for bad in [
            "incast:0",
            "incast:x",
            "incasts",
            "mesh",
            "random:0",
            "random:x",
            "random:2:y",
            "file:",
            "randomly",
        ] {
            assert!(bad.parse::<PatternSpec>().is_err(), "{bad}");
        }
    }
}
