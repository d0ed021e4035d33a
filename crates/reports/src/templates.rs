//! The tera templates of every text output, compiled into the binary so a bare `aggregate`
//! works anywhere, and overridable one file at a time with `--templates DIR` so a vendor
//! can brand a report without rebuilding.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;
use tera::{Context, Tera, Value};

use verdict::error::{Error, Result};
use verdict::escape;

/// Every template, by file name, with its built-in text.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "report.html",
        include_str!("../../../templates/report.html"),
    ),
    ("report.md", include_str!("../../../templates/report.md")),
    (
        "report.junit.xml",
        include_str!("../../../templates/report.junit.xml"),
    ),
    ("compare.md", include_str!("../../../templates/compare.md")),
    (
        "compare.junit.xml",
        include_str!("../../../templates/compare.junit.xml"),
    ),
    ("trend.html", include_str!("../../../templates/trend.html")),
    ("trend.md", include_str!("../../../templates/trend.md")),
];

/// The loaded template set: one tera instance per output format, because tera has one
/// escape function per instance.
pub struct Templates {
    engines: HashMap<Format, Tera>,
    /// Where each template came from, for error messages.
    sources: HashMap<String, String>,
}

/// Tera's top-level error says only "failed to render"; the cause is further down.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn num_filter(v: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    Ok(Value::String(match v {
        Value::Null => "n/a".into(),
        Value::Number(n) => match n.as_f64() {
            Some(f) => verdict::judge::format_value(f),
            None => n.to_string(),
        },
        other => other.to_string(),
    }))
}

/// `md`: kept so templates written for earlier versions still render. Markdown escaping
/// is now automatic (every `{{ }}` of a `.md` template), so it passes its value through.
fn md_filter(v: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    Ok(v.clone())
}

/// The format of a template, from its file name: each has its own escaping layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Format {
    /// `*.html`, `*.xml`: [`escape::markup`].
    Markup,
    /// `*.md`: [`escape::markdown`].
    Markdown,
}

impl Format {
    fn of(name: &str) -> Format {
        if name.ends_with(".md") {
            Format::Markdown
        } else {
            Format::Markup
        }
    }

    /// A tera instance whose autoescape is this format's escaping layer.
    fn engine(self) -> Tera {
        let mut tera = Tera::default();
        match self {
            Format::Markup => {
                tera.autoescape_on(vec![".html", ".xml"]);
                tera.set_escape_fn(escape::markup);
            }
            Format::Markdown => {
                tera.autoescape_on(vec![".md"]);
                tera.set_escape_fn(escape::markdown);
            }
        }
        tera.register_filter("num", num_filter);
        tera.register_filter("md", md_filter);
        tera
    }
}

impl Templates {
    /// The built-in templates, each replaced by `DIR/NAME` where that file exists.
    pub fn load(dir: Option<&Path>) -> Result<Self> {
        if let Some(d) = dir {
            if !d.is_dir() {
                return Err(Error::Usage(format!(
                    "--templates {}: not a directory",
                    d.display()
                )));
            }
        }
        let mut engines: HashMap<Format, Tera> = [Format::Markup, Format::Markdown]
            .into_iter()
            .map(|f| (f, f.engine()))
            .collect();
        let mut sources = HashMap::new();
        for (name, text) in BUILTIN {
            let (text, source) = match dir.map(|d| d.join(name)).filter(|p| p.exists()) {
                Some(p) => (
                    std::fs::read_to_string(&p).map_err(|e| {
                        Error::Template(format!("{}: cannot read: {e}", p.display()))
                    })?,
                    p.display().to_string(),
                ),
                None => (text.to_string(), format!("built-in template {name}")),
            };
            engines
                .get_mut(&Format::of(name))
                .expect("an engine per format")
                .add_raw_template(name, &text)
                .map_err(|e| Error::Template(format!("{source}: {}", chain(&e))))?;
            sources.insert(name.to_string(), source);
        }
        Ok(Templates { engines, sources })
    }

    /// Renders `name` with `data`.
    pub fn render<T: Serialize>(&self, name: &str, data: &T) -> Result<String> {
        let source = self
            .sources
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string());
        let ctx = Context::from_serialize(data)
            .map_err(|e| Error::Template(format!("{source}: {}", chain(&e))))?;
        self.engines[&Format::of(name)]
            .render(name, &ctx)
            .map_err(|e| Error::Template(format!("{source}: {}", chain(&e))))
    }
}
