// The input window of one pooling output, written once for the CPU reference
// loops (kernels/cpu/pool.cpp) and the CUDA kernels (kernels/cuda/pool.cu).
#pragma once

#include <cstdint>

#include "kernels/cpu/pool.h"   // Pool2dGeom
#include "kernels/pointwise.h"  // TCV_HOST_DEVICE

namespace tcv::kernels {

/// Rows [y0, y1) and columns [x0, x1) of the input, clipped to the image, and
/// the averaging divisor (include-pad: clipped at h + pad and w + pad only, as
/// PyTorch).
struct PoolWindow {
  int64_t y0, y1, x0, x1, count;
};

TCV_HOST_DEVICE PoolWindow pool_window(const Pool2dGeom& g, int64_t oy, int64_t ox) {
  const auto lesser = [](int64_t a, int64_t b) { return a < b ? a : b; };
  const int64_t y0 = oy * g.stride[0] - g.pad[0], x0 = ox * g.stride[1] - g.pad[1];
  const int64_t y1 = lesser(y0 + g.kernel[0], g.h + g.pad[0]);
  const int64_t x1 = lesser(x0 + g.kernel[1], g.w + g.pad[1]);
  PoolWindow win{y0 > 0 ? y0 : 0, lesser(y1, g.h), x0 > 0 ? x0 : 0, lesser(x1, g.w), 0};
  win.count = g.kind == PoolKind::avg_include_pad ? (y1 - y0) * (x1 - x0)
                                                  : (win.y1 - win.y0) * (win.x1 - win.x0);
  return win;
}

}  // namespace tcv::kernels
