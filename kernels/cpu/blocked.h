// The layouts CPU convolutions compute in, which tcv keeps activations in
// between layers that can read them (see Tensor::is_blocked) instead of
// converting at every call ("blocked" below, by dtype):
//  - f32: oneDNN's nChw16c where its convolutions run AVX-512 kernels, nChw8c
//    where they run AVX2 ones (B = channel_block()): channel c of pixel (h, w)
//    of image n sits at ((n * C/B + c/B) * H * W + h * W + w) * B + c % B (C a
//    multiple of B);
//  - bf16 (mixed precision): channels last, NHWC: ((n * H + h) * W + w) * C + c,
//    what oneDNN's AMX and AVX512_BF16 convolutions read and write.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// Channels per block of the f32 layout on this CPU: 16 where oneDNN's f32
/// convolutions compute in nChw16c (AVX-512), 8 where they compute in nChw8c
/// (AVX2), 0 where in neither (f32 activations then stay row-major). Asked of
/// oneDNN once (ONEDNN_MAX_CPU_ISA can change it).
int64_t channel_block();

/// Whether `channels` f32 channels fill whole blocks (channel_block() > 0).
bool whole_channel_blocks(int64_t channels);

/// f(std::integral_constant<int64_t, B>{}) with this CPU's block B, 16 or 8:
/// the one place the loops on blocked data are instantiated for it.
template <typename F>
decltype(auto) with_channel_block(F&& f) {
  if (channel_block() == 16) return f(std::integral_constant<int64_t, 16>{});
  return f(std::integral_constant<int64_t, 8>{});
}

/// Row-major (N, C, H, W) -> the blocked layout of `dtype` and back (f32 with
/// C a multiple of channel_block(), or bf16). oneDNN reorders, cached per shape; `src` and
/// `dst` must not overlap.
void nchw_to_blocked(const int64_t dims[4], DType dtype, const void* src, void* dst);
void blocked_to_nchw(const int64_t dims[4], DType dtype, const void* src, void* dst);

}  // namespace tcv::kernels::cpu
