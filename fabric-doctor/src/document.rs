//! The audits as one fabcheck document (`--json`): one `hosts` entry a node, written
//! atomically.

use std::process::ExitCode;

use results::audit::NodeAudit;

/// Writes the audits as one fabcheck document (one `hosts` entry each) when `--json`.
pub fn write_json(
    path: Option<&std::path::Path>,
    launcher: &str,
    ranks: u32,
    audits: Vec<NodeAudit>,
) -> ExitCode {
    let Some(path) = path else {
        return ExitCode::SUCCESS;
    };
    let mut doc = results::Document::new(
        "fabric-doctor",
        launcher,
        ranks,
        results::provenance::now_rfc3339(),
    );
    for a in audits {
        doc.hosts.push(results::HostInfo {
            hostname: a.hostname.clone(),
            audit: Some(a),
            ..Default::default()
        });
    }
    doc.finish(None);
    if let Err(e) = results::write::write_document_atomic(path, &doc) {
        eprintln!("fabric-doctor: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}
