// Batch norm's backward per channel, written once for the CPU loops (plain,
// nChw16c/nChw8c and bf16 NHWC in kernels/cpu/batch_norm.cpp) and the CUDA kernel
// (kernels/cuda/batch_norm.cu): from a channel's sums, its dweight and dbias
// and the coefficients of
//   dx = k_dy·dy − k_x·(x − mean) − k_0.
#pragma once

#include <cstdint>

#include "kernels/pointwise.h"  // TCV_HOST_DEVICE

namespace tcv::kernels {

struct BnBackwardCoef {
  double dweight;  // Σ dy·xhat
  double dbias;    // Σ dy
  double k_dy, k_x, k_0;
};

/// Channel c with the sums Σdy, Σdy·(x − mean), Σ(x − mean) over `count`
/// values and invstd = 1/sqrt(var + eps). The saved mean is the batch mean
/// rounded to the storage type; in training the part it lost, d = Σ(x − mean) /
/// count, is taken out of Σdy·(x − mean) and of dx, as in the forward. With the
/// group's sums (SyncBatchNorm: gdy, gdyx = Σdy, Σdy·xhat, count the group's)
/// the channel's own sums are not used and d is grest[c] (grest null: 0). w
/// null: weight 1. Without training dx = k_dy·dy (k_x = k_0 = 0).
template <typename W, typename G>
TCV_HOST_DEVICE BnBackwardCoef bn_backward_coef(int64_t c, double sum_dy, double sum_dy_xc,
                                                double sum_xc, double invstd, double count,
                                                bool training, const W* w, const G* gdy,
                                                const G* gdyx, const G* grest) {
  const double d = gdy        ? (grest ? static_cast<double>(grest[c]) : 0.0)
                   : training ? sum_xc / count
                              : 0.0;
  if (gdy) sum_dy = static_cast<double>(gdy[c]);
  const double sum_dy_xhat = gdy ? static_cast<double>(gdyx[c]) : (sum_dy_xc - d * sum_dy) * invstd;
  const double scale = invstd * (w ? static_cast<double>(w[c]) : 1.0);
  const double k_x = training ? scale * sum_dy_xhat * invstd / count : 0.0;
  return {sum_dy_xhat, sum_dy, scale, k_x, training ? scale * sum_dy / count - d * k_x : 0.0};
}

}  // namespace tcv::kernels
