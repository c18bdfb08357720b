// Dense kernels of multi-person pose parsing: the Gaussian smoothing of the
// upsampled heatmaps and the 3x3 non-maximum suppression that marks their
// peaks (TorchCV's OpenPose test, after scipy.ndimage.gaussian_filter).
#pragma once

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// out = x correlated with `weights` (2·radius + 1 taps, the dtype of x) along
/// the middle axis of a contiguous (outer, n, inner) x, f32 or f64, as
/// scipy.ndimage.correlate1d in mode 'reflect' (d c b a | a b c d | d c b a):
/// out[o, i, j] = Σ_t weights[t] · x[o, reflect(i + t − radius), j], summed in
/// tap order. out must not alias x.
void gaussian_filter1d(const KTensor& out, const KTensor& x, const KTensor& weights, int64_t outer,
                       int64_t n, int64_t inner);

/// mask (planes, h, w) u8 = 1 where x (planes, h, w) > threshold and x is >=
/// each of its (up to 8) neighbours inside the plane, else 0. Contiguous, x f32
/// or f64.
void peak_mask(const KTensor& mask, const KTensor& x, double threshold, int64_t planes, int64_t h,
               int64_t w);

}  // namespace tcv::kernels::cpu
