//! The README and the guide stay true: every relative link of `README.md` and `docs/**/*.md`
//! resolves (the file exists, a `#anchor` names a heading of the target by GitHub's rules),
//! and every command line of the README's `sh`/`bash` blocks that runs one of the
//! workspace's binaries names a binary that exists and options (and, for `aggregate`, a
//! subcommand) that its built `--help` lists.
//!
//! The binaries come from the workspace itself (`cargo metadata`: every `bin` target of a
//! member), so a new binary is checked the day it appears, and a command that names a
//! `bench-*` or `target/<profile>/NAME` binary that is not one of them fails.
//!
//! Needs the binaries built first (`cargo build --workspace --bins`, as the test command does).

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use integration::{bin, run, text};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(60);

/// Launchers and wrappers a README command may put before one of our binaries.
const WRAPPERS: &[&str] = &[
    "mpirun", "mpiexec", "srun", "sbatch", "salloc", "timeout", "env", "sudo", "nohup", "time",
    "exec", "numactl", "taskset",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_path_buf()
}

/// README.md and every Markdown file under docs/, workspace-relative, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("README.md")];
    let mut stack = vec![root.join("docs")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                found.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    out.extend(found);
    out
}

// ---------------------------------------------------------------------------------------
// Markdown: fences, headings, links

/// A line of a Markdown file outside fenced code, or inside one, with its 1-based number.
struct Line<'a> {
    number: usize,
    text: &'a str,
    /// `Some(info)` inside a fenced block (info string of the fence, e.g. `sh`).
    fence: Option<&'a str>,
}

fn lines(src: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut fence: Option<(&str, &str)> = None; // (marker, info)
    for (i, text) in src.lines().enumerate() {
        let trimmed = text.trim_start();
        let marker = if trimmed.starts_with("```") {
            Some("```")
        } else if trimmed.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some((m, trimmed[m.len()..].trim()));
                continue;
            }
            (Some((open, _)), Some(m)) if m == open && trimmed[m.len()..].trim().is_empty() => {
                fence = None;
                continue;
            }
            _ => {}
        }
        out.push(Line {
            number: i + 1,
            text,
            fence: fence.map(|(_, info)| info),
        });
    }
    out
}

/// GitHub's anchor of a heading: lowercase, inline markup and punctuation dropped (letters,
/// digits, `-` and `_` kept), each space a `-`.
fn slug(heading: &str) -> String {
    let text = link_text_only(heading);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `[text](target)` replaced by `text` (headings keep only a link's text in their anchor).
fn link_text_only(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((start, text, _target, end)) = next_link(rest) {
        out.push_str(&rest[..start]);
        out.push_str(text);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The anchors of a file's headings, with GitHub's `-1`, `-2` for repeats.
fn anchors(src: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for l in lines(src) {
        if l.fence.is_some() {
            continue;
        }
        let t = l.text.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !t[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(t[hashes..].trim().trim_end_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Removes inline code spans (`` `...` ``), where brackets are not links.
fn without_code_spans(s: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in s.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The next inline link `[text](target)` in `s`: (start, text, target, end).
fn next_link(s: &str) -> Option<(usize, &str, &str, usize)> {
    let mut from = 0;
    while let Some(open) = s[from..].find('[').map(|i| i + from) {
        // The matching `]`, allowing nested brackets in the text (`[`a[0]`](x)`).
        let mut depth = 0;
        let mut close = None;
        for (i, c) in s[open..].char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close?;
        if s[close + 1..].starts_with('(') {
            if let Some(len) = s[close + 2..].find(')') {
                let target = &s[close + 2..close + 2 + len];
                return Some((open, &s[open + 1..close], target, close + 3 + len));
            }
        }
        from = open + 1;
    }
    None
}

/// Every link target of a file outside fenced code and code spans, with its line:
/// inline links and reference definitions (`[name]: target`).
fn links(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for l in lines(src) {
        if l.fence.is_some() {
            continue;
        }
        let t = without_code_spans(l.text);
        let trimmed = t.trim_start();
        if trimmed.starts_with('[') {
            if let Some(i) = trimmed.find("]:") {
                if let Some(target) = trimmed[i + 2..].split_whitespace().next() {
                    out.push((l.number, target.to_string()));
                    continue;
                }
            }
        }
        let mut rest = t.as_str();
        while let Some((_, _, target, end)) = next_link(rest) {
            // `(target "title")` and `(<target>)`
            let target = target.split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            out.push((l.number, target.to_string()));
            rest = &rest[end..];
        }
    }
    out
}

/// Problems with the relative links of `file` (workspace-relative), one message each.
fn check_links(root: &Path, file: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(root.join(file)).expect("read markdown");
    let mut problems = Vec::new();
    for (line, target) in links(&src) {
        if target.is_empty()
            || target.contains("://")
            || target.starts_with("mailto:")
            || target.starts_with("tel:")
        {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let dest = if path.is_empty() {
            root.join(file)
        } else {
            root.join(file.parent().unwrap()).join(path)
        };
        let dest = normalize(&dest);
        let at = format!("{}:{line}: link `{target}`", file.display());
        if !dest.starts_with(root) {
            problems.push(format!("{at} leaves the repository"));
            continue;
        }
        if !dest.exists() {
            problems.push(format!(
                "{at}: {} does not exist",
                dest.strip_prefix(root).unwrap_or(&dest).display()
            ));
            continue;
        }
        if let Some(anchor) = anchor {
            if dest.extension().is_none_or(|x| x != "md") {
                continue; // an anchor into a non-Markdown file is the renderer's business
            }
            let headings = anchors(&std::fs::read_to_string(&dest).expect("read target"));
            if !headings.contains(anchor) {
                problems.push(format!(
                    "{at}: no heading of {} has the anchor `#{anchor}` (its anchors: {})",
                    dest.strip_prefix(root).unwrap_or(&dest).display(),
                    headings.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    problems
}

/// `a/b/../c` -> `a/c` without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Command lines

/// The bin targets of the workspace's member crates, from `cargo metadata`.
fn workspace_binaries(root: &Path) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = run(
        Command::new(cargo).current_dir(root).args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ]),
        LIMIT,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "cargo metadata failed:\n{stderr}");
    let meta: Value = serde_json::from_str(&stdout).expect("cargo metadata JSON");
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut bins = BTreeSet::new();
    for pkg in meta["packages"].as_array().expect("packages") {
        if !members.contains(pkg["id"].as_str().unwrap_or("")) {
            continue;
        }
        for t in pkg["targets"].as_array().into_iter().flatten() {
            let is_bin = t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"));
            if is_bin {
                bins.insert(t["name"].as_str().expect("target name").to_string());
            }
        }
    }
    bins
}

/// One shell command line of a fenced block: continuation lines joined, with the number of
/// its first line.
fn shell_commands(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for l in lines(src) {
        let Some(info) = l.fence else {
            if let Some(p) = pending.take() {
                out.push(p);
            }
            continue;
        };
        let lang = info.split_whitespace().next().unwrap_or("");
        if !matches!(lang, "sh" | "bash" | "shell" | "console") {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((l.number, String::new()));
        let t = l.text.trim_end();
        if let Some(cont) = t.strip_suffix('\\') {
            acc.push_str(cont);
            acc.push(' ');
            pending = Some((start, acc));
        } else {
            acc.push_str(t);
            out.push((start, acc));
        }
    }
    out.extend(pending);
    out
}

/// Shell-like words: quotes grouped, `$(...)` kept in one word, a `#` that starts a word
/// ends the line, and the operators `&& || | ; &` as words of their own.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    let mut parens = 0usize;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                cur.push(c);
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '$' if chars.peek() == Some(&'(') => {
                cur.push(c);
                cur.push(chars.next().unwrap());
                parens += 1;
            }
            ')' if parens > 0 => {
                parens -= 1;
                cur.push(c);
            }
            c if parens > 0 => cur.push(c),
            '#' if cur.is_empty() => break,
            c if c.is_whitespace() => flush(&mut cur, &mut out),
            '&' | '|' | ';' => {
                flush(&mut cur, &mut out);
                let mut op = c.to_string();
                if chars.peek() == Some(&c) {
                    op.push(chars.next().unwrap());
                }
                out.push(op);
            }
            c => cur.push(c),
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// A use of one of our binaries in a command line.
#[derive(Debug, PartialEq)]
struct Invocation {
    binary: String,
    args: Vec<String>,
}

/// What a simple command runs: `Ok(None)` for other programs, `Err` for a name that looks
/// like a binary of ours (`bench-*`, `target/<profile>/NAME`) but is not one.
fn invocation(words: &[String], ours: &BTreeSet<String>) -> Result<Option<Invocation>, String> {
    let mut i = 0;
    // A prompt (`hostA$`), then environment assignments (`NCCL_ALGO=Ring`).
    if words.first().is_some_and(|w| w.ends_with('$')) {
        i += 1;
    }
    while words
        .get(i)
        .is_some_and(|w| w.split_once('=').is_some_and(|(k, _)| is_env_name(k)))
    {
        i += 1;
    }
    let Some(first) = words.get(i) else {
        return Ok(None);
    };
    let name_of = |w: &str| -> Option<String> {
        let base = w.rsplit('/').next().unwrap_or(w);
        // target/release/NAME, target/debug/NAME, target/mpich/release/NAME
        let parts: Vec<&str> = w.split('/').collect();
        let built = parts.len() >= 3
            && parts.contains(&"target")
            && matches!(parts[parts.len() - 2], "release" | "debug");
        let looks_ours = base.starts_with("bench-") && !base.contains('.');
        if ours.contains(base) || built || looks_ours {
            Some(base.to_string())
        } else {
            None
        }
    };
    let start = if name_of(first).is_some() {
        i
    } else if WRAPPERS.contains(&first.rsplit('/').next().unwrap_or(first))
        || first.starts_with("mpiexec")
    {
        // the first word after the launcher's own options that is one of our binaries
        match words[i + 1..].iter().position(|w| name_of(w).is_some()) {
            Some(p) => i + 1 + p,
            None => return Ok(None),
        }
    } else if let Some(dd) = words[i..].iter().position(|w| w == "--") {
        // a harness that runs the command after `--` (tests/cluster/simcluster.sh ... -- CMD)
        match words.get(i + dd + 1) {
            Some(w) if name_of(w).is_some() => i + dd + 1,
            _ => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let binary = name_of(&words[start]).unwrap();
    if !ours.contains(&binary) {
        return Err(format!(
            "`{}` is not a binary of this workspace (they are: {})",
            words[start],
            ours.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(Some(Invocation {
        binary,
        args: words[start + 1..].to_vec(),
    }))
}

fn is_env_name(k: &str) -> bool {
    !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
}

/// Simple commands of a line: split at `&& || | ; &`, redirections (`< f`, `> f`) dropped.
fn simple_commands(words: Vec<String>) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        match w.as_str() {
            "&&" | "||" | "|" | ";" | "&" => out.push(Vec::new()),
            "<" | ">" | ">>" | "2>" | "2>&1" => skip_next = w != "2>&1",
            _ if w.starts_with('>') || w.starts_with('<') => {}
            _ => out.last_mut().unwrap().push(w),
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// The option tokens of an invocation to look up in `--help`, with the subcommand for
/// `aggregate` (its first positional word).
fn options_to_check(inv: &Invocation, has_subcommands: bool) -> (Option<String>, Vec<String>) {
    let mut sub = None;
    let mut opts = Vec::new();
    for a in &inv.args {
        if a == "--" {
            break;
        }
        // A word with blanks was quoted: the value of the option before it, even when it
        // starts with `-` (`--launcher-args "--mca btl self"`), never an option itself.
        if a.contains(char::is_whitespace) {
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap();
            opts.push(format!("--{name}"));
        } else if let Some(short) = a.strip_prefix('-') {
            if short.is_empty() || short.starts_with(|c: char| c.is_ascii_digit()) {
                continue; // `-` (stdin) or a negative number
            }
            // a cluster of flags (`-ab`) or one option with its value attached (`-s64`)
            if short.chars().all(|c| c.is_ascii_alphabetic()) {
                opts.extend(short.chars().map(|c| format!("-{c}")));
            } else {
                opts.push(format!("-{}", short.chars().next().unwrap()));
            }
        } else if has_subcommands && sub.is_none() && opts.is_empty() {
            sub = Some(a.clone());
        }
    }
    (sub, opts)
}

/// Whether `help` lists `token` as an option (`-s, --size <SIZE>`, `--json <JSON>`, ...).
fn help_lists(help: &str, token: &str) -> bool {
    help.match_indices(token).any(|(i, _)| {
        let before = help[..i].chars().next_back();
        let after = help[i + token.len()..].chars().next();
        before.is_none_or(|c| c.is_whitespace() || "[(,|".contains(c))
            && after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    })
}

/// The subcommands a clap `--help` lists under `Commands:`.
fn subcommands(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// `--help` of a built binary (and of one of its subcommands), cached.
struct Helps {
    cache: BTreeMap<(String, Option<String>), String>,
}

impl Helps {
    fn get(&mut self, binary: &str, sub: Option<&str>) -> String {
        let key = (binary.to_string(), sub.map(str::to_string));
        if let Some(h) = self.cache.get(&key) {
            return h.clone();
        }
        let mut cmd = Command::new(bin(binary));
        cmd.args(sub).arg("--help");
        let out = run(&mut cmd, LIMIT);
        let (stdout, stderr) = text(&out);
        assert!(
            out.status.success(),
            "`{binary} {} --help` failed ({}):\n{stderr}",
            sub.unwrap_or(""),
            out.status
        );
        self.cache.insert(key, stdout.clone());
        stdout
    }
}

/// Problems with the command lines of `file`, one message each (file, line and token named);
/// also the number of invocations of our binaries checked.
fn check_commands(
    root: &Path,
    file: &Path,
    ours: &BTreeSet<String>,
    helps: &mut Helps,
) -> (Vec<String>, usize) {
    let src = std::fs::read_to_string(root.join(file)).expect("read markdown");
    let mut problems = Vec::new();
    let mut checked = 0;
    for (line, cmd) in shell_commands(&src) {
        let at = format!("{}:{line}", file.display());
        for simple in simple_commands(words(&cmd)) {
            let inv = match invocation(&simple, ours) {
                Ok(Some(inv)) => inv,
                Ok(None) => continue,
                Err(e) => {
                    problems.push(format!("{at}: {e}"));
                    continue;
                }
            };
            checked += 1;
            let top = helps.get(&inv.binary, None);
            let commands = subcommands(&top);
            let (sub, opts) = options_to_check(&inv, !commands.is_empty());
            let help = match &sub {
                Some(s) if commands.contains(s) => helps.get(&inv.binary, Some(s)),
                Some(s) => {
                    problems.push(format!(
                        "{at}: `{}` has no subcommand `{s}` (it has: {})",
                        inv.binary,
                        commands.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                    continue;
                }
                None if !commands.is_empty() => {
                    problems.push(format!(
                        "{at}: `{}` needs a subcommand ({})",
                        inv.binary,
                        commands.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                    continue;
                }
                None => top,
            };
            for o in opts {
                if !help_lists(&help, &o) {
                    problems.push(format!(
                        "{at}: `{}{}` has no option `{o}` (not in its --help)",
                        inv.binary,
                        sub.as_deref().map(|s| format!(" {s}")).unwrap_or_default()
                    ));
                }
            }
        }
    }
    (problems, checked)
}

// ---------------------------------------------------------------------------------------
// The checks on the real files

#[test]
fn every_relative_link_resolves() {
    let root = root();
    let files = markdown_files(&root);
    assert!(
        files.len() > 1,
        "no docs/*.md found under {}",
        root.display()
    );
    let problems: Vec<String> = files.iter().flat_map(|f| check_links(&root, f)).collect();
    assert!(
        problems.is_empty(),
        "broken links:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn readme_commands_name_binaries_and_options_that_exist() {
    let root = root();
    let ours = workspace_binaries(&root);
    for must in ["bench-lat", "bench-bw", "bench-collective", "aggregate"] {
        assert!(
            ours.contains(must),
            "cargo metadata lists no `{must}`: {ours:?}"
        );
    }
    let mut helps = Helps {
        cache: BTreeMap::new(),
    };
    let (problems, checked) = check_commands(&root, Path::new("README.md"), &ours, &mut helps);
    assert!(
        problems.is_empty(),
        "README commands that would not run as shown:\n  {}",
        problems.join("\n  ")
    );
    // The parser must have found the tour's commands, not silently nothing.
    assert!(
        checked >= 10,
        "only {checked} invocations of our binaries found in README.md"
    );
    eprintln!("checked {checked} invocations of {ours:?} in README.md");
}

// ---------------------------------------------------------------------------------------
// The checker itself: each rule catches what it is for (on files written here)

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("Checking a signature (the customer's side)"),
        "checking-a-signature-the-customers-side"
    );
    assert_eq!(
        slug("`roce-100g`, check by check"),
        "roce-100g-check-by-check"
    );
    assert_eq!(
        slug("Acceptance day: every link of the cluster"),
        "acceptance-day-every-link-of-the-cluster"
    );
    assert_eq!(
        slug("Point-to-point: bench-lat and bench-bw"),
        "point-to-point-bench-lat-and-bench-bw"
    );
    assert_eq!(slug("A [link](x.md) in it"), "a-link-in-it");
    let a = anchors("# Tests\n## Tests\n```\n# not a heading\n```\n### Tests\n");
    assert_eq!(a, ["tests", "tests-1", "tests-2"].map(String::from).into());
}

#[test]
fn a_missing_file_or_anchor_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/a.md"), "# A\n\n## Real heading\n").unwrap();
    std::fs::write(
        root.join("README.md"),
        "# R\n\n[ok](docs/a.md#real-heading) and [ok](#r)\n\
         [gone](docs/b.md)\n[bad anchor](docs/a.md#nope)\n`[not a link](x.md)`\n\
         ```sh\n[in code](y.md)\n```\n[web](https://example.invalid/z)\n",
    )
    .unwrap();
    let p = check_links(root, Path::new("README.md"));
    assert_eq!(p.len(), 2, "{p:#?}");
    assert!(
        p[0].starts_with("README.md:4: link `docs/b.md`"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("does not exist"), "{}", p[0]);
    assert!(
        p[1].starts_with("README.md:5: link `docs/a.md#nope`"),
        "{}",
        p[1]
    );
    assert!(p[1].contains("real-heading"), "{}", p[1]);
}

#[test]
fn commands_are_found_behind_launchers_and_prompts() {
    let ours: BTreeSet<String> = ["bench-lat", "bench-bw", "aggregate"]
        .map(String::from)
        .into();
    let parse = |line: &str| -> Vec<Result<Option<Invocation>, String>> {
        simple_commands(words(line))
            .iter()
            .map(|c| invocation(c, &ours))
            .collect()
    };
    let one = |line: &str| parse(line).into_iter().next().unwrap().unwrap().unwrap();
    assert_eq!(one("hostA$ bench-lat -a   # server").args, ["-a"]);
    let inv = one("NCCL_ALGO=Ring mpirun -np 16 --hostfile hosts -x NCCL_ALGO bench-bw -s 1M");
    assert_eq!(
        (inv.binary.as_str(), inv.args),
        ("bench-bw", vec!["-s".into(), "1M".into()])
    );
    assert_eq!(
        one("srun --mpi=pmix -N 2 target/release/bench-lat --json x.json").binary,
        "bench-lat"
    );
    assert_eq!(
        one("mpiexec.mpich -n 4 target/mpich/release/bench-lat -a").binary,
        "bench-lat"
    );
    assert!(matches!(
        parse("ssh-keygen -Y verify -f x < M && sha256sum -c M")[..],
        [Ok(None), Ok(None)]
    ));
    assert!(matches!(parse("cargo build -p bench-lat")[..], [Ok(None)]));
    // A quoted value that starts with `-` is the option's value, not options of ours.
    let quoted = one(r#"aggregate report r --launcher-args "--mca btl self" --out o"#);
    assert_eq!(
        options_to_check(&quoted, true),
        (
            Some("report".into()),
            vec!["--launcher-args".into(), "--out".into()]
        )
    );
    let both = parse("aggregate keygen k && aggregate verify r --key k.pub");
    assert!(matches!(&both[..], [Ok(Some(_)), Ok(Some(_))]));
    let err = parse("mpirun -np 2 target/release/bench-foo -a")
        .remove(0)
        .unwrap_err();
    assert!(
        err.contains("`target/release/bench-foo` is not a binary"),
        "{err}"
    );
    assert!(parse("bench-lat2 -a").remove(0).is_err());
    let inv = one("tests/cluster/simcluster.sh --nodes 8 -- target/release/bench-bw -s 64K");
    assert_eq!((inv.binary.as_str(), inv.args.len()), ("bench-bw", 2));

    let inv = one("aggregate report r/ --profile p --out o --force");
    let (sub, opts) = options_to_check(&inv, true);
    assert_eq!(sub.as_deref(), Some("report"));
    assert_eq!(opts, ["--profile", "--out", "--force"]);
    let (_, opts) = options_to_check(&one("bench-bw -ab --use_cuda=0 -s64 -"), false);
    assert_eq!(opts, ["-a", "-b", "--use_cuda", "-s"]);
}

#[test]
fn an_option_is_looked_up_as_a_whole_word() {
    let help =
        "Options:\n  -s, --size <SIZE>  Size\n      --json <JSON>  out\n  -D, --duration <D>\n";
    for o in ["-s", "--size", "--json", "-D", "--duration"] {
        assert!(help_lists(help, o), "{o}");
    }
    for o in ["-z", "--siz", "--js", "--size-max", "-d"] {
        assert!(!help_lists(help, o), "{o}");
    }
    let top = "Usage: aggregate <COMMAND>\n\nCommands:\n  report   Judge\n  trend    Trend report over a\n           nightly history\n  help     Print\n\nOptions:\n  -h, --help\n";
    assert_eq!(
        subcommands(top),
        ["help", "report", "trend"].map(String::from).into()
    );
}

#[test]
fn guide_commands_name_binaries_and_options_that_exist() {
    let root = root();
    let ours = workspace_binaries(&root);
    let mut helps = Helps {
        cache: BTreeMap::new(),
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in markdown_files(&root).iter().skip(1) {
        let (p, n) = check_commands(&root, f, &ours, &mut helps);
        problems.extend(p);
        checked += n;
    }
    assert!(
        problems.is_empty(),
        "commands of the guide that would not run as shown:\n  {}",
        problems.join("\n  ")
    );
    eprintln!("checked {checked} invocations in docs/");
}
