// One optimizer step's backward through DDP with gradient accumulation, as the
// DDP tests run it: `micro` micro-batches, the first micro - 1 under no_sync.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/ddp.h"
#include "engine/tensor.h"

namespace tcv::dist::testing {

/// Backward of step `step`: micro-batch m is xs[step * micro + m] and ys[...],
/// of which this rank takes rows [rank * b, (rank + 1) * b); `loss(out, y)` is
/// the scalar each one backpropagates.
template <typename Loss>
void accumulate_step(DDP& ddp, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                     int64_t step, int64_t micro, int rank, int64_t b, Loss loss) {
  for (int64_t m = 0; m < micro; ++m) {
    const Tensor x = xs[step * micro + m].narrow(0, rank * b, b);
    const Tensor y = ys[step * micro + m].narrow(0, rank * b, b);
    if (m + 1 < micro) {
      auto guard = ddp.no_sync();
      loss(ddp.forward(x), y).backward();
    } else {
      loss(ddp.forward(x), y).backward();
    }
  }
}

}  // namespace tcv::dist::testing
