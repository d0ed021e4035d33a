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

use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::escape::shorten;
use crate::input::{self, BadInput};
use crate::judge::{self, Verdict};
use crate::plots::{self, Plots};
use crate::profile;
use crate::sign;
use crate::tables::{self, Tables};
use crate::templates::Templates;

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
    /// Test and size of the latency distribution plot.
    pub dist: Option<(String, u64)>,
    /// Input files at least this large are streamed (the `stream` module).
    pub stream_above: u64,
    /// Ceilings on what is read.
    pub limits: input::Limits,
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
struct ToolInfo {
    version: &'static str,
    git_commit: &'static str,
}

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

#[derive(Serialize, Default)]
struct Environment {
    hosts: Vec<HostRow>,
    /// Hosts beyond the first [`MAX_HOSTS`], counted, not listed.
    more_hosts: usize,
    versions: Vec<String>,
    more_versions: usize,
    command_lines: Vec<String>,
    more_command_lines: usize,
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
struct SignatureInfo {
    manifest: &'static str,
    file: &'static str,
    namespace: &'static str,
    identity: String,
    fingerprint: String,
    command: String,
}

#[derive(Serialize)]
struct Context<'a> {
    title: String,
    generated_at: String,
    tool: ToolInfo,
    profile: ProfileInfo,
    verdict: &'a Verdict,
    tables: &'a Tables,
    plots: &'a Plots,
    cluster: &'a Cluster,
    matrix_plots: Vec<MatrixPlot<'a>>,
    environment: Environment,
    inputs: Vec<InputInfo>,
    skipped: &'a [BadInput],
    incomplete: Vec<String>,
    warnings: Vec<String>,
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

fn err_io(p: &Path, e: std::io::Error) -> Error {
    Error::Output(format!("{}: {e}", p.display()))
}

/// Prepares the output directory before any work, so a long aggregation never ends in
/// "cannot write", and never mixes a new report with an old one's files.
fn prepare_out(out: &Path, force: bool) -> Result<()> {
    fs::create_dir_all(out).map_err(|e| err_io(out, e))?;
    let present: Vec<&str> = OWNED
        .iter()
        .copied()
        .filter(|n| out.join(n).exists())
        .collect();
    if !present.is_empty() {
        if !force {
            return Err(Error::Usage(format!(
                "{} already holds a report ({}); pass --force to replace it or choose another --out",
                out.display(),
                present.join(", ")
            )));
        }
        for n in present {
            let p = out.join(n);
            let r = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            r.map_err(|e| err_io(&p, e))?;
        }
    }
    results::write::check_writable(&out.join("report.html")).map_err(|e| err_io(out, e))
}

/// Phase timings on standard error when `AGGREGATE_TIMINGS` is set, for the scale
/// benchmark: which phase to optimise is a measurement, not a guess.
struct PhaseClock(Option<std::time::Instant>);

impl PhaseClock {
    fn new() -> Self {
        PhaseClock(std::env::var_os("AGGREGATE_TIMINGS").map(|_| std::time::Instant::now()))
    }
    fn lap(&mut self, phase: &str) {
        if let Some(t) = self.0 {
            eprintln!("aggregate: {phase}: {:.3} s", t.elapsed().as_secs_f64());
            self.0 = Some(std::time::Instant::now());
        }
    }
}

/// Runs `aggregate report`.
pub fn run(opts: &Options) -> Result<Outcome> {
    // Everything that can be wrong with the command line is found before the real work.
    let profile = profile::load(&opts.profile)?;
    let templates = Templates::load(opts.templates.as_deref())?;
    sign::check_identity(&opts.identity)?;
    let key = opts.sign.as_deref().map(sign::read_private).transpose()?;
    prepare_out(&opts.out, opts.force)?;

    let mut clock = PhaseClock::new();
    // Large inputs are streamed through their link or copy in the bundle (see `stream`);
    // a run that stops on a bad input leaves no half-made bundle behind.
    let inputs_dir = opts.out.join("inputs");
    let set = input::load_reading(
        &opts.inputs,
        opts.skip_bad,
        &opts.limits,
        &|i, p, size, budget| {
            (size >= opts.stream_above)
                .then(|| crate::stream::read(i, p, &opts.limits, budget, Some(&inputs_dir)))
                .flatten()
        },
    )
    .inspect_err(|_| {
        let _ = fs::remove_dir_all(&inputs_dir);
    })?;
    clock.lap("load");
    let tables = tables::build(&set.docs, profile.line_rate_gbit_s);
    clock.lap("tables");
    let mut verdict = judge::judge(&profile, &set.docs, &tables);
    clock.lap("judge");
    let cluster = crate::cluster::build(&profile, &set.docs);
    cluster.apply(&mut verdict);
    clock.lap("matrix");
    let dist = opts.dist.as_ref().map(|(t, s)| (t.as_str(), *s));
    if let Some((test, size)) = dist {
        if !tables
            .histograms
            .iter()
            .any(|(k, h)| k.test == test && k.size == size && !h.is_empty())
        {
            let have: BTreeSet<String> = tables
                .histograms
                .keys()
                .map(|k| format!("{} {}", k.test, k.size))
                .collect();
            return Err(Error::Usage(format!(
                "--dist-test {test} --dist-size {size}: no latency histogram for that test and \
                 size in the inputs (have: {})",
                have.into_iter().collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let plots = plots::draw_all(&tables, profile.line_rate_gbit_s, dist);
    clock.lap("plots");
    // Every file written, with the SHA-256 of the bytes written, for the manifest.
    let mut files: Vec<(String, String)> = Vec::new();
    let write = |files: &mut Vec<(String, String)>,
                 rel: &str,
                 bytes: &[u8],
                 hash: Option<&str>|
     -> Result<()> {
        let p = opts.out.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(|e| err_io(parent, e))?;
        }
        results::write::write_atomic(&p, bytes).map_err(|e| err_io(&p, e))?;
        let hash = hash.map_or_else(|| crate::digest::sha256_hex(bytes), str::to_string);
        files.push((rel.to_string(), hash));
        Ok(())
    };

    // Inputs, byte for byte: the bytes that were parsed and judged (read again, one at a
    // time, and checked against their digest), under names made only of plain characters.
    let mut inputs = Vec::new();
    for (i, d) in set.docs.iter().enumerate() {
        let name = d
            .path
            .file_name()
            .map(|n| crate::escape::file_name(&n.to_string_lossy()))
            .unwrap_or_else(|| "input.json".into());
        let rel = format!("inputs/{:04}-{name}", i + 1);
        match d.compact.as_ref().and_then(|c| c.copied.as_ref()) {
            // Streamed: the link or copy that was read is the evidence; it only gets its
            // name.
            Some(copy) => {
                let to = opts.out.join(&rel);
                fs::rename(copy, &to).map_err(|e| err_io(&to, e))?;
                files.push((rel.clone(), d.sha256.clone()));
            }
            None => write(&mut files, &rel, &d.read_judged_bytes()?, Some(&d.sha256))?,
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
    clock.lap("copy inputs");
    for (name, svg) in [
        ("latency", &plots.latency),
        ("bandwidth", &plots.bandwidth),
        ("collective", &plots.collective),
        ("distribution", &plots.distribution),
    ] {
        if let Some(svg) = svg {
            write(
                &mut files,
                &format!("plots/{name}.svg"),
                svg.as_bytes(),
                None,
            )?;
        }
    }

    for h in &cluster.heatmaps {
        write(&mut files, &h.file, h.svg.as_bytes(), None)?;
    }
    let retest = match cluster.retest_text(&results::provenance::now_rfc3339()) {
        Some(text) => {
            write(
                &mut files,
                crate::cluster::RETEST_FILE,
                text.as_bytes(),
                None,
            )?;
            Some((
                opts.out.join(crate::cluster::RETEST_FILE),
                cluster.retest.len(),
            ))
        }
        None => None,
    };
    let signature = key.as_ref().map(|k| SignatureInfo {
        manifest: sign::MANIFEST,
        file: sign::SIGNATURE,
        namespace: sign::NAMESPACE,
        identity: opts.identity.clone(),
        fingerprint: k
            .public_key()
            .fingerprint(ssh_key::HashAlg::Sha256)
            .to_string(),
        command: sign::verify_command(&opts.identity),
    });
    let incomplete: Vec<String> = set
        .docs
        .iter()
        .filter(|d| !d.doc.complete)
        .map(|d| {
            shorten(
                &format!(
                    "{} ({})",
                    d.path.display(),
                    d.doc
                        .incomplete_reason
                        .as_deref()
                        .unwrap_or("stopped early")
                ),
                SHORT,
            )
        })
        .collect();
    let mut warnings = BTreeSet::new();
    for d in &set.docs {
        for w in &d.doc.warnings {
            warnings.insert(shorten(&format!("{}: {w}", d.doc.tool), SHORT));
        }
    }
    let ctx = Context {
        title: opts
            .title
            .clone()
            .unwrap_or_else(|| format!("Fabric acceptance report: {}", profile.name)),
        generated_at: results::provenance::now_rfc3339(),
        tool: ToolInfo {
            version: results::provenance::TOOL_VERSION,
            git_commit: results::provenance::GIT_COMMIT,
        },
        profile: ProfileInfo {
            name: profile.name.clone(),
            description: profile.description.clone(),
            source: profile.source.clone(),
            line_rate_gbit_s: profile.line_rate_gbit_s,
        },
        verdict: &verdict,
        tables: &tables,
        plots: &plots,
        cluster: &cluster,
        matrix_plots: cluster
            .heatmaps
            .iter()
            .map(|h| MatrixPlot {
                title: &h.title,
                file: &h.file,
                svg: &h.svg,
            })
            .collect(),
        environment: environment(&set.docs),
        inputs,
        skipped: &set.skipped,
        incomplete,
        warnings: warnings.into_iter().take(200).collect(),
        synthetic: set
            .docs
            .iter()
            .any(|d| d.doc.tool_version == results::provenance::SYNTHETIC_TOOL_VERSION),
        signature,
    };
    for name in ["report.html", "report.md", "report.junit.xml"] {
        let text = templates.render(name, &ctx)?;
        write(&mut files, name, text.as_bytes(), None)?;
    }
    #[derive(Serialize)]
    struct Summary<'a> {
        verdict: &'a Verdict,
        tables: &'a Tables,
        /// The matrix, its suspects and the retest list (see `cluster`).
        matrix: &'a Cluster,
        skipped: &'a [BadInput],
        inputs: &'a [InputInfo],
    }
    let summary = serde_json::to_vec_pretty(&Summary {
        verdict: &verdict,
        tables: &tables,
        matrix: &cluster,
        skipped: &set.skipped,
        inputs: &ctx.inputs,
    })
    .map_err(|e| Error::Output(format!("summary.json: {e}")))?;
    write(&mut files, "summary.json", &summary, None)?;

    clock.lap("render");
    let fingerprint = match &key {
        Some(k) => Some(sign::sign_bundle(&opts.out, &files, k, &opts.identity)?),
        None => None,
    };
    clock.lap("sign");
    Ok(Outcome {
        verdict,
        dir: opts.out.clone(),
        files: files.into_iter().map(|f| f.0).collect(),
        fingerprint,
        suspects: cluster.summary_lines(),
        retest,
    })
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
            hosts.insert(
                name.clone(),
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
                },
            );
        }
    }
    Environment {
        hosts: hosts.into_values().collect(),
        more_hosts: extra_hosts.len(),
        more_versions: versions.len().saturating_sub(MAX_LINES),
        versions: versions.into_iter().take(MAX_LINES).collect(),
        more_command_lines: cmds.len().saturating_sub(MAX_LINES),
        command_lines: cmds.into_iter().take(MAX_LINES).collect(),
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
