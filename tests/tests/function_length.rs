//! Functions a reader can hold: no product function runs over 80 lines unless it is on
//! the list of those still waiting to be cut into named steps (`tests/long-functions.txt`).
//!
//! The list only shrinks. A new function over the limit fails here (cut it into steps
//! named for what they decide); a listed function that is now short fails too, so its
//! line is taken off and cannot grow back. `scripts/long-functions.sh` prints every
//! function over the limit with its length, longest first.
//!
//! Product code is every workspace member's `src/` except the test harness (`tests`) and
//! the synthetic data (`synth`), without its `#[cfg(test)]` modules and `tests.rs` files.
//! Lengths are counted from the `fn` line to the closing brace, by a small lexer that
//! knows strings, raw strings, character literals and comments (a brace in a string is
//! not a block).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The longest a product function may be, in lines from `fn` to its closing brace.
const LIMIT: usize = 80;

/// Members that are not product code.
const NOT_PRODUCT: &[&str] = &["tests", "crates/synth"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Product source directories: `<member>/src` for every member named in the manifest.
fn product_dirs(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let doc: toml::Value = toml::from_str(&manifest).expect("Cargo.toml is TOML");
    doc["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .filter_map(|m| m.as_str())
        .filter(|m| !NOT_PRODUCT.contains(m))
        .map(|m| root.join(m).join("src"))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// One line's code with strings, characters and comments blanked, so that the braces
/// left are the code's. `state` carries a block comment or a string across lines.
#[derive(Default)]
struct Lexer {
    /// Inside `/* */` (depth), a `"..."` string, or a raw string closed by `"` + N `#`.
    comment: usize,
    string: bool,
    raw: Option<usize>,
}

impl Lexer {
    fn code(&mut self, line: &str) -> String {
        let c: Vec<char> = line.chars().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < c.len() {
            if self.comment > 0 {
                if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    self.comment -= 1;
                    i += 1;
                } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    self.comment += 1;
                    i += 1;
                }
            } else if self.string {
                if c[i] == '\\' {
                    i += 1;
                } else if c[i] == '"' {
                    self.string = false;
                }
            } else if let Some(hashes) = self.raw {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    self.raw = None;
                    i += hashes;
                }
            } else if c[i] == '/' && c.get(i + 1) == Some(&'/') {
                break;
            } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                self.comment = 1;
                i += 1;
            } else if c[i] == '"' {
                self.string = true;
            } else if c[i] == 'r'
                && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
                && matches!(c.get(i + 1), Some('"') | Some('#'))
            {
                let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
                if c.get(i + 1 + hashes) == Some(&'"') {
                    self.raw = Some(hashes);
                    i += 1 + hashes;
                } else {
                    out.push(c[i]);
                }
            } else if c[i] == '\'' {
                // A character literal ('x', '\n', '\u{7f}'), else a lifetime.
                if c.get(i + 1) == Some(&'\\') {
                    let end = c[i + 2..].iter().position(|&q| q == '\'');
                    i += end.map_or(1, |e| e + 2);
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 2;
                }
            } else {
                out.push(c[i]);
            }
            i += 1;
        }
        out
    }
}

/// `fn name` at the start of a code line (after visibility and qualifiers).
fn fn_name(code: &str) -> Option<String> {
    let mut rest = code.trim_start();
    loop {
        let before = rest;
        for q in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
            "extern \"C\" ",
        ] {
            rest = rest.strip_prefix(q).unwrap_or(rest);
        }
        if rest == before {
            break;
        }
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))?;
    Some(name[..end].to_string())
}

/// (name, first line, length) of every function in `text` over [`LIMIT`] lines, outside
/// `#[cfg(test)]` items. A function inside another counts as part of it.
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let mut lexer = Lexer::default();
    let mut depth = 0usize;
    // (name, first line, depth its body opens at) of the function being read.
    let mut open: Option<(String, usize, usize)> = None;
    let mut pending: Option<(String, usize)> = None;
    let mut skip_at: Option<usize> = None;
    let mut cfg_test = false;
    let mut parens = 0usize;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = lexer.code(line);
        if code.trim() == "#[cfg(test)]" {
            cfg_test = true;
            continue;
        }
        if open.is_none() && pending.is_none() && skip_at.is_none() {
            if let Some(name) = fn_name(&code) {
                pending = Some((name, n + 1));
            }
        }
        for ch in code.chars() {
            match ch {
                '{' => {
                    if cfg_test && skip_at.is_none() {
                        skip_at = Some(depth);
                        cfg_test = false;
                    }
                    if let Some((name, first)) = pending.take() {
                        if skip_at.is_none() {
                            open = Some((name, first, depth));
                        }
                    }
                    depth += 1;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if skip_at == Some(depth) {
                        skip_at = None;
                    }
                    if open.as_ref().is_some_and(|o| o.2 == depth) {
                        let (name, first, _) = open.take().expect("checked");
                        let len = n + 1 - first + 1;
                        if len > LIMIT {
                            out.push((name, first, len));
                        }
                    }
                }
                '(' | '[' => parens += 1,
                ')' | ']' => parens = parens.saturating_sub(1),
                ';' if parens == 0 => {
                    // A declaration without a body (a trait's method) or a `#[cfg(test)] use`.
                    pending = None;
                    cfg_test = false;
                }
                _ => {}
            }
        }
    }
    out
}

/// Every product function over the limit: (`path name`, its first line, its length).
fn found() -> Vec<(String, usize, usize)> {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in product_dirs(&root) {
        rust_files(&dir, &mut files);
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a source file reads");
        let rel = f
            .strip_prefix(&root)
            .expect("under the root")
            .display()
            .to_string();
        for (name, line, len) in long_functions(&text) {
            out.push((format!("{rel} {name}"), line, len));
        }
    }
    out
}

fn listed() -> BTreeSet<String> {
    let text = std::fs::read_to_string(workspace_root().join("tests/long-functions.txt"))
        .expect("tests/long-functions.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn no_product_function_grows_past_the_limit_and_the_list_only_shrinks() {
    let mut long = found();
    long.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    println!("{} product functions over {LIMIT} lines:", long.len());
    for (key, line, len) in &long {
        let (path, name) = key.split_once(' ').expect("path name");
        println!("{len:5}  {path}:{line}  {name}");
    }
    let listed = listed();
    let now: BTreeSet<String> = long.iter().map(|l| l.0.clone()).collect();
    let new: Vec<_> = now.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&now).collect();
    assert!(
        new.is_empty(),
        "functions over {LIMIT} lines that are not on tests/long-functions.txt: {new:?}; \
         cut each into named steps (the list only shrinks)"
    );
    assert!(
        gone.is_empty(),
        "on tests/long-functions.txt but no longer over {LIMIT} lines: {gone:?}; take them \
         off the list"
    );
}

#[test]
fn the_lexer_counts_code_braces_only() {
    let long_body = "    let x = 1;\n".repeat(LIMIT);
    let text = format!(
        "fn short() {{ let s = \"}}}}\"; let c = '}}'; }}\n\
         pub(crate) fn long<'a>(x: &'a str) {{\n    // }} a brace in a comment\n    let r = r#\"}}\"#;\n{long_body}}}\n\
         trait T {{ fn decl(&self); }}\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{long_body}    }}\n}}\n"
    );
    let got = long_functions(&text);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "long");
    assert_eq!(got[0].1, 2);
    assert_eq!(got[0].2, LIMIT + 4);
}
