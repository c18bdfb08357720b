// Neural-network ops: convolution, pooling, normalization, dropout, softmax,
// resampling.
#pragma once

#include <array>

#include "engine/tensor.h"

namespace tcv {
class Generator;
}

namespace tcv::ops {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

/// x (N, C, H, W), weight (K, C/groups, R, S), bias (K) or undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dParams& p = {});

struct Pool2dParams {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{2, 2};
  std::array<int64_t, 2> padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;  ///< avg pool only
};

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
/// Output (N, C, out_h, out_w) with PyTorch's adaptive bin edges.
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);

/// Batch norm over (N, C, ...): in training, normalizes with batch statistics and
/// updates running_mean/var (unbiased var) with `momentum` when they are defined;
/// in eval, uses the running statistics. weight/bias may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum = 0.1, double eps = 1e-5);
/// relu(batch_norm(...)) in one pass over the data, the same values and gradients.
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, bool training,
                       double momentum = 0.1, double eps = 1e-5);
/// relu6(batch_norm(...)) in one pass over the data, the same values and gradients.
Tensor batch_norm_relu6(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Tensor running_mean, Tensor running_var, bool training,
                        double momentum = 0.1, double eps = 1e-5);

/// Zeroes each element with probability p and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);
/// Channel dropout, as torch.nn.functional.dropout2d: in training, zeroes each
/// whole channel x[n, c] of x (N, C, d1, ...) with probability p and scales the
/// others by 1/(1-p). The N·C keep draws come from the generator as rand((N, C))
/// would, on x's device, so CPU and CUDA drop the same channels.
Tensor dropout2d(const Tensor& x, double p, bool training, Generator* gen = nullptr);

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

enum class InterpMode : uint8_t { nearest, bilinear };
/// Resizes (N, C, H, W) to `size`; align_corners as torch (bilinear only).
Tensor upsample(const Tensor& x, std::array<int64_t, 2> size, InterpMode mode,
                bool align_corners = false);

}  // namespace tcv::ops
