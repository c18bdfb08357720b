// 2-D resampling on the GPU, the same entry points and index math as
// kernels/cpu/upsample.h: nearest (legacy) and bilinear with align_corners
// true or false, over contiguous (N, C, H, W). The backward scatters with
// atomicAdd (f32/f64 in place; f16/bf16 through an f32 buffer).
#pragma once

#include "kernels/base.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out (N, C, OH, OW) from in (N, C, H, W), both contiguous.
TCV_CUDA_API void upsample_nearest2d(const KTensor& out, const KTensor& in) TCV_CUDA_ENTRY;
/// dx (N, C, H, W) = Σ of dy over the output pixels that read each input pixel.
TCV_CUDA_API void upsample_nearest2d_backward(const KTensor& dx, const KTensor& dy) TCV_CUDA_ENTRY;

TCV_CUDA_API void upsample_bilinear2d(const KTensor& out, const KTensor& in, bool align_corners)
    TCV_CUDA_ENTRY;
TCV_CUDA_API void upsample_bilinear2d_backward(const KTensor& dx, const KTensor& dy,
                                               bool align_corners) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
