// 2-D pooling on the CPU: max, average and adaptive average, forward and backward.
//
// f32 max/avg pooling runs through oneDNN on plain NCHW; f64 (and the few
// configurations oneDNN cannot express, see pool.cpp) run through direct loops.
#pragma once

#include <cstdint>

#include "kernels/base.h"

namespace tcv::kernels {

enum class PoolKind : uint8_t { max, avg_include_pad, avg_exclude_pad };

/// Shapes and parameters of one pooling. x (n, c, h, w) and y (n, c, oh, ow) are
/// contiguous; oh/ow already follow PyTorch's floor/ceil-mode rule.
struct Pool2dGeom {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t oh = 0, ow = 0;
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t pad[2] = {0, 0};
  PoolKind kind = PoolKind::max;
  /// CPU f32 only: x, y, dy and dx are in the blocked layout (kernels/cpu/
  /// blocked.h) instead of row-major; see pool2d_blockable.
  bool blocked = false;
};

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// Whether pooling of this geometry can run on blocked data (f32, oneDNN, whole
/// channel blocks): a blocked input then gives a blocked output, no reorder.
bool pool2d_blockable(const Pool2dGeom& g, DType dtype);

/// Whether pool2d_forward and pool2d_backward take `dtype` for g: f32 and f64
/// always, bf16 where oneDNN runs it (CPUs with bf16 instructions, and not
/// PyTorch's ceil-mode average divisor).
bool pool2d_takes(const Pool2dGeom& g, DType dtype);

/// Bytes the max-pool backward needs from the forward (oneDNN workspace for f32,
/// i64 argmax indices for f64). 0 for average pooling.
size_t pool2d_workspace_bytes(const Pool2dGeom& g, DType dtype);

/// y = pool(x). For max pooling, `workspace` (pool2d_workspace_bytes, any dtype)
/// receives what the backward needs; it may be null when no backward follows.
void pool2d_forward(const Pool2dGeom& g, const KTensor& x, const KTensor& y,
                    const KTensor* workspace);

/// dx from dy; max pooling routes each dy to its window's argmax via `workspace`.
void pool2d_backward(const Pool2dGeom& g, const KTensor& dy, const KTensor& dx,
                     const KTensor* workspace);

/// Adaptive average pooling with PyTorch's bins: output row i covers input rows
/// [floor(i·h/oh), ceil((i+1)·h/oh)). x (n, c, h, w) -> y (n, c, oh, ow), contiguous.
void adaptive_avg_pool2d_forward(const KTensor& x, const KTensor& y);
void adaptive_avg_pool2d_backward(const KTensor& dy, const KTensor& dx);

}  // namespace tcv::kernels::cpu
