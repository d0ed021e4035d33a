//! `aggregate report --tenant NAME`: the provider's inputs cut to one tenant
//! (`verdict::tenant_view`) before anything reads them, so every table, picture, check and
//! copied input of the bundle holds only that tenant's nodes, and the plan the structure
//! is drawn from holds only its nodes and NICs (the switches stay: they are the fabric
//! the tenant rents).

use std::path::PathBuf;

use results::fabric_plan::FabricPlan;
use results::tenants::Tenants;
use verdict::error::{Error, Result};
use verdict::input;
use verdict::tenant_view::TenantView;

/// The cut inputs (in a private directory that lives as long as this), the cut plan and
/// the tenants the cut is judged against.
pub struct Cut {
    pub inputs: Vec<PathBuf>,
    pub plan: Option<FabricPlan>,
    pub tenants: Tenants,
    _dir: tempfile::TempDir,
}

/// Reads every input, keeps tenant `name`'s share of each, writes the shares.
pub fn cut(
    inputs: &[PathBuf],
    skip_bad: bool,
    limits: &input::Limits,
    name: &str,
    tenants: Option<&Tenants>,
    plan: Option<&FabricPlan>,
) -> Result<Cut> {
    let all = tenants.ok_or_else(|| {
        Error::Usage(format!(
            "--tenant {name} needs the tenants: give --tenants FILE, or a --plan with [[tenant]] tables"
        ))
    })?;
    let mut view = TenantView::new(all, name).map_err(Error::Usage)?;
    let set = input::load_with(inputs, skip_bad, limits)?;
    let dir = tempfile::Builder::new()
        .prefix("fabcheck-tenant.")
        .tempdir()
        .map_err(|e| Error::Output(format!("cannot make a directory for the cut inputs: {e}")))?;
    let mut cut_inputs = Vec::new();
    for d in set.docs {
        let tool = verdict::escape::file_name(&d.doc.tool);
        let Some(doc) = view.restrict(d.doc) else {
            continue;
        };
        let path = dir
            .path()
            .join(format!("{:04}-{tool}.json", cut_inputs.len() + 1));
        let bytes = serde_json::to_vec(&doc)
            .map_err(|e| Error::Output(format!("cannot write the cut of an input: {e}")))?;
        std::fs::write(&path, bytes)
            .map_err(|e| Error::Output(format!("{}: {e}", path.display())))?;
        cut_inputs.push(path);
    }
    if cut_inputs.is_empty() {
        return Err(Error::Usage(format!(
            "--tenant {name}: no input holds a node of this tenant ({})",
            all.get(name).map(|t| t.nodes.join(" ")).unwrap_or_default()
        )));
    }
    let tenants = view.tenants().map_err(Error::Usage)?;
    let plan = plan.map(|p| own_plan(p, all, name));
    Ok(Cut {
        inputs: cut_inputs,
        plan,
        tenants,
        _dir: dir,
    })
}

/// The plan with only the tenant's nodes and NICs, and only its own tenant table.
fn own_plan(plan: &FabricPlan, tenants: &Tenants, name: &str) -> FabricPlan {
    let own = |n: &str| tenants.of_node(n).is_some_and(|t| t.name == name);
    let mut p = plan.clone();
    p.node.retain(|n| own(&n.name));
    p.nic.retain(|n| own(&n.node));
    p.tenant.retain(|t| t.name == name);
    p
}
