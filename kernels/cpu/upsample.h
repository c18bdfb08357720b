// 2-D resampling of contiguous (N, C, H, W) tensors with PyTorch's index
// math: nearest (legacy "nearest", floor(dst·in/out)) and bilinear with
// align_corners true or false. Backward passes scatter-add per (n, c) plane,
// so they are deterministic.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// out (N, C, OH, OW) from in (N, C, H, W), f32 or f64, both contiguous.
void upsample_nearest2d(const KTensor& out, const KTensor& in);
/// dx (N, C, H, W) = Σ of dy over the output pixels that read each input pixel.
void upsample_nearest2d_backward(const KTensor& dx, const KTensor& dy);

void upsample_bilinear2d(const KTensor& out, const KTensor& in, bool align_corners);
void upsample_bilinear2d_backward(const KTensor& dx, const KTensor& dy, bool align_corners);

}  // namespace tcv::kernels::cpu
