// oneDNN's nChw16c layout for 4-D f32 activations: channel c of pixel (h, w) of
// image n sits at ((n * C/16 + c/16) * H * W + h * W + w) * 16 + c % 16. CPU
// convolutions compute in it; tcv keeps activations in it between layers that
// can read it (see Tensor::is_blocked) instead of converting at every call.
#pragma once

#include <cstdint>

namespace tcv::kernels::cpu {

/// Channels per block.
constexpr int64_t kChannelBlock = 16;

/// Row-major (N, C, H, W) -> nChw16c and back, for f32 with C a multiple of 16.
/// oneDNN reorders, cached per shape; `src` and `dst` must not overlap.
void nchw_to_blocked(const int64_t dims[4], const void* src, void* dst);
void blocked_to_nchw(const int64_t dims[4], const void* src, void* dst);

}  // namespace tcv::kernels::cpu
