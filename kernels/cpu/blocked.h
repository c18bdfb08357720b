// The layouts CPU convolutions compute in, which tcv keeps activations in
// between layers that can read them (see Tensor::is_blocked) instead of
// converting at every call ("blocked" below, by dtype):
//  - f32: oneDNN's nChw16c: channel c of pixel (h, w) of image n sits at
//    ((n * C/16 + c/16) * H * W + h * W + w) * 16 + c % 16 (C a multiple of 16);
//  - bf16 (mixed precision): channels last, NHWC: ((n * H + h) * W + w) * C + c,
//    what oneDNN's AMX and AVX512_BF16 convolutions read and write.
#pragma once

#include <cstdint>

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// Channels per block (f32).
constexpr int64_t kChannelBlock = 16;

/// Row-major (N, C, H, W) -> the blocked layout of `dtype` and back (f32 with
/// C a multiple of 16, or bf16). oneDNN reorders, cached per shape; `src` and
/// `dst` must not overlap.
void nchw_to_blocked(const int64_t dims[4], DType dtype, const void* src, void* dst);
void blocked_to_nchw(const int64_t dims[4], DType dtype, const void* src, void* dst);

}  // namespace tcv::kernels::cpu
