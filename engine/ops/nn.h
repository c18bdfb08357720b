// Neural-network ops: convolution, pooling, normalization, dropout, softmax,
// resampling.
#pragma once

#include <array>
#include <functional>

#include "engine/tensor.h"
#include "tcv/core/conv_algo.h"

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
/// relu(conv2d(x, weight, bias, p)); on the CPU in f32 one pass (oneDNN applies
/// the ReLU as it writes the output, so the pre-activation tensor never exists).
Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                   const Conv2dParams& p = {});

/// How CPU f32 convolutions choose oneDNN's algorithm: automatic (per pass the
/// fastest within direct convolution's rounding-error bound), direct (as
/// PyTorch) or winograd (faster on 3x3 layers, about 10x the rounding error);
/// TCV_CONV_ALGO sets the default. See tcv/core/conv_algo.h.
using ::tcv::conv_algo_name;
using ::tcv::ConvAlgo;
using ::tcv::get_conv_algo;
using ::tcv::parse_conv_algo;
using ::tcv::set_conv_algo;

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

/// batch_norm's options, torch.nn.functional.batch_norm's keywords.
struct BatchNormParams {
  /// Normalise with the batch's statistics and update the running ones (when
  /// defined); otherwise use the running statistics.
  bool training = false;
  /// Weight of the new batch statistic in the running averages.
  double momentum = 0.1;
  double eps = 1e-5;
};

/// Batch norm over (N, C, ...): in training, normalizes with batch statistics and
/// updates running_mean/var (unbiased var) with `momentum` when they are defined;
/// in eval, uses the running statistics (or the batch's, when they are undefined).
/// weight/bias may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, const BatchNormParams& p = {});
/// relu(batch_norm(...)) in one pass over the data, the same values and gradients.
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, const BatchNormParams& p = {});
/// relu6(batch_norm(...)) in one pass over the data, the same values and gradients.
Tensor batch_norm_relu6(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Tensor running_mean, Tensor running_var, const BatchNormParams& p = {});

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
/// as torch.nn.SyncBatchNorm: each rank's count, Σx and Σx² (from its own mean
/// and variance, in f64) are all-reduced in forward, Σdy and Σdy·x̂ in backward
/// (so dx is the gradient of the union-batch normalisation). weight/bias
/// gradients are the local ones (DDP averages them). Running stats (when
/// defined) are updated with the group's mean and unbiased variance. The data
/// passes are batch_norm's kernels (a blocked CPU input stays blocked, a fused
/// relu/relu6 clamps as the output is written).
struct SyncBatchNormParams {
  double momentum = 0.1;
  double eps = 1e-5;
  enum class Act : uint8_t { none, relu, relu6 };
  /// An activation fused into the output, as batch_norm_relu and batch_norm_relu6.
  Act act = Act::none;
};
Tensor sync_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor running_mean, Tensor running_var, const SyncBNGroup& group,
                       const SyncBatchNormParams& p = {});

/// dropout's options, torch.nn.functional.dropout's keywords.
struct DropoutOptions {
  double p = 0.5;  ///< the probability of zeroing an element, in [0, 1]
  /// Outside training dropout returns its input.
  bool training = true;
  /// Where the mask is drawn from (the default generator when null).
  Generator* generator = nullptr;
};

/// Zeroes each element with probability p and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, const DropoutOptions& opts = {});
/// Channel dropout, as torch.nn.functional.dropout2d: in training, zeroes each
/// whole channel x[n, c] of x (N, C, d1, ...) with probability p and scales the
/// others by 1/(1-p). The N·C keep draws come from the generator as rand((N, C))
/// would, on x's device, so CPU and CUDA drop the same channels.
Tensor dropout2d(const Tensor& x, const DropoutOptions& opts = {});

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

enum class InterpMode : uint8_t { nearest, bilinear };
/// upsample's options: the interpolation and, for bilinear, torch's align_corners.
struct UpsampleOptions {
  InterpMode mode = InterpMode::nearest;
  bool align_corners = false;
};
/// Resizes (N, C, H, W) to `size`.
Tensor upsample(const Tensor& x, std::array<int64_t, 2> size, const UpsampleOptions& opts = {});

}  // namespace tcv::ops
