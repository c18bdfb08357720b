// Batch normalization on the CPU, forward (training and eval) and backward.
//
// Direct per-channel SIMD loops for f32 and f64: on plain NCHW they beat
// oneDNN 2.6 several times over (see batch_norm.cpp), which stays available as
// the *_onednn functions (f32 only) for cross-checks.
#pragma once

#include <cstdint>

#include "kernels/base.h"

namespace tcv::kernels {

/// An activation fused into batch norm's output: relu (`y > 0 ? y : 0`) or
/// relu6 (min(max(y, 0), 6), NaN kept).
enum class BnAct : uint8_t { none, relu, relu6 };

/// x viewed as contiguous (n, c, l): statistics are per channel over n·l values.
struct BatchNormGeom {
  int64_t n = 0, c = 0, l = 1;
  double eps = 1e-5;
  /// CPU f32 only: x, y, dy and dx are in the blocked layout (kernels/cpu/
  /// blocked.h) with l = H * W, instead of row-major.
  bool blocked = false;
  /// Forward only: an activation applied as the output is written (fused into
  /// batch norm), with the elementwise ops' arithmetic. The backward takes dy
  /// already masked by the output.
  BnAct act = BnAct::none;
};

/// Running statistics a training forward updates in place, as PyTorch does:
/// r = (1 - momentum)·r + momentum·s, with s the batch mean, or the batch
/// variance made unbiased by n/(n - 1). Contiguous, in the parameters' dtype.
struct RunningStats {
  const KTensor* mean = nullptr;  ///< null: nothing to update
  const KTensor* var = nullptr;
  double momentum = 0.1;
};

/// SyncBatchNorm's backward: the per-channel sums of dy and dy·xhat over every
/// rank's batch (`count` values per channel), xhat = (x - mean - rest)·invstd
/// with the group's mean (`mean` its rounding to the data's dtype, `rest` what
/// that rounding lost; null: 0) and var. Given to batch_norm_backward
/// (training), dx takes these in place of the local batch's sums; contiguous
/// (c) in the statistics' dtype.
struct GroupGradSums {
  const KTensor* sum_dy = nullptr;
  const KTensor* sum_dy_xhat = nullptr;
  const KTensor* mean_rest = nullptr;
  double count = 0;
};

/// What both backends' batch_norm_backward check on entry: the group's sums
/// serve dx in training only.
inline void check_group_grad_sums(const GroupGradSums* group, bool training, const KTensor* dweight,
                                  const KTensor* dbias) {
  TCV_CHECK(!group || (training && !dweight && !dbias && group->sum_dy && group->sum_dy_xhat),
            "[batch_norm_backward] the group's sums serve dx in training only");
}

}  // namespace tcv::kernels

namespace tcv::kernels::cpu {

/// Training forward: y = (x - mean) / sqrt(var + eps) · weight + bias with batch
/// statistics; writes mean and the biased var (c) for the backward, and
/// updates `running`. weight/bias (c) may be null (1 and 0).
void batch_norm_forward_train(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                              const KTensor* bias, const KTensor& y, const KTensor& mean,
                              const KTensor& var, const RunningStats& running = {});

/// The batch statistics alone: mean and biased var (c) of x, as the training
/// forward computes them, without writing an output (SyncBatchNorm combines
/// them over the group first). `mean_rest` (c, optional) receives what the
/// mean lost to its rounding to x's dtype: mean + mean_rest is the mean to
/// about the precision of a double.
void batch_norm_stats(const BatchNormGeom& g, const KTensor& x, const KTensor& mean,
                      const KTensor& var, const KTensor* mean_rest = nullptr);

/// Eval forward with given (running) mean and var, all in x's dtype.
void batch_norm_forward_eval(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                             const KTensor* bias, const KTensor& mean, const KTensor& var,
                             const KTensor& y);

/// Backward. `training` says whether mean/var were batch statistics (their
/// dependence on x enters dx) or constants. Any output pointer may be null.
/// With `group` (training, dx only) the statistics were the group's and dx
/// takes the group's gradient sums; local sums come from a call with
/// training = false and dweight, dbias (Σdy·xhat, Σdy) requested.
void batch_norm_backward(const BatchNormGeom& g, bool training, const KTensor& x, const KTensor& dy,
                         const KTensor* weight, const KTensor& mean, const KTensor& var,
                         const KTensor* dx, const KTensor* dweight, const KTensor* dbias,
                         const GroupGradSums* group = nullptr);

/// oneDNN versions of the three functions above (contiguous f32 only).
void batch_norm_forward_train_onednn(const BatchNormGeom& g, const KTensor& x,
                                     const KTensor* weight, const KTensor* bias, const KTensor& y,
                                     const KTensor& mean, const KTensor& var);
void batch_norm_forward_eval_onednn(const BatchNormGeom& g, const KTensor& x, const KTensor* weight,
                                    const KTensor* bias, const KTensor& mean, const KTensor& var,
                                    const KTensor& y);
void batch_norm_backward_onednn(const BatchNormGeom& g, bool training, const KTensor& x,
                                const KTensor& dy, const KTensor* weight, const KTensor& mean,
                                const KTensor& var, const KTensor* dx, const KTensor* dweight,
                                const KTensor* dbias);

}  // namespace tcv::kernels::cpu
