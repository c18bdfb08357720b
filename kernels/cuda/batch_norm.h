// Batch normalization on the GPU, the same entry points and semantics as
// kernels/cpu/batch_norm.h: x viewed as contiguous (n, c, l), statistics per
// channel. Per-channel sums are split over many blocks and combined in double.
// Data (x, y, dy, dx) in f16/bf16 takes f32 weight, bias, mean, var, dweight and
// dbias and computes in f32 (mixed precision without cast passes); f32 and f64
// data take parameters of their own dtype.
#pragma once

#include "kernels/cpu/batch_norm.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// Training forward with batch statistics: writes y, mean and the biased var (c),
/// and updates `running` in the same per-channel kernel.
/// weight/bias (c) may be null (1 and 0).
TCV_CUDA_API void batch_norm_forward_train(const BatchNormGeom& g, const KTensor& x,
                                           const KTensor* weight, const KTensor* bias,
                                           const KTensor& y, const KTensor& mean,
                                           const KTensor& var, const RunningStats& running = {})
    TCV_CUDA_ENTRY;

/// The batch statistics alone (mean and biased var), no output written.
TCV_CUDA_API void batch_norm_stats(const BatchNormGeom& g, const KTensor& x, const KTensor& mean,
                                   const KTensor& var, const KTensor* mean_rest = nullptr)
    TCV_CUDA_ENTRY;

/// Eval forward with the given (running) mean and var.
TCV_CUDA_API void batch_norm_forward_eval(const BatchNormGeom& g, const KTensor& x,
                                          const KTensor* weight, const KTensor* bias,
                                          const KTensor& mean, const KTensor& var, const KTensor& y)
    TCV_CUDA_ENTRY;

/// Backward; `training` says whether mean/var were batch statistics. Any output may be null.
/// `group`: dx from the group's gradient sums (SyncBatchNorm), as on the CPU.
TCV_CUDA_API void batch_norm_backward(const BatchNormGeom& g, bool training, const KTensor& x,
                                      const KTensor& dy, const KTensor* weight, const KTensor& mean,
                                      const KTensor& var, const KTensor* dx, const KTensor* dweight,
                                      const KTensor* dbias, const GroupGradSums* group = nullptr)
    TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
