//! Buffer contents and the `--check` arithmetic.
//!
//! Inputs are small integers, chosen so that every correct result is exactly
//! representable in every datatype (sums of values 0..4 stay exact in float16 up to 512
//! ranks and in bfloat16 up to 64; products are powers of two), so a float result can be
//! compared exactly where the reduction order cannot matter and with a tolerance of a few
//! units in the last place where it can (float sums across many ranks, avg). Integer
//! results wrap exactly as the hardware wraps them: the expected value is computed in
//! 64 bits and truncated to the type.

use half::{bf16, f16};
use transport::collective::{DataType, RedOp};

use crate::fp8;

/// Element `i` of `rank`'s input for a collective with reduction `op` (`None`: data
/// movement, where values should differ between ranks and positions so that a block in the
/// wrong place is caught).
pub fn input_value(op: Option<RedOp>, rank: usize, i: usize) -> f64 {
    match op {
        None => ((rank * 31 + i * 7 + 1) % 97) as f64,
        // Mostly ones, a two every eighth element: products stay powers of two.
        Some(RedOp::Prod) => {
            if (i + rank).is_multiple_of(8) {
                2.0
            } else {
                1.0
            }
        }
        Some(_) => ((rank * 3 + i * 7 + 1) % 5) as f64,
    }
}

/// `op` over `f(0) .. f(ranks - 1)`.
pub fn reduce(op: RedOp, ranks: usize, f: impl Fn(usize) -> f64) -> f64 {
    let vals = (0..ranks).map(f);
    match op {
        RedOp::Sum => vals.sum(),
        RedOp::Avg => vals.sum::<f64>() / ranks as f64,
        RedOp::Prod => vals.product(),
        RedOp::Min => vals.fold(f64::INFINITY, f64::min),
        RedOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
    }
}

/// Writes `v` as one element of `dt` into `out` (native byte order, as the device holds
/// it). Integers wrap to the type's width.
pub fn encode(dt: DataType, v: f64, out: &mut [u8]) {
    let i = v as i64;
    match dt {
        DataType::Int8 => out.copy_from_slice(&(i as i8).to_ne_bytes()),
        DataType::Uint8 => out.copy_from_slice(&(i as u8).to_ne_bytes()),
        DataType::Int32 => out.copy_from_slice(&(i as i32).to_ne_bytes()),
        DataType::Uint32 => out.copy_from_slice(&(i as u32).to_ne_bytes()),
        DataType::Int64 => out.copy_from_slice(&i.to_ne_bytes()),
        DataType::Uint64 => out.copy_from_slice(&(i as u64).to_ne_bytes()),
        DataType::Float16 => out.copy_from_slice(&f16::from_f64(v).to_ne_bytes()),
        DataType::Bfloat16 => out.copy_from_slice(&bf16::from_f64(v).to_ne_bytes()),
        DataType::Float32 => out.copy_from_slice(&(v as f32).to_ne_bytes()),
        DataType::Float64 => out.copy_from_slice(&v.to_ne_bytes()),
        DataType::Float8e4m3 => out[0] = fp8::E4M3.encode(v),
        DataType::Float8e5m2 => out[0] = fp8::E5M2.encode(v),
    }
}

/// Reads one element of `dt`.
pub fn decode(dt: DataType, b: &[u8]) -> f64 {
    macro_rules! ne {
        ($t:ty) => {
            <$t>::from_ne_bytes(b.try_into().expect("element width"))
        };
    }
    match dt {
        DataType::Int8 => ne!(i8) as f64,
        DataType::Uint8 => ne!(u8) as f64,
        DataType::Int32 => ne!(i32) as f64,
        DataType::Uint32 => ne!(u32) as f64,
        DataType::Int64 => ne!(i64) as f64,
        DataType::Uint64 => ne!(u64) as f64,
        DataType::Float16 => ne!(f16).to_f64(),
        DataType::Bfloat16 => ne!(bf16).to_f64(),
        DataType::Float32 => ne!(f32) as f64,
        DataType::Float64 => ne!(f64),
        DataType::Float8e4m3 => fp8::E4M3.decode(b[0]),
        DataType::Float8e5m2 => fp8::E5M2.decode(b[0]),
    }
}

/// `count` elements of input for `rank`, encoded.
pub fn fill_input(dt: DataType, op: Option<RedOp>, rank: usize, count: usize) -> Vec<u8> {
    let ts = dt.size();
    let mut out = vec![0u8; count * ts];
    for (i, chunk) in out.chunks_exact_mut(ts).enumerate() {
        encode(dt, input_value(op, rank, i), chunk);
    }
    out
}

/// How far a correct element may be from the exact value: zero where the result cannot
/// depend on the order of operations, a few units in the last place otherwise.
pub fn tolerance(dt: DataType, op: Option<RedOp>, ranks: usize, expected: f64) -> f64 {
    let eps = match dt {
        DataType::Float16 => 2f64.powi(-10),
        DataType::Bfloat16 => 2f64.powi(-7),
        DataType::Float32 => 2f64.powi(-23),
        DataType::Float64 => 2f64.powi(-52),
        // FP8: half a unit in the last place per rounding (3 and 2 mantissa bits).
        DataType::Float8e4m3 => 2f64.powi(-4),
        DataType::Float8e5m2 => 2f64.powi(-3),
        // Integer avg: NCCL divides the integer sum, rounding may differ by one.
        _ => return if op == Some(RedOp::Avg) { 1.0 } else { 0.0 },
    };
    match op {
        Some(RedOp::Sum | RedOp::Avg | RedOp::Prod) => expected.abs().max(1.0) * eps * ranks as f64,
        _ => 0.0,
    }
}

/// Counts the elements of `out` (elements of `dt`) that differ from `expected(j)` by more
/// than the tolerance; elements where `expected` is `None` are not checked. A NaN or an
/// untouched poison value counts as wrong.
pub fn count_wrong(
    dt: DataType,
    op: Option<RedOp>,
    ranks: usize,
    out: &[u8],
    expected: impl Fn(usize) -> Option<f64>,
) -> u64 {
    let ts = dt.size();
    let mut buf = [0u8; 8];
    let mut wrong = 0;
    for (j, chunk) in out.chunks_exact(ts).enumerate() {
        let Some(e) = expected(j) else { continue };
        // Round the exact value through the type, so integer wrap-around and float
        // rounding of the expected value match what the hardware stores.
        encode(dt, e, &mut buf[..ts]);
        let want = decode(dt, &buf[..ts]);
        let got = decode(dt, chunk);
        let tol = tolerance(dt, op, ranks, want);
        // NaN compares as neither: wrong.
        let close = (got - want).abs() <= tol;
        if !close {
            wrong += 1;
        }
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_small_integers() {
        for dt in DataType::ALL {
            let mut b = vec![0u8; dt.size()];
            // 127 needs 7 significant bits: not for FP8 (3 and 2 mantissa bits).
            let fp8 = matches!(dt, DataType::Float8e4m3 | DataType::Float8e5m2);
            for v in [0.0, 1.0, 4.0, 96.0, 127.0] {
                if fp8 && v == 127.0 {
                    continue;
                }
                encode(dt, v, &mut b);
                assert_eq!(decode(dt, &b), v, "{dt:?} {v}");
            }
        }
    }

    #[test]
    fn integers_wrap_like_the_hardware() {
        let mut b = [0u8; 1];
        encode(DataType::Int8, 130.0, &mut b);
        assert_eq!(decode(DataType::Int8, &b), -126.0);
        encode(DataType::Uint8, 256.0, &mut b);
        assert_eq!(decode(DataType::Uint8, &b), 0.0);
    }

    #[test]
    fn the_checker_finds_one_corrupted_element() {
        for dt in DataType::ALL {
            let op = Some(RedOp::Sum);
            let ranks = 4;
            let n = 1000;
            let expect = |j: usize| Some(reduce(RedOp::Sum, ranks, |r| input_value(op, r, j)));
            let mut out = vec![0u8; n * dt.size()];
            for (j, c) in out.chunks_exact_mut(dt.size()).enumerate() {
                encode(dt, expect(j).unwrap(), c);
            }
            assert_eq!(count_wrong(dt, op, ranks, &out, expect), 0, "{dt:?}");
            // One element off by one.
            let j = 417;
            let ts = dt.size();
            let v = decode(dt, &out[j * ts..(j + 1) * ts]);
            // Off by one, or by the next but one FP8 step where one is below resolution.
            let off = if ts == 1 && dt.is_float() {
                v.max(1.0)
            } else {
                1.0
            };
            encode(dt, v + off, &mut out[j * ts..(j + 1) * ts]);
            assert_eq!(count_wrong(dt, op, ranks, &out, expect), 1, "{dt:?}");
            // Poison (all ones: NaN for floats, -1 / max for integers) everywhere.
            out.fill(0xff);
            assert_eq!(count_wrong(dt, op, ranks, &out, expect), n as u64, "{dt:?}");
        }
    }

    #[test]
    fn undefined_elements_are_not_checked() {
        let out = vec![0xffu8; 40];
        assert_eq!(count_wrong(DataType::Float32, None, 2, &out, |_| None), 0);
    }

    #[test]
    fn products_stay_exact_powers_of_two() {
        let op = Some(RedOp::Prod);
        let p = reduce(RedOp::Prod, 16, |r| input_value(op, r, 0));
        assert_eq!(p, 4.0);
    }
}
