// Random numbers on the GPU from the same Philox-4x32-10 stream as
// engine/rng.cpp: with the same (seed, first counter) every entry point fills
// exactly the values the CPU draw makes, element i of the (contiguous) output
// taking the same counter and word as on the CPU.
//
// uniform and randint are bit-identical to the CPU. normal goes through the
// device's double log/cos, which may differ from the host's libm in the last
// ulp of a double: after the cast to f32 the values agree to ~1e-15 relative
// (in practice bit-identical), well within 1e-6.
//
// The generator's offset is the caller's business (engine/rng.cpp advances it
// exactly as for a CPU draw and passes the first counter as `base`).
#pragma once

#include <cstdint>

#include "kernels/base.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// out[i] = fma(high - low, u(i), low), u(i) = (word (i % 4) of block(base + i / 4)) >> 8 · 2⁻²⁴,
/// computed in f64 and cast to out's dtype (any). out must be contiguous.
TCV_CUDA_API void uniform(const KTensor& out, uint64_t seed, uint64_t base, double low, double high)
    TCV_CUDA_ENTRY;

/// Box-Muller from words (2·(i % 2), 2·(i % 2) + 1) of block(base + i / 2):
/// fma(std · sqrt(-2 log(1 - u1)), cos(2π u2), mean), in f64, cast to out's dtype.
TCV_CUDA_API void normal(const KTensor& out, uint64_t seed, uint64_t base, double mean, double std)
    TCV_CUDA_ENTRY;

/// low + (64-bit word pair of block(base + i / 2)) mod (high - low), cast to out's dtype.
TCV_CUDA_API void randint(const KTensor& out, uint64_t seed, uint64_t base, int64_t low,
                          int64_t high) TCV_CUDA_ENTRY;

/// Fused dropout over contiguous x, out and mask (one floating dtype):
/// mask[i] = u(i) < 1 - p ? scale : 0 (u as in uniform, scale = 1 / (1 - p) cast
/// to the dtype), out[i] = x[i] · mask[i].
TCV_CUDA_API void dropout(const KTensor& out, const KTensor& mask, const KTensor& x, double p,
                          uint64_t seed, uint64_t base) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
