//! `aggregate report`: the acceptance bundle a customer receives. One directory:
//!
//! ```text
//! report.html         verdict, checks, inline SVG plots, environment, tables (self-contained)
//! report.md           the same content in Markdown (plots linked from plots/)
//! report.junit.xml    one test case per check, for CI
//! summary.json        verdict and merged tables for machines
//! plots/*.svg         the figures
//! inputs/NNNN-*.json  byte-exact copies of every result file judged
//! MANIFEST.sha256, MANIFEST.sha256.sig, allowed_signers   with --sign
//! ```
//!
//! The inputs travel with the report so the signature covers the evidence, not only the
//! conclusion, and anyone can re-judge the same bytes.

use std::collections::{BTreeMap, BTreeSet};

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle::{Bundle, SignatureInfo, ToolInfo};
use crate::clock::PhaseClock;
use crate::cluster::Cluster;
use crate::plots::{self, Plots};
use crate::sign;
use crate::templates::Templates;
use verdict::error::{Error, Result};
use verdict::escape::shorten;
use verdict::input::{self, BadInput, Loaded};
use verdict::judge::{self, Verdict};
use verdict::profile;
use verdict::tables::{self, Tables};

/// Options of `aggregate report`.
#[derive(Debug, Clone)]
pub struct Options {
    pub inputs: Vec<PathBuf>,
    pub profile: String,
    pub out: PathBuf,
    pub templates: Option<PathBuf>,
    pub sign: Option<PathBuf>,
    pub identity: String,
    pub skip_bad: bool,
    pub force: bool,
    pub title: Option<String>,
    /// Test (and sizes; all spread when empty) of the latency distribution plot.
    pub dist: Option<(String, Vec<u64>)>,
    /// Ceilings on what is read.
    pub limits: input::Limits,
    /// Input files at least this large are streamed (the `stream` module).
    pub stream_above: u64,
    /// The fabric plan (`--plan`) and its format (`--plan-format`; detected when `None`).
    pub plan: Option<PathBuf>,
    pub plan_format: Option<String>,
    /// The tenants file (`--tenants`; else the plan's tenants).
    pub tenants: Option<PathBuf>,
    /// The one tenant this report is for (`--tenant`).
    pub tenant: Option<String>,
}

/// Names this command writes into the output directory (and removes on `--force`).
const OWNED: &[&str] = &[
    "report.html",
    "report.md",
    "report.junit.xml",
    "summary.json",
    crate::cluster::RETEST_FILE,
    "plots",
    "inputs",
    sign::MANIFEST,
    sign::SIGNATURE,
    sign::ALLOWED_SIGNERS,
];

#[derive(Serialize)]
struct ProfileInfo {
    name: String,
    description: String,
    source: String,
    line_rate_gbit_s: Option<f64>,
}

#[derive(Serialize)]
struct InputInfo {
    path: String,
    bundle_path: String,
    tool: String,
    started_at: String,
    ranks: u32,
    results: usize,
    complete: bool,
    sha256: String,
}

#[derive(Serialize, Default)]
struct HostRow {
    hostname: String,
    kernel: String,
    cpu_model: String,
    cores: u32,
    numa_nodes: u32,
    rdma: String,
    gpus: String,
    net: String,
}

/// One GPU of one host, with its nearest NIC.
#[derive(Serialize, Default)]
struct GpuRow {
    host: String,
    index: u32,
    name: String,
    pci_bus_id: String,
    uuid: String,
    numa_node: String,
    nearest_nic: String,
    driver: String,
    peermem: String,
}

/// A way GPU (or dma-buf) memory reached the fabric in the results: which GPU, how it was
/// registered, with which NIC, and what was measured so.
#[derive(Serialize, Default)]
struct GpuPath {
    host: String,
    gpu: String,
    path: String,
    nic: String,
    relation: String,
    tests: String,
    warnings: Vec<String>,
}

#[derive(Serialize, Default)]
struct Environment {
    hosts: Vec<HostRow>,
    /// Hosts beyond the first [`MAX_HOSTS`], counted, not listed.
    more_hosts: usize,
    gpus: Vec<GpuRow>,
    gpu_paths: Vec<GpuPath>,
    versions: Vec<String>,
    more_versions: usize,
    command_lines: Vec<String>,
    more_command_lines: usize,
}

/// Measurement quality of every input document (`results::quality`), judged again here.
#[derive(Serialize, Default)]
struct QualityInfo {
    /// Documents whose runs were disturbed, with every reason.
    disturbed: Vec<DocQuality>,
    /// Documents with a quality record and nothing over a threshold.
    clean: usize,
    /// Documents without a quality record (older writers, synthetic data).
    unknown: usize,
}

/// Characters shown of a name (host, kernel, CPU) and of a message or list; the bundle's
/// input copies keep every byte.
const NAME: usize = 256;
const SHORT: usize = 1024;

/// Rows of the hosts table (a 1,024-node cluster lists every node); more are counted.
const MAX_HOSTS: usize = 4096;
/// Versions and command lines listed; more are counted.
const MAX_LINES: usize = 50;

#[derive(Serialize)]
struct DocQuality {
    path: String,
    tool: String,
    reasons: Vec<String>,
}

fn quality_info(docs: &[input::Loaded]) -> QualityInfo {
    let mut q = QualityInfo::default();
    for d in docs {
        let m = results::quality::Marks::of(&d.doc);
        if !m.known() {
            q.unknown += 1;
        } else if m.any_disturbed() {
            q.disturbed.push(DocQuality {
                path: shorten(&d.path.display().to_string(), SHORT),
                tool: d.doc.tool.clone(),
                reasons: m
                    .reasons()
                    .iter()
                    .take(50)
                    .map(|r| shorten(r, SHORT))
                    .collect(),
            });
        } else {
            q.clean += 1;
        }
    }
    q
}

#[derive(Serialize)]
struct Context<'a> {
    title: String,
    /// The one tenant the report is cut for (`--tenant`).
    tenant: Option<String>,
    generated_at: String,
    tool: ToolInfo,
    profile: ProfileInfo,
    verdict: &'a Verdict,
    tables: &'a Tables,
    plots: &'a Plots,
    cluster: &'a Cluster,
    /// The fabric under load (bench-congestion runs).
    load: &'a diagnosis::load::Load,
    matrix_plots: Vec<MatrixPlot<'a>>,
    /// The structure's picture and per-direction matrices (trusted SVG made here).
    fabric_svg: Option<&'a str>,
    direction_plots: Vec<MatrixPlot<'a>>,
    environment: Environment,
    inputs: Vec<InputInfo>,
    skipped: &'a [BadInput],
    incomplete: Vec<String>,
    warnings: Vec<String>,
    quality: QualityInfo,
    synthetic: bool,
    signature: Option<SignatureInfo>,
}

/// A heatmap as the templates see it.
#[derive(Serialize)]
struct MatrixPlot<'a> {
    title: &'a str,
    file: &'a str,
    svg: &'a str,
}

/// What a finished report run produced.
pub struct Outcome {
    pub verdict: Verdict,
    pub dir: PathBuf,
    pub files: Vec<String>,
    pub fingerprint: Option<String>,
    /// One line per suspect the matrix names.
    pub suspects: Vec<String>,
    /// The retest list written, with its number of pairs.
    pub retest: Option<(PathBuf, usize)>,
}

/// What the report says, made from the inputs: the tables, the verdict with the matrix
/// applied, the matrix and the plots. Refuses a `--dist-test` the inputs cannot draw.
fn analyse(
    opts: &Options,
    profile: &profile::Profile,
    set: &input::InputSet,
    plan: Option<&results::fabric_plan::FabricPlan>,
    tenants: Option<&results::tenants::Tenants>,
    clock: &mut PhaseClock,
) -> Result<(
    tables::Tables,
    Verdict,
    crate::cluster::Cluster,
    plots::Plots,
)> {
    let tables = tables::build(set, profile.line_rate_gbit_s);
    clock.lap("tables");
    // The checks and the matrix read the same inputs and nothing of each other: the matrix
    // is built on a thread of its own beside the checks, and applied to the verdict after.
    let (mut verdict, cluster) = std::thread::scope(|s| {
        let matrix = s.spawn(|| {
            clock.own("matrix", || {
                crate::cluster::build_with(profile, &set.docs, plan, tenants)
            })
        });
        let verdict = clock.own("judge", || judge::judge(profile, &set.docs, &tables));
        let cluster = matrix
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (verdict, cluster)
    });
    cluster.apply(&mut verdict);
    clock.lap("judge and matrix");
    let dist = opts.dist.as_ref().map(|(t, s)| (t.as_str(), s.as_slice()));
    if let Some((test, sizes)) = dist {
        let wanted: Vec<Option<u64>> = if sizes.is_empty() {
            vec![None]
        } else {
            sizes.iter().copied().map(Some).collect()
        };
        for size in wanted {
            if !tables
                .histograms
                .iter()
                .any(|(k, h)| k.test == test && size.is_none_or(|s| k.size == s) && !h.is_empty())
            {
                let have: BTreeSet<String> = tables
                    .histograms
                    .keys()
                    .map(|k| format!("{} {}", k.test, k.size))
                    .collect();
                let asked = size
                    .map(|s| format!(" --dist-size {s}"))
                    .unwrap_or_default();
                return Err(Error::Usage(format!(
                    "--dist-test {test}{asked}: no latency histogram for that test and \
                     size in the inputs (have: {})",
                    have.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    let plots = plots::draw_all(&tables, profile.line_rate_gbit_s, dist);
    clock.lap("plots");
    Ok((tables, verdict, cluster, plots))
}

/// Inputs, byte for byte, into the bundle under names made only of plain characters: the
/// bytes that were parsed and judged (the copy or link made as each was read, renamed;
/// else read again, one at a time, and checked against their digest).
fn copy_inputs(bundle: &mut Bundle, docs: &[input::Loaded]) -> Result<Vec<InputInfo>> {
    let mut inputs = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let name = d
            .path
            .file_name()
            .map(|n| verdict::escape::file_name(&n.to_string_lossy()))
            .unwrap_or_else(|| "input.json".into());
        let rel = format!("inputs/{:04}-{name}", i + 1);
        match &d.copied {
            // The link or copy written as it was read is the evidence; it only gets its
            // name.
            Some(copy) => bundle.adopt(copy, &rel, &d.sha256)?,
            None => bundle.write(&rel, &d.read_judged_bytes()?, Some(&d.sha256))?,
        }
        inputs.push(InputInfo {
            path: shorten(&d.path.display().to_string(), SHORT),
            bundle_path: rel,
            tool: d.doc.tool.clone(),
            started_at: d.doc.started_at.clone(),
            ranks: d.doc.ranks,
            results: d.row_count(),
            complete: d.doc.complete,
            sha256: d.sha256.clone(),
        });
    }
    Ok(inputs)
}

/// What the command line resolves to before any work: everything that can be wrong with
/// it is found here.
struct Prepared {
    profile: profile::Profile,
    templates: Templates,
    key: Option<ssh_key::PrivateKey>,
    plan: Option<results::fabric_plan::FabricPlan>,
    tenants: Option<results::tenants::Tenants>,
    /// `--tenant`: the inputs, plan and tenants cut to its nodes (the cut inputs' files
    /// live as long as this).
    cut: Option<crate::tenant::Cut>,
}

impl Prepared {
    fn inputs<'a>(&'a self, opts: &'a Options) -> &'a [PathBuf] {
        self.cut.as_ref().map_or(&opts.inputs, |c| &c.inputs)
    }
    fn plan(&self) -> Option<&results::fabric_plan::FabricPlan> {
        match &self.cut {
            Some(c) => c.plan.as_ref(),
            None => self.plan.as_ref(),
        }
    }
    fn tenants(&self) -> Option<&results::tenants::Tenants> {
        match &self.cut {
            Some(c) => Some(&c.tenants),
            None => self.tenants.as_ref(),
        }
    }
}

/// The profile, templates, signing identity and key, plan and tenants; with `--tenant`,
/// the inputs, plan and tenants cut to that tenant's nodes.
fn prepare(opts: &Options) -> Result<Prepared> {
    let profile = profile::load(&opts.profile)?;
    let templates = Templates::load(opts.templates.as_deref())?;
    sign::check_identity(&opts.identity)?;
    let key = opts.sign.as_deref().map(sign::read_private).transpose()?;
    let plan = load_plan(opts.plan.as_deref(), opts.plan_format.as_deref())?;
    let tenants = load_tenants(opts.tenants.as_deref(), plan.as_ref())?;
    let cut = match &opts.tenant {
        Some(name) => Some(crate::tenant::cut(
            &opts.inputs,
            opts.skip_bad,
            &opts.limits,
            name,
            tenants.as_ref(),
            plan.as_ref(),
        )?),
        None => None,
    };
    Ok(Prepared {
        profile,
        templates,
        key,
        plan,
        tenants,
        cut,
    })
}

/// Reads the inputs. Large ones are streamed through their link or copy in the bundle
/// (see `stream`); a run that stops on a bad input leaves no half-made bundle behind.
fn load_inputs(opts: &Options, inputs: &[PathBuf], inputs_dir: &Path) -> Result<input::InputSet> {
    input::load_reading(
        inputs,
        opts.skip_bad,
        &opts.limits,
        &|i, p, size, budget| {
            (size >= opts.stream_above)
                .then(|| verdict::stream::read(i, p, &opts.limits, budget, Some(inputs_dir)))
                .flatten()
                .or_else(|| {
                    Some(input::read_whole_copying(
                        i,
                        p,
                        size,
                        budget,
                        opts.limits.latency_groups,
                        inputs_dir,
                    ))
                })
        },
    )
    .inspect_err(|_| {
        let _ = fs::remove_dir_all(inputs_dir);
    })
}

/// The plots, heatmaps, the fabric's picture and its per-direction matrices as files.
fn write_pictures(bundle: &mut Bundle, plots: &plots::Plots, cluster: &Cluster) -> Result<()> {
    for (name, svg) in [
        ("latency", &plots.latency),
        ("bandwidth", &plots.bandwidth),
        ("collective", &plots.collective),
        ("scaling", &plots.scaling),
        ("distribution", &plots.distribution),
    ] {
        if let Some(svg) = svg {
            bundle.write(&format!("plots/{name}.svg"), svg.as_bytes(), None)?;
        }
    }
    for h in &cluster.heatmaps {
        bundle.write(&h.file, h.svg.as_bytes(), None)?;
    }
    if let Some(st) = &cluster.structure {
        bundle.write("plots/fabric.svg", st.svg.as_bytes(), None)?;
        for m in &st.matrices {
            bundle.write(&m.file, m.svg.as_bytes(), None)?;
        }
    }
    Ok(())
}

/// The retest's pair file, when the matrix named suspects: its path and pair count.
fn write_retest(
    bundle: &mut Bundle,
    opts: &Options,
    cluster: &Cluster,
) -> Result<Option<(PathBuf, usize)>> {
    let Some(text) = cluster.retest_text(&results::provenance::now_rfc3339()) else {
        return Ok(None);
    };
    bundle.write(crate::cluster::RETEST_FILE, text.as_bytes(), None)?;
    Ok(Some((
        opts.out.join(crate::cluster::RETEST_FILE),
        cluster.retest.len(),
    )))
}

/// The inputs that stopped early, with why.
fn incomplete_of(docs: &[Loaded]) -> Vec<String> {
    docs.iter()
        .filter(|d| !d.doc.complete)
        .map(|d| {
            let why = d
                .doc
                .incomplete_reason
                .as_deref()
                .unwrap_or("stopped early");
            shorten(&format!("{} ({why})", d.path.display()), SHORT)
        })
        .collect()
}

/// The tools' warnings, each once, the first 200.
fn warnings_of(docs: &[Loaded]) -> Vec<String> {
    let mut warnings = BTreeSet::new();
    for d in docs {
        for w in &d.doc.warnings {
            warnings.insert(shorten(&format!("{}: {w}", d.doc.tool), SHORT));
        }
    }
    warnings.into_iter().take(200).collect()
}

/// What was judged, for the templates and the summary.
struct Judged {
    tables: Tables,
    verdict: Verdict,
    cluster: Cluster,
    plots: plots::Plots,
    load: diagnosis::load::Load,
}

/// The templates' context: the judged parts, the inputs and how they were read.
fn context<'a>(
    opts: &Options,
    profile: &profile::Profile,
    j: &'a Judged,
    set: &'a input::InputSet,
    inputs: Vec<InputInfo>,
    signature: Option<SignatureInfo>,
) -> Context<'a> {
    let cluster = &j.cluster;
    Context {
        title: opts.title.clone().unwrap_or_else(|| match &opts.tenant {
            Some(t) => format!("Fabric acceptance report: {}, tenant {t}", profile.name),
            None => format!("Fabric acceptance report: {}", profile.name),
        }),
        tenant: opts.tenant.clone(),
        generated_at: results::provenance::now_rfc3339(),
        tool: ToolInfo::this(),
        profile: ProfileInfo {
            name: profile.name.clone(),
            description: profile.description.clone(),
            source: profile.source.clone(),
            line_rate_gbit_s: profile.line_rate_gbit_s,
        },
        verdict: &j.verdict,
        tables: &j.tables,
        plots: &j.plots,
        cluster,
        load: &j.load,
        matrix_plots: cluster
            .heatmaps
            .iter()
            .map(|h| MatrixPlot {
                title: &h.title,
                file: &h.file,
                svg: &h.svg,
            })
            .collect(),
        fabric_svg: cluster.structure.as_ref().map(|s| s.svg.as_str()),
        direction_plots: cluster
            .structure
            .iter()
            .flat_map(|s| &s.matrices)
            .map(|m| MatrixPlot {
                title: &m.rail,
                file: &m.file,
                svg: &m.svg,
            })
            .collect(),
        environment: environment(&set.docs),
        inputs,
        skipped: &set.skipped,
        incomplete: incomplete_of(&set.docs),
        warnings: warnings_of(&set.docs),
        quality: quality_info(&set.docs),
        synthetic: set
            .docs
            .iter()
            .any(|d| d.doc.tool_version == results::provenance::SYNTHETIC_TOOL_VERSION),
        signature,
    }
}

/// `summary.json`: the verdict, tables, matrix, load, skipped inputs and inputs.
#[derive(Serialize)]
struct Summary<'a> {
    verdict: &'a Verdict,
    tables: &'a Tables,
    /// The matrix, its suspects and the retest list (see `cluster`).
    matrix: &'a Cluster,
    /// The congestion runs and incast rounds (see `load`).
    #[serde(skip_serializing_if = "is_quiet")]
    load: &'a diagnosis::load::Load,
    skipped: &'a [BadInput],
    inputs: &'a [InputInfo],
}

/// Runs `aggregate report`: the command line resolved, the inputs read and judged, the
/// bundle's files written, rendered and signed.
pub fn run(opts: &Options) -> Result<Outcome> {
    let p = prepare(opts)?;
    let mut bundle = Bundle::prepare(&opts.out, opts.force, OWNED)?;
    let mut clock = PhaseClock::new();
    let inputs_dir = opts.out.join("inputs");
    let set = load_inputs(opts, p.inputs(opts), &inputs_dir)?;
    clock.lap("load");
    // A refused --dist-test leaves no copies of the inputs behind either.
    let (tables, verdict, cluster, plots) =
        analyse(opts, &p.profile, &set, p.plan(), p.tenants(), &mut clock).inspect_err(|_| {
            let _ = fs::remove_dir_all(&inputs_dir);
        })?;
    let inputs = copy_inputs(&mut bundle, &set.docs)?;
    clock.lap("copy inputs");
    write_pictures(&mut bundle, &plots, &cluster)?;
    let retest = write_retest(&mut bundle, opts, &cluster)?;
    let signature = p.key.as_ref().map(|k| SignatureInfo::of(k, &opts.identity));
    let j = Judged {
        load: diagnosis::load::build(&set.docs),
        tables,
        verdict,
        cluster,
        plots,
    };
    let ctx = context(opts, &p.profile, &j, &set, inputs, signature);
    let summary = Summary {
        verdict: &j.verdict,
        tables: &j.tables,
        matrix: &j.cluster,
        load: &j.load,
        skipped: &set.skipped,
        inputs: &ctx.inputs,
    };
    let fingerprint = bundle.finish(
        &["report.html", "report.md", "report.junit.xml"],
        &p.templates,
        &ctx,
        &summary,
        p.key.as_ref().map(|k| (k, opts.identity.as_str())),
        &mut clock,
    )?;
    let Judged {
        tables,
        verdict,
        cluster,
        plots,
        load,
    } = j;
    let outcome = Outcome {
        verdict,
        dir: opts.out.clone(),
        files: bundle.files.into_iter().map(|f| f.0).collect(),
        fingerprint,
        suspects: cluster.summary_lines(),
        retest,
    };
    // Freeing the inputs' rows, groups and tables is tens of milliseconds at 1024 ranks
    // (0.035-0.044 s measured, a twentieth of the run), and nothing is left to write: it is
    // done on a thread of its own, which the process's exit may cut short.
    let done = (set, tables, cluster, plots, load);
    std::thread::spawn(move || drop(done));
    Ok(outcome)
}

fn is_quiet(l: &&diagnosis::load::Load) -> bool {
    !l.present()
}

/// Reads `--plan` (before any work, so a bad plan costs nothing).
/// The tenants: `--tenants FILE`, else the plan's `[[tenant]]` tables, else none.
pub fn load_tenants(
    path: Option<&std::path::Path>,
    plan: Option<&results::fabric_plan::FabricPlan>,
) -> Result<Option<results::tenants::Tenants>> {
    if let Some(p) = path {
        return results::tenants::Tenants::load(p)
            .map(Some)
            .map_err(|e| Error::Usage(e.0));
    }
    match plan {
        Some(p) if !p.tenant.is_empty() => p.tenants().map(Some).map_err(|e| Error::Usage(e.0)),
        _ => Ok(None),
    }
}

pub fn load_plan(
    path: Option<&std::path::Path>,
    format: Option<&str>,
) -> Result<Option<results::fabric_plan::FabricPlan>> {
    use results::fabric_plan::{self as fp, Format};
    let format = match format {
        None => None,
        Some(f) => Some(Format::parse(f).ok_or_else(|| {
            Error::Usage(format!(
                "--plan-format {f}: unknown; one of {}",
                Format::NAMES.join(", ")
            ))
        })?),
    };
    let Some(path) = path else {
        if format.is_some() {
            return Err(Error::Usage("--plan-format needs --plan FILE".into()));
        }
        return Ok(None);
    };
    fp::load(path, format)
        .map(Some)
        .map_err(|e| Error::Usage(format!("--plan {}", e.0)))
}

/// GPUs of every host (from the hosts' facts) and the GPU memory paths the results used.
fn gpu_environment(docs: &[input::Loaded]) -> (Vec<GpuRow>, Vec<GpuPath>) {
    let mut gpus: BTreeMap<(String, u32), GpuRow> = BTreeMap::new();
    // (host, GPU, path, NIC) -> the path and the tests measured along it.
    type PathKey = (String, String, String, String);
    let mut paths: BTreeMap<PathKey, (GpuPath, BTreeSet<String>)> = BTreeMap::new();
    for d in docs {
        for h in &d.doc.hosts {
            for g in &h.gpus {
                gpus.entry((h.hostname.clone(), g.index))
                    .or_insert_with(|| gpu_row(h, g));
            }
        }
        for r in &d.doc.results {
            let (test, size, transport, pair, memory) = match r {
                results::TestResult::Latency(l) => {
                    (&l.test, l.size_bytes, &l.transport, &l.pair, &l.memory)
                }
                results::TestResult::Bandwidth(b) => {
                    (&b.test, b.size_bytes, &b.transport, &b.pair, &b.memory)
                }
                results::TestResult::Collective(_) => continue,
            };
            let Some(m) = memory else { continue };
            for (side, host) in [
                (&m.initiator, &pair.initiator.host),
                (&m.responder, &pair.responder.host),
            ] {
                let Some(side) = side else { continue };
                if side.kind != "cuda" && side.path != "host_dmabuf" {
                    continue;
                }
                let gpu = side.gpu.as_ref().map_or("host memory".to_string(), |g| {
                    format!(
                        "GPU {} ({}, {})",
                        g.index,
                        g.name,
                        g.pci_bus_id.as_deref().unwrap_or("?")
                    )
                });
                let nic = side.nic.clone().unwrap_or_else(|| "-".into());
                let key = (host.clone(), gpu.clone(), side.path.clone(), nic.clone());
                let e = paths.entry(key).or_insert_with(|| {
                    (
                        GpuPath {
                            host: host.clone(),
                            gpu,
                            path: side.path.clone(),
                            nic,
                            relation: side.relation.clone().unwrap_or_else(|| "-".into()),
                            ..Default::default()
                        },
                        BTreeSet::new(),
                    )
                });
                e.1.insert(format!(
                    "{test} {transport} {}",
                    verdict::tables::size_label(size)
                ));
                for w in &side.warnings {
                    if !e.0.warnings.contains(w) {
                        e.0.warnings.push(w.clone());
                    }
                }
            }
        }
    }
    let paths = paths
        .into_values()
        .map(|(p, tests)| with_tests(p, tests))
        .collect();
    (gpus.into_values().collect(), paths)
}

/// One GPU's row of the environment table.
fn gpu_row(h: &results::HostInfo, g: &results::GpuInfo) -> GpuRow {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "?".into());
    GpuRow {
        host: h.hostname.clone(),
        index: g.index,
        name: g.name.clone(),
        pci_bus_id: opt(&g.pci_bus_id),
        uuid: opt(&g.uuid),
        numa_node: g.numa_node.map_or("?".into(), |n| n.to_string()),
        nearest_nic: match (&g.nearest_rdma_device, &g.rdma_relation) {
            (Some(n), Some(r)) => format!("{n} ({r})"),
            (Some(n), None) => n.clone(),
            _ => "none".into(),
        },
        driver: opt(&h.gpu_driver),
        peermem: match h.nvidia_peermem {
            Some(true) => "loaded".into(),
            Some(false) => "not loaded".into(),
            None => "?".into(),
        },
    }
}

/// A GPU memory path with the tests measured along it (the first eight, then how many more).
fn with_tests(mut p: GpuPath, tests: BTreeSet<String>) -> GpuPath {
    const MAX_TESTS: usize = 8;
    let n = tests.len();
    let mut list: Vec<String> = tests.into_iter().take(MAX_TESTS).collect();
    if n > MAX_TESTS {
        list.push(format!("and {} more", n - MAX_TESTS));
    }
    p.tests = list.join(", ");
    p
}

/// Hosts (one row per host name), versions and command lines across every document.
fn environment(docs: &[input::Loaded]) -> Environment {
    let mut hosts: BTreeMap<String, HostRow> = BTreeMap::new();
    let mut extra_hosts: BTreeSet<&str> = BTreeSet::new();
    let mut versions = BTreeSet::new();
    let mut cmds = BTreeSet::new();
    for d in docs {
        versions.insert(shorten(
            &format!(
                "{} {} (git {}), schema v{}, launcher {}, clock {}",
                d.doc.tool,
                d.doc.tool_version,
                d.doc.git_commit,
                d.doc.schema_version,
                d.doc.launcher,
                d.doc.clock.as_deref().unwrap_or("?")
            ),
            SHORT,
        ));
        cmds.insert(shorten(&shell_join(&d.doc.command_line), 4 * SHORT));
        for h in &d.doc.hosts {
            let name = shorten(&h.hostname, NAME);
            if hosts.contains_key(&name) || extra_hosts.contains(h.hostname.as_str()) {
                continue;
            }
            if hosts.len() >= MAX_HOSTS {
                extra_hosts.insert(h.hostname.as_str());
                continue;
            }
            hosts.insert(name.clone(), host_row(h, name));
        }
    }
    let (gpus, gpu_paths) = gpu_environment(docs);
    Environment {
        hosts: hosts.into_values().collect(),
        more_hosts: extra_hosts.len(),
        gpus,
        gpu_paths,
        more_versions: versions.len().saturating_sub(MAX_LINES),
        versions: versions.into_iter().take(MAX_LINES).collect(),
        more_command_lines: cmds.len().saturating_sub(MAX_LINES),
        command_lines: cmds.into_iter().take(MAX_LINES).collect(),
    }
}

/// One host's row: kernel, CPU, RDMA devices with their ports, GPUs by model, netdevs.
fn host_row(h: &results::HostInfo, name: String) -> HostRow {
    let rdma: Vec<String> = h
        .rdma_devices
        .iter()
        .map(|r| {
            let ports: Vec<String> = r
                .ports
                .iter()
                .map(|p| format!("port {} {} {} {}", p.port, p.state, p.rate, p.link_layer))
                .collect();
            format!(
                "{}{} {}",
                r.name,
                r.fw_ver
                    .as_deref()
                    .map(|f| format!(" (fw {f})"))
                    .unwrap_or_default(),
                ports.join("; ")
            )
        })
        .collect();
    let mut gpus: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &h.gpus {
        *gpus.entry(g.name.as_str()).or_default() += 1;
    }
    let net: Vec<String> = h
        .net_devices
        .iter()
        .map(|n| {
            format!(
                "{} mtu {} {}",
                n.name,
                n.mtu.map(|m| m.to_string()).unwrap_or("?".into()),
                n.speed_mbit_s
                    .map(|s| format!("{s} Mb/s"))
                    .unwrap_or_else(|| n.operstate.clone())
            )
        })
        .collect();
    HostRow {
        hostname: name,
        kernel: shorten(&h.kernel, NAME),
        cpu_model: shorten(&h.cpu_model, NAME),
        cores: h.cores,
        numa_nodes: h.numa_nodes,
        rdma: if rdma.is_empty() {
            "none".into()
        } else {
            shorten(&rdma.join(", "), SHORT)
        },
        gpus: if gpus.is_empty() {
            "none".into()
        } else {
            let list = gpus
                .iter()
                .map(|(n, c)| format!("{c}x {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            shorten(&list, SHORT)
        },
        net: shorten(&net.join(", "), SHORT),
    }
}

/// A command line as a shell would need it typed back.
fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    use results::{GpuInfo, MemorySide, MemoryUse, TestResult};

    #[test]
    fn gpus_and_gpu_memory_paths_reach_the_environment() {
        let mut doc = synth::bandwidth_doc("node-a", "node-b", &[1 << 20, 8 << 20], 380.0, 1);
        let gpu = GpuInfo {
            index: 3,
            name: "NVIDIA H200".into(),
            pci_bus_id: Some("0000:5d:00.0".into()),
            uuid: Some("GPU-1234".into()),
            numa_node: Some(0),
            nearest_rdma_device: Some("mlx5_3".into()),
            rdma_relation: Some("PIX".into()),
            ..Default::default()
        };
        doc.hosts[0].gpus = vec![gpu.clone()];
        doc.hosts[0].gpu_driver = Some("550.54.15 open".into());
        doc.hosts[0].nvidia_peermem = Some(false);
        let side = MemorySide {
            kind: "cuda".into(),
            path: "dmabuf".into(),
            gpu: Some(gpu),
            nic: Some("mlx5_3".into()),
            relation: Some("PIX".into()),
            warnings: vec!["ACS <b>on</b>".into()],
            ..Default::default()
        };
        for r in &mut doc.results {
            if let TestResult::Bandwidth(b) = r {
                b.memory = Some(MemoryUse {
                    initiator: Some(side.clone()),
                    responder: Some(MemorySide {
                        kind: "host".into(),
                        path: "host".into(),
                        ..Default::default()
                    }),
                });
            }
        }
        let host_only = synth::latency_doc("node-c", "node-d", &[2], 2.0, 2);
        let docs: Vec<input::Loaded> = [doc, host_only]
            .into_iter()
            .map(|d| {
                input::Loaded::from_text("x.json", &serde_json::to_string(&d).unwrap()).unwrap()
            })
            .collect();
        let (gpus, paths) = gpu_environment(&docs);
        assert_eq!(gpus.len(), 1);
        let g = &gpus[0];
        assert_eq!((g.index, g.name.as_str()), (3, "NVIDIA H200"));
        assert_eq!(g.nearest_nic, "mlx5_3 (PIX)");
        assert_eq!(
            (g.driver.as_str(), g.peermem.as_str()),
            ("550.54.15 open", "not loaded")
        );
        // One path (the initiator's GPU); the host-memory responder is not a GPU path.
        assert_eq!(paths.len(), 1, "{}", paths.len());
        let p = &paths[0];
        assert_eq!(p.host, "node-a");
        assert_eq!(p.gpu, "GPU 3 (NVIDIA H200, 0000:5d:00.0)");
        assert_eq!(
            (p.path.as_str(), p.nic.as_str(), p.relation.as_str()),
            ("dmabuf", "mlx5_3", "PIX")
        );
        assert_eq!(p.tests.matches("send_bw").count(), 2, "{}", p.tests);
        assert_eq!(p.warnings, ["ACS <b>on</b>"], "once, however many rows");
    }
}
