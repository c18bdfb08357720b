// Neural-network ops: convolution, pooling, normalization, dropout, softmax,
// resampling.
#pragma once

#include <array>
#include <functional>

#include "engine/tensor.h"
#include "kernels/cpu/conv.h"

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

/// How CPU f32 convolutions choose oneDNN's algorithm: automatic (Winograd where
/// oneDNN expects it to win) or direct (as PyTorch); TCV_CONV_ALGO sets the
/// default. See kernels/cpu/conv.h.
using kernels::cpu::ConvAlgo;
using kernels::cpu::get_conv_algo;
using kernels::cpu::parse_conv_algo;
using kernels::cpu::set_conv_algo;

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

/// The data-parallel group sync_batch_norm reduces over: its size and an
/// in-place sum all-reduce. The engine never sees a process group; dist/ddp.h
/// makes one from a ProcessGroup (dist::sync_bn_group).
struct SyncBNGroup {
  int size = 1;
  /// Sums `t` (contiguous) in place across the group and returns once done. Every
  /// rank calls it in the same order (forward, then backward, layer by layer).
  std::function<void(const Tensor& t)> all_reduce_sum;
};

/// Batch norm over (N, C, H, W) with training statistics over the whole group,
/// as torch.nn.SyncBatchNorm: the sums of x, x² and the element count are
/// all-reduced in forward, the sums of dy and dy·x̂ in backward (so dx is the
/// gradient of the union-batch normalisation). weight/bias gradients are the
/// local ones (DDP averages them). Running stats (when defined) are updated with
/// the group's mean and unbiased variance.
Tensor sync_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, double momentum, double eps,
                       const SyncBNGroup& group);

/// Zeroes each element with probability p and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

enum class InterpMode : uint8_t { nearest, bilinear };
/// Resizes (N, C, H, W) to `size`; align_corners as torch (bilinear only).
Tensor upsample(const Tensor& x, std::array<int64_t, 2> size, InterpMode mode,
                bool align_corners = false);

}  // namespace tcv::ops
