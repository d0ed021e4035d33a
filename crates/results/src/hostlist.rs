//! Slurm's host lists (`tux[0-3,7],gpu[01-02]`), as plans, tenants and node lists take
//! them.

/// The most names one host list may expand to (a typo such as `node[1-10000000]` is an
/// error, not a hang).
const MAX_HOSTS: usize = 100_000;

/// Expands a Slurm host list (`tux[0-3,7],gpu[01-02]`), with up to two bracketed ranges
/// in a name as Slurm allows (`rack[0-63]_blade[0-41]`, quickstart_admin's own example).
pub fn expand_hostlist(s: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for p in top_level_parts(s) {
        out.extend(expand_name(p)?);
        if out.len() > MAX_HOSTS {
            return Err(format!("{s}: more than {MAX_HOSTS} names"));
        }
    }
    Ok(out)
}

/// The comma-separated parts of a host list outside brackets, trimmed, blanks left out.
fn top_level_parts(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// One name with bracketed ranges: the first range, times every expansion of the rest.
fn expand_name(p: &str) -> std::result::Result<Vec<String>, String> {
    let Some(open) = p.find('[') else {
        if p.contains(']') {
            return Err(format!("{p}: unbalanced brackets"));
        }
        return Ok(vec![p.to_string()]);
    };
    let close = p[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| format!("{p}: unbalanced brackets"))?;
    let (prefix, body) = (&p[..open], &p[open + 1..close]);
    let rest = expand_name(&p[close + 1..]).map_err(|e| format!("{p}: {e}"))?;
    let mut out = Vec::new();
    for r in body.split(',') {
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        let width = lo.len();
        let a: u64 = lo.parse().map_err(|_| format!("{p}: bad range {r}"))?;
        let b: u64 = hi.parse().map_err(|_| format!("{p}: bad range {r}"))?;
        if b < a || (b - a) as usize * rest.len() > MAX_HOSTS {
            return Err(format!("{p}: range {r} is empty or too large"));
        }
        for n in a..=b {
            for tail in &rest {
                out.push(format!("{prefix}{n:0width$}{tail}"));
            }
        }
    }
    Ok(out)
}
