// Reductions on the CPU over a contiguous input viewed as (outer, r, inner):
// out (outer, inner) = reduce over r.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels {
enum class ReduceOp : uint8_t { sum, max, min };
}

namespace tcv::kernels::cpu {

/// Sums in double for f32 inputs, so long reductions keep their precision.
/// For max/min, `indices` (i64, outer·inner) receives the first extreme's position in r
/// when non-null. NaN wins max and min, as in PyTorch.
void reduce(ReduceOp op, const KTensor& out, const KTensor& in, int64_t outer, int64_t r,
            int64_t inner, const KTensor* indices = nullptr);

}  // namespace tcv::kernels::cpu
