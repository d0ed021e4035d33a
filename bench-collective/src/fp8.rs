//! The two FP8 formats NCCL reduces (`ncclFloat8e4m3`, `ncclFloat8e5m2`), converted to
//! and from f64 on the host for filling and checking buffers. Round to nearest, ties to
//! even, out-of-range values saturate to the largest finite value (CUDA's
//! `__NV_SATFINITE`), as the OCP 8-bit floating point specification (v1.0) describes:
//! - E4M3 ("fn"): 4 exponent bits (bias 7), 3 mantissa bits, no infinities, S.1111.111
//!   is NaN, largest finite 448;
//! - E5M2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (infinities, NaNs),
//!   largest finite 57344.

/// One FP8 format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// E5M2 reserves the top exponent for infinities and NaNs; E4M3 only S.1111.111.
    ieee_top: bool,
}

pub const E4M3: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    ieee_top: false,
};

pub const E5M2: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    ieee_top: true,
};

impl Format {
    /// The largest finite value.
    pub fn max(self) -> f64 {
        let top = (1i32 << self.exp_bits) - 1;
        let (e, m) = if self.ieee_top {
            (top - 1, (1u32 << self.man_bits) - 1)
        } else {
            (top, (1u32 << self.man_bits) - 2)
        };
        (1.0 + f64::from(m) / f64::from(1u32 << self.man_bits)) * 2f64.powi(e - self.bias)
    }

    /// A NaN: S.1111.111 in E4M3, exponent all ones with a mantissa in E5M2 (0x7f both).
    fn nan(self) -> u8 {
        0x7f
    }

    /// Encodes `v`.
    pub fn encode(self, v: f64) -> u8 {
        if v.is_nan() {
            return self.nan();
        }
        let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
        let a = v.abs().min(self.max());
        if a == 0.0 {
            return sign;
        }
        let min_exp = 1 - self.bias;
        let e = (a.log2().floor() as i32).max(min_exp);
        let quantum = 2f64.powi(e - self.man_bits as i32);
        let q = round_half_even(a / quantum) * quantum;
        let q = q.min(self.max());
        let e2 = q.log2().floor() as i32;
        let bits = if q == 0.0 {
            0
        } else if e2 < min_exp {
            // Subnormal: exponent field 0, mantissa counts 2^(min_exp - man_bits).
            (q / 2f64.powi(min_exp - self.man_bits as i32)).round() as u32
        } else {
            let m = ((q / 2f64.powi(e2) - 1.0) * f64::from(1u32 << self.man_bits)).round() as u32;
            (((e2 + self.bias) as u32) << self.man_bits) | m
        };
        sign | bits as u8
    }

    /// Decodes one byte.
    pub fn decode(self, b: u8) -> f64 {
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let e = u32::from(b & 0x7f) >> self.man_bits;
        let m = u32::from(b) & ((1 << self.man_bits) - 1);
        let top = (1u32 << self.exp_bits) - 1;
        if self.ieee_top && e == top {
            return if m == 0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if !self.ieee_top && e == top && m == (1 << self.man_bits) - 1 {
            return f64::NAN;
        }
        let frac = f64::from(m) / f64::from(1u32 << self.man_bits);
        let v = if e == 0 {
            frac * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + frac) * 2f64.powi(e as i32 - self.bias)
        };
        sign * v
    }
}

fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the OCP FP8 specification's tables.
    #[test]
    fn formats_match_the_ocp_specification() {
        assert_eq!(E4M3.max(), 448.0);
        assert_eq!(E5M2.max(), 57344.0);
        assert_eq!(E4M3.encode(448.0), 0x7e);
        assert_eq!(E4M3.encode(1.0), 0x38);
        assert_eq!(E5M2.encode(1.0), 0x3c);
        assert_eq!(E4M3.decode(0x01), 2f64.powi(-9), "smallest subnormal");
        assert_eq!(E5M2.decode(0x01), 2f64.powi(-16), "smallest subnormal");
        assert!(E4M3.decode(0x7f).is_nan() && E4M3.decode(0xff).is_nan());
        assert!(E5M2.decode(0xff).is_nan());
        assert_eq!(E5M2.decode(0x7c), f64::INFINITY);
        assert_eq!(E4M3.encode(1e6), 0x7e, "saturates");
        assert_eq!(E4M3.encode(-2.0), 0xc0);
    }

    #[test]
    fn every_byte_round_trips_and_rounding_is_to_nearest_even() {
        for f in [E4M3, E5M2] {
            for b in 0..=255u8 {
                let v = f.decode(b);
                if v.is_finite() {
                    let back = f.encode(v);
                    // +0 and -0 both decode to zero; everything else is exact.
                    assert_eq!(f.decode(back), v, "{f:?} {b:#x}");
                }
            }
        }
        // 17 lies halfway between 16 and 18 in E4M3: ties go to the even mantissa (16).
        assert_eq!(E4M3.decode(E4M3.encode(17.0)), 16.0);
        assert_eq!(E4M3.decode(E4M3.encode(19.0)), 20.0);
    }
}
