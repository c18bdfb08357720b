// Softmax and log-softmax along one dim of a contiguous tensor viewed as
// (outer, r, inner), forward and backward, each a single fused pass per row.
#pragma once

#include "kernels/base.h"

namespace tcv::kernels {
enum class SoftmaxKind : uint8_t { softmax, log_softmax };
}

namespace tcv::kernels::cpu {

/// out = softmax(in) or log_softmax(in) over r, with the row maximum subtracted
/// first. in and out are contiguous (outer, r, inner), f32 or f64.
void softmax(SoftmaxKind kind, const KTensor& out, const KTensor& in, int64_t outer, int64_t r,
             int64_t inner);

/// From the forward output y and its gradient dy (both contiguous):
/// softmax:     dx = y · (dy − Σ_r dy·y)
/// log_softmax: dx = dy − exp(y) · Σ_r dy
void softmax_backward(SoftmaxKind kind, const KTensor& dx, const KTensor& dy, const KTensor& y,
                      int64_t outer, int64_t r, int64_t inner);

}  // namespace tcv::kernels::cpu
