// The dense part of multi-person pose parsing (OpenPose): smoothing the
// heatmaps and marking their peaks. Inference only: neither is differentiable.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace tcv::ops {

/// The taps scipy.ndimage.gaussian_filter1d uses for `sigma`: radius
/// int(truncate·σ + 0.5), weights exp(−t²/2σ²) normalised to sum 1 (in f64).
std::vector<double> gaussian_taps(double sigma, double truncate = 4.0);

/// scipy.ndimage.gaussian_filter(x, sigma) over the last two dims of x (..., H,
/// W), f32 or f64, mode 'reflect', one separable pass along H, then one along W
/// (each in x's dtype). TorchCV smooths the upsampled heatmaps with σ = 3.
Tensor gaussian_filter2d(const Tensor& x, double sigma, double truncate = 4.0);

/// u8 mask of x (..., H, W) (f32 or f64): 1 where x > threshold and x >= each
/// of its neighbours in the 3x3 window (those inside the map), else 0. Plateaus
/// mark each of their pixels, as TorchCV's comparison with >= does.
Tensor peak_mask(const Tensor& x, double threshold);

}  // namespace tcv::ops
