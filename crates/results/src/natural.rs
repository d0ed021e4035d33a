//! Natural order of names: `node9` before `node12`, `mlx5_2` before `mlx5_10`, as people
//! number hosts, NICs and switch ports (the one comparison every list of them uses).

use std::cmp::Ordering;

/// `node12` after `node9`: digit runs compare as numbers.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let dx = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let dy = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (nx, ny) = (&x[..dx], &y[..dy]);
                let tx = nx.iter().skip_while(|&&c| c == b'0').count();
                let ty = ny.iter().skip_while(|&&c| c == b'0').count();
                let o = tx.cmp(&ty).then_with(|| nx[dx - tx..].cmp(&ny[dy - ty..]));
                if o != Ordering::Equal {
                    return o;
                }
                x = &x[dx..];
                y = &y[dy..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digit_runs_compare_as_numbers() {
        let mut v = vec!["node12", "node9", "mlx5_10", "mlx5_2", "node009", "a"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["a", "mlx5_2", "mlx5_10", "node009", "node9", "node12"]);
        assert_eq!(natural_cmp("x1", "x1"), Ordering::Equal);
    }
}
