//! The little statistics the report needs: medians, spreads, and ratios.
//!
//! Medians rather than means, because on a shared 2-core VM the noise is one-sided (a
//! descheduled run is slow, never fast) and a median of a handful of repeats ignores the
//! odd outlier. Ratios between designs are *paired*: repeat `i` of one design ran right
//! next to repeat `i` of the other (the runner interleaves them), so `b[i] / a[i]` cancels
//! slow drift of the machine, and the median of those per-repeat ratios is the estimate.

/// The median of `xs` (the mean of the two middle values for an even count); `None` if
/// empty or if any value is NaN.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The smallest and largest of `xs`; `None` if empty.
pub fn min_max(xs: &[f64]) -> Option<(f64, f64)> {
    let first = *xs.first()?;
    Some(
        xs.iter()
            .fold((first, first), |(lo, hi), &x| (lo.min(x), hi.max(x))),
    )
}

/// `num / den`, or `None` when it is not a meaningful number (a zero or non-finite
/// denominator).
pub fn ratio(num: f64, den: f64) -> Option<f64> {
    let r = num / den;
    (den > 0.0 && r.is_finite()).then_some(r)
}

/// The ratio of design `b` to design `a` from interleaved repeats: the median of the
/// per-repeat ratios `b[i] / a[i]` when both have the same number of repeats (they ran
/// side by side), otherwise the ratio of the medians.
pub fn paired_ratio(b: &[f64], a: &[f64]) -> Option<f64> {
    if !a.is_empty() && a.len() == b.len() {
        let per_repeat: Option<Vec<f64>> = b.iter().zip(a).map(|(&y, &x)| ratio(y, x)).collect();
        if let Some(rs) = per_repeat {
            return median(&rs);
        }
    }
    ratio(median(b)?, median(a)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn median_ignores_one_outlier() {
        assert_eq!(median(&[100.0, 101.0, 1.0, 99.0, 102.0]), Some(100.0));
    }

    #[test]
    fn min_max_of_runs() {
        assert_eq!(min_max(&[2.0, -1.0, 5.0]), Some((-1.0, 5.0)));
        assert_eq!(min_max(&[]), None);
    }

    #[test]
    fn ratio_rejects_zero_denominator() {
        assert_eq!(ratio(6.0, 3.0), Some(2.0));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(0.0, 0.0), None);
    }

    #[test]
    fn paired_ratio_cancels_drift() {
        // The machine slows down 10x between repeats; both designs see it alike, so the
        // paired ratio is exactly 2 while the ratio of medians is not.
        let a = [100.0, 10.0, 10.0, 1.0];
        let b = [200.0, 20.0, 20.0, 2.0];
        assert_eq!(paired_ratio(&b, &a), Some(2.0));
        let c = [100.0, 10.0, 1.0];
        let d = [200.0, 20.0, 20.0, 2.0];
        // Unequal lengths: ratio of medians (20 / 10).
        assert_eq!(paired_ratio(&d, &c), Some(2.0));
        assert_eq!(paired_ratio(&[1.0], &[]), None);
        // A zero repeat makes the pairs meaningless: fall back to the medians.
        assert_eq!(paired_ratio(&[4.0, 4.0, 4.0], &[0.0, 2.0, 2.0]), Some(2.0));
    }
}
