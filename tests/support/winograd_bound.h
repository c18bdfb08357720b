// The rounding-error bounds of tcv's Winograd kernels (kernels/cpu/winograd.h).
// For F(2x2, 3x3),
// from the algorithm: an output computed as Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A in f32,
// with the filter transform rounded once, differs from the exact convolution
// by at most γ_(C+8) · M, where M, per output element, is the same expression
// on magnitudes, Σ_c |Aᵀ|[(|G| |g| |Gᵀ|) ⊙ (|Bᵀ| |d| |B|)]|A| (2 roundings in
// the input transform, 1 in the filter's, C in the channel sum, 4 in the
// output transform). M is zero exactly where the output's 3x3 window of inputs
// is zero (or its filters are), so there the result must be exactly 0.
//
// The stride-2 kernels (the polyphase split: 25 products for 2x2 outputs, 4x4
// input gradients in backward-data) have transforms of coefficients 0 and ±1
// with at most 2 terms a row in Bᵀ and 3 in Aᵀ, and the filters' exact in f64:
// the same γ_(C+8) · M and γ_(T+6) · M bound them, M computed on their own
// matrices, and each output's M is zero exactly where its 3x3 window is.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace tcv::testing {

/// A layer's dilation; the tiles of a dilated layer are taken per phase
/// (y mod h, x mod w), their outputs and input windows d apart.
struct Dilation {
  int64_t h = 1, w = 1;
};

/// M for the forward pass: |x| (n, c, h, w) and |w| (k, c, 3, 3), f64, stride
/// 1, padding pad_h, pad_w; returns f64 (n, k, h + 2·pad_h − 2·d_h, w + 2·pad_w − 2·d_w).
Tensor winograd2_magnitudes(const Tensor& abs_x, const Tensor& abs_w, int64_t pad_h, int64_t pad_w,
                            Dilation dil = {});

/// M for the backward-data pass of that forward: |dy| (n, k, oh, ow) with the
/// flipped, transposed |w| and padding 2·d − pad; returns f64 (n, c, h, w).
Tensor winograd2_magnitudes_backward_data(const Tensor& abs_dy, const Tensor& abs_w, int64_t pad_h,
                                          int64_t pad_w, Dilation dil = {});

/// The tiles T over a batch of n (oh, ow) outputs: the terms of each weight
/// gradient's sum.
int64_t winograd2_tiles(int64_t n, int64_t oh, int64_t ow, Dilation dil = {});

/// M for the backward-weights pass (Winograd F(3x3, 2x2), the sums over the
/// batch's T tiles in the transformed domain; bound γ_(T+6) · M): |x| and |dy|
/// (n, k, oh, ow) of a forward with padding pad; returns f64 (k, c, 3, 3),
/// Σ_tiles |Gᵀ|[(|A| |h| |Aᵀ|) ⊙ (|Bᵀ| |d| |B|)]|G|.
Tensor winograd2_magnitudes_backward_weights(const Tensor& abs_x, const Tensor& abs_dy,
                                             int64_t pad_h, int64_t pad_w, Dilation dil = {});

/// M for a 3x3 stride-2 layer with padding 1 (WinogradGeom::stride = 2), the
/// forward: |x| (n, c, h, w), |w| (k, c, 3, 3); returns f64
/// (n, k, (h + 1) / 2, (w + 1) / 2).
Tensor winograd2_stride2_magnitudes(const Tensor& abs_x, const Tensor& abs_w);

/// M for its backward-data pass: |dy| (n, k, oh, ow), |w|; returns f64 (n, c, h, w).
Tensor winograd2_stride2_magnitudes_backward_data(const Tensor& abs_dy, const Tensor& abs_w,
                                                  int64_t h, int64_t w);

/// M for its weight gradient, over the forward's winograd2_tiles(n, oh, ow)
/// 2x2 tiles: returns f64 (k, c, 3, 3).
Tensor winograd2_stride2_magnitudes_backward_weights(const Tensor& abs_x, const Tensor& abs_dy);

}  // namespace tcv::testing
