//! The modules of `aggregate` form a one-way graph: a module never reaches itself through
//! `crate::` paths (test modules excepted). A cycle makes every module of it depend on
//! every other, so none can be read, tested or moved alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `crate::NAME` references in the non-test part of `text`.
fn references(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
        assert!(
            !rest.starts_with('{'),
            "use one `use crate::module::...` per module, so this test can read the graph"
        );
    }
    out
}

/// Module name -> modules it uses, for every top-level module under `src/`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
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
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if top == "main" || top == "lib" {
                continue;
            }
            let mut refs = references(&std::fs::read_to_string(&p).unwrap());
            refs.remove(&top);
            g.entry(top).or_default().extend(refs);
        }
    }
    g
}

fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
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
fn modules_form_a_one_way_graph() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(g.contains_key("input") && g.contains_key("sign"), "{g:?}");
    if let Some(cycle) = find_cycle(&g) {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
    // The leaves everything else stands on.
    for leaf in ["error", "digest"] {
        assert!(g[leaf].is_empty(), "{leaf} uses {:?}", g[leaf]);
    }
}

#[test]
fn a_cycle_is_found() {
    let g: BTreeMap<String, BTreeSet<String>> = [
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
