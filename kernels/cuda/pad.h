// Padding on the GPU, the same entry points and semantics as kernels/cpu/pad.h:
// constant, reflect and replicate over any dims, negative pads cropping.
#pragma once

#include "kernels/cpu/pad.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out = in padded by before[d] elements in front of each dim d (after-pads follow
/// from out.sizes); every dtype. `in` and `out` contiguous.
TCV_CUDA_API void pad(PadMode mode, const KTensor& out, const KTensor& in, const int64_t* before,
                      double value) TCV_CUDA_ENTRY;

/// dx (zeroed here) = the sum of dy over every output position that read each
/// input element; floating dtypes (f16/bf16 accumulate in f32), contiguous.
TCV_CUDA_API void pad_backward(PadMode mode, const KTensor& dx, const KTensor& dy,
                               const int64_t* before) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
