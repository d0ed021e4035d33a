//! The workspace reads one way, at two scales.
//!
//! - Crates: the layers stand bottom up (results, base, probe, transport, bootstrap, p2p,
//!   traffic, agents, p2p-cli, then the binaries; beside them aggregate's own stack on results:
//!   verdict, diagnosis, reports); a crate depends only on crates of lower layers.
//!   Cargo already refuses a cycle between crates; this test also refuses a dependency that
//!   points up a layer (the driver reaching the agents, transports reaching the
//!   coordinators), which Cargo would accept.
//! - Modules: within every crate, the top-level modules never reach themselves through
//!   `crate::` paths or `super::` paths that name a sibling (test modules excepted). A
//!   cycle makes every module of it depend on every other, so none can be read, tested or
//!   moved alone.
//!
//! Both graphs come from the sources and `cargo metadata`, not from a list kept here; the
//! cycles the crate split removed are put back in copies of the sources to prove the test
//! finds them.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every workspace member: name -> (manifest directory, its workspace dependencies).
fn members() -> BTreeMap<String, (PathBuf, BTreeSet<String>)> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkgs = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = pkgs
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    pkgs.iter()
        .map(|p| {
            let dir = Path::new(p["manifest_path"].as_str().unwrap())
                .parent()
                .unwrap()
                .to_path_buf();
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // Normal dependencies only: dev-dependencies (test helpers) may reach anywhere.
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| names.contains(n))
                .collect();
            (p["name"].as_str().unwrap().to_string(), (dir, deps))
        })
        .collect()
}

/// The layer of each library crate, bottom up. A crate not named here is a leaf on top
/// (a binary, the test-data generator, the tests): it may use any layer, and nothing may
/// use it except the tests.
const LAYERS: &[&[&str]] = &[
    &["results"],
    &["base"],
    &["probe"],
    &["transport"],
    &["bootstrap"],
    &["p2p"],
    &["traffic"],
    &["agents"],
    &["p2p-cli"],
    // aggregate's stack: on results alone (it builds on a laptop), never on the system
    // layers above (see `the_judge_reaches_no_system_layer`).
    &["verdict"],
    &["diagnosis"],
    &["reports"],
];

/// The crates of aggregate's stack (the binary and its layers) and the acceptance runner,
/// which drives the suite's binaries and must never link a transport or measure itself.
const JUDGE_STACK: &[&str] = &["aggregate", "fabcheck", "verdict", "diagnosis", "reports"];

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&name))
}

/// Dependencies that point sideways or up a layer, or into a crate on top.
fn upward_edges(crates: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (name, deps) in crates {
        for d in deps {
            let ok = match (layer_of(name), layer_of(d)) {
                (Some(a), Some(b)) => b < a,
                (None, Some(_)) => true,
                // Only the test-data generator may be used by a crate on top (the tests).
                (_, None) => d == "synth" && layer_of(name).is_none(),
            };
            if !ok {
                bad.push(format!("{name} -> {d}"));
            }
        }
    }
    bad
}

/// Module names a file reaches outside its own top-level module, from its non-test part:
/// `crate::NAME` anywhere, and `super::NAME` in a file directly under `src/` or a
/// `src/NAME/mod.rs` (there `super` is the crate root, so NAME is a sibling).
fn references(text: &str, super_is_root: bool) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    let mut prefixes = vec!["crate::"];
    if super_is_root {
        prefixes.push("super::");
    }
    for prefix in prefixes {
        for (i, _) in code.match_indices(prefix) {
            // `super::super::` or `self::super::` never occur at the top level.
            let before = &code[..i];
            if before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[i + prefix.len()..];
            for name in first_segments(rest) {
                if name != "tests" {
                    out.insert(name);
                }
            }
        }
    }
    out
}

/// The first path segment after `crate::` or `super::`: one name, or each item's first
/// name in a `{a::x, b, c::{..}}` group.
fn first_segments(rest: &str) -> Vec<String> {
    let ident = |t: &str| -> String {
        t.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)]
            .into_iter()
            .filter(|n| !n.is_empty())
            .collect();
    };
    let (mut depth, mut names, mut start) = (0usize, Vec::new(), 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                names.push(ident(&group[start..i]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(ident(&group[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// Top-level module -> top-level modules it uses, for every module under `src`. The crate
/// root (`lib.rs`, `main.rs`) only declares and re-exports: it is left out, and names that
/// are not modules (re-exported items, macros) are dropped.
fn module_graph(src: &Path) -> Graph {
    let mut g: Graph = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap();
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let top = parts[0].trim_end_matches(".rs").to_string();
            if parts.len() == 1 && (top == "main" || top == "lib") {
                continue;
            }
            let super_is_root = parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod.rs");
            let mut refs = references(&std::fs::read_to_string(&p).unwrap(), super_is_root);
            refs.remove(&top);
            g.entry(top).or_default().extend(refs);
        }
    }
    let modules: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    g
}

fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let all = members();
    for lib in LAYERS.iter().flat_map(|l| l.iter()) {
        assert!(
            all.contains_key(*lib),
            "layer crate {lib} is not a workspace member"
        );
    }
    let deps: BTreeMap<String, BTreeSet<String>> = all
        .iter()
        .map(|(k, (_, d))| (k.clone(), d.clone()))
        .collect();
    let bad = upward_edges(&deps);
    assert!(bad.is_empty(), "dependencies against the layers: {bad:?}");
    assert!(
        judge_stack_escapes(&deps).is_empty(),
        "aggregate's stack reaches a system layer: {:?}",
        judge_stack_escapes(&deps)
    );
    // The binary stands on the top of its stack, so it sees every layer.
    assert!(deps["aggregate"].contains("reports"));
}

/// Dependencies of aggregate's stack on anything but results and the stack itself: the
/// judge builds on a laptop with no libibverbs, MPI or CUDA.
fn judge_stack_escapes(deps: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for name in JUDGE_STACK {
        for d in deps.get(*name).into_iter().flatten() {
            if d != "results" && !JUDGE_STACK.contains(&d.as_str()) {
                bad.push(format!("{name} -> {d}"));
            }
        }
    }
    bad
}

#[test]
fn the_judge_reaches_no_system_layer() {
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    deps.insert("verdict".into(), ["results"].map(String::from).into());
    deps.insert(
        "diagnosis".into(),
        ["verdict", "probe"].map(String::from).into(),
    );
    assert_eq!(judge_stack_escapes(&deps), ["diagnosis -> probe"]);
    // A layer of the stack reaching up its own stack is an upward edge.
    deps.insert("verdict".into(), ["reports"].map(String::from).into());
    assert_eq!(upward_edges(&deps), ["verdict -> reports"]);
}

#[test]
fn an_upward_dependency_is_refused() {
    // The driver dispatching to the agents, as before the split.
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    deps.insert(
        "p2p".into(),
        ["transport", "agents"].map(String::from).into(),
    );
    deps.insert("agents".into(), ["p2p"].map(String::from).into());
    deps.insert("transport".into(), ["gpu-tools"].map(String::from).into());
    assert_eq!(
        upward_edges(&deps),
        ["p2p -> agents", "transport -> gpu-tools"]
    );
}

#[test]
fn every_crate_s_modules_form_a_one_way_graph() {
    let all = members();
    let mut seen = 0;
    for (name, (dir, _)) in &all {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let g = module_graph(&src);
        if let Some(cycle) = find_cycle(&g) {
            panic!("module cycle in crate {name}: {}", cycle.join(" -> "));
        }
        seen += 1;
    }
    assert!(seen >= 12, "only {seen} crates read");
    // The leaves the rest of their crates stand on.
    let leaves = [
        ("verdict", "error"),
        ("verdict", "digest"),
        ("transport", "gpu"),
        ("probe", "sysfs"),
        ("base", "names"),
    ];
    for (krate, leaf) in leaves {
        let g = module_graph(&all[krate].0.join("src"));
        assert!(g[leaf].is_empty(), "{krate}::{leaf} uses {:?}", g[leaf]);
    }
}

/// A copy of `krate`'s sources with `line` appended to the file `file` (under `src/`).
fn with_line(krate: &str, file: &str, line: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            let t = to.join(p.file_name().unwrap());
            if p.is_dir() {
                copy(&p, &t);
            } else {
                std::fs::copy(&p, &t).unwrap();
            }
        }
    }
    let t = tempfile::tempdir().unwrap();
    copy(&members()[krate].0.join("src"), t.path());
    let f = t.path().join(file);
    let mut text = std::fs::read_to_string(&f).unwrap();
    // Before the tests, where the graph is read.
    let at = text.find("#[cfg(test)]").unwrap_or(text.len());
    text.insert_str(at, &format!("{line}\n"));
    std::fs::write(&f, text).unwrap();
    t
}

#[test]
fn the_cycles_the_split_removed_are_found_when_put_back() {
    for (krate, file, line, want) in [
        // Memory kinds using the endpoint types that use them.
        (
            "transport",
            "gpu.rs",
            "use crate::endpoint::VerbsOptions;",
            ["gpu", "endpoint"],
        ),
        // The CUDA memory reaching back into the GPUDirect start-up checks.
        (
            "transport",
            "cuda/memory.rs",
            "use crate::gpudirect::describe;",
            ["cuda", "gpudirect"],
        ),
        // sysfs helpers living in whichever module needed them first.
        (
            "probe",
            "inventory.rs",
            "use crate::host::hostname;",
            ["host", "inventory"],
        ),
        // The coordinator and the pair links, through a sibling path.
        (
            "p2p",
            "coordinator.rs",
            "use super::pairlink::open;",
            ["coordinator", "pairlink"],
        ),
    ] {
        let t = with_line(krate, file, line);
        let cycle = find_cycle(&module_graph(t.path()))
            .unwrap_or_else(|| panic!("{line} in {krate}/{file}: no cycle found"));
        for m in want {
            assert!(cycle.iter().any(|c| c == m), "{cycle:?} lacks {m}");
        }
    }
}

#[test]
fn a_cycle_is_found() {
    let g: Graph = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &[][..]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
}

/// The workspace packages a shell script's cargo commands name with `-p`/`--package`
/// (continuation lines joined), with the line they start on.
fn cargo_packages(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut joined, mut start) = (String::new(), 0);
    for (i, line) in text.lines().enumerate() {
        if joined.is_empty() {
            start = i + 1;
        }
        let l = line.split(" #").next().unwrap_or("");
        match l.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                continue;
            }
            None => joined.push_str(l),
        }
        let command = std::mem::take(&mut joined);
        if !command.contains("cargo ") {
            continue;
        }
        let words: Vec<&str> = command.split_whitespace().collect();
        for w in words.windows(2) {
            if w[0] == "-p" || w[0] == "--package" {
                out.push((start, w[1].trim_matches('"').to_string()));
            }
        }
    }
    out
}

/// A script that builds a package the workspace no longer has fails only when someone runs
/// it (scripts/gpu-bundle.sh built `-p fabric` for months after the split): every `cargo
/// ... -p NAME` in scripts/, tests/ and .ci/ names a member.
#[test]
fn scripts_build_only_packages_the_workspace_has() {
    let names: BTreeSet<String> = members().into_keys().collect();
    let root = workspace_root();
    let mut scripts = Vec::new();
    let mut stack = vec![root.join("scripts"), root.join("tests"), root.join(".ci")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "sh") || d.ends_with(".ci") {
                scripts.push(p);
            }
        }
    }
    let mut seen = 0;
    let mut bad = Vec::new();
    for s in &scripts {
        let text = std::fs::read_to_string(s).unwrap_or_default();
        for (line, pkg) in cargo_packages(&text) {
            seen += 1;
            if !names.contains(&pkg) && !pkg.starts_with('$') {
                bad.push(format!("{}:{line}: -p {pkg}", s.display()));
            }
        }
    }
    assert!(seen > 0, "no cargo -p found in {} scripts", scripts.len());
    assert!(
        bad.is_empty(),
        "packages not in the workspace ({names:?}):\n{}",
        bad.join("\n")
    );
    // The reader finds a package on a continuation line, as the bug had it.
    assert_eq!(
        cargo_packages("cargo build --quiet \\\n    -p fabric --example x\necho -p no"),
        [(1, "fabric".to_string())]
    );
}

/// The rules the compiler keeps: the workspace denies `unsafe` and undocumented unsafe
/// blocks, and every member opts in (a member without `[lints] workspace = true` would
/// escape them silently). The FFI modules allow `unsafe_code` by name in their parent.
#[test]
fn every_member_keeps_the_workspace_lints() {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("[workspace.lints.rust]\nunsafe_code = \"deny\""));
    assert!(manifest.contains("undocumented_unsafe_blocks = \"deny\""));
    for (name, (dir, _)) in members() {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(
            text.contains("[lints]\nworkspace = true"),
            "{name} does not keep the workspace lints"
        );
    }
    // Where unsafe is allowed: the FFI modules of transport, and nowhere else.
    let mut allowed = Vec::new();
    for (name, (dir, _)) in members() {
        let mut stack = vec![dir.join("src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    let lines: Vec<&str> = text.lines().collect();
                    for (i, l) in lines.iter().enumerate() {
                        if l.trim() == "#[allow(unsafe_code)]" {
                            let item = lines.get(i + 1).map_or("", |l| l.trim());
                            allowed.push(format!("{name}: {item}"));
                        }
                    }
                }
            }
        }
    }
    allowed.sort();
    assert_eq!(
        allowed,
        [
            "transport: pub mod cuda;",
            "transport: pub mod mpi;",
            "transport: pub mod verbs;"
        ]
    );
}
