// Random-number kernels on the CPU, the counterparts of kernels/cuda/rng.h: the
// same Philox-4x32-10 words for the same (seed, first counter), so a CPU and a
// GPU draw with the same generator state agree element for element.
#pragma once

#include <cstdint>

#include "kernels/base.h"

namespace tcv::kernels::cpu {

/// Fused dropout over contiguous x, out and mask (one floating dtype): element
/// i reads word i % 4 of Philox block base + i / 4; mask[i] = u < 1 - p ? scale
/// : 0 with u = (word >> 8) · 2⁻²⁴ (as uniform draws read it) and scale =
/// 1 / (1 - p) in the dtype, out[i] = x[i] · mask[i]. p in [0, 1).
void dropout(const KTensor& out, const KTensor& mask, const KTensor& x, double p, uint64_t seed,
             uint64_t base);

}  // namespace tcv::kernels::cpu
