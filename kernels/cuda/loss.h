// Loss kernels on the GPU, the same entry points and semantics as
// kernels/cpu/loss.h: fused log-softmax + NLL (label smoothing, class weights,
// ignore_index), NLL over log-probabilities and the pointwise losses, each
// with its backward. Class losses see their input as contiguous (N, C, S) and
// targets as (N, S) i64.
#pragma once

#include "kernels/cpu/loss.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// Counts the non-ignored targets and sums their class weights on the device,
/// then copies those numbers to the host (one sync); or finds the first target
/// (in order) that is neither ignore_index nor in [0, classes).
TCV_CUDA_API void class_targets(const KTensor& target, int64_t classes, int64_t ignore_index,
                                const KTensor* weight, ClassLossStats* stats) TCV_CUDA_ENTRY;

/// nll[n, s] = w[t]·(lse − x[n, t, s]), smooth[n, s] = Σ_c w[c]·(lse − x[n, c, s]),
/// lse = log Σ_c exp x[n, c, s]; 0 at ignored positions. smooth may be null.
TCV_CUDA_API void cross_entropy_forward(const KTensor& nll, const KTensor* smooth,
                                        const KTensor& lse, const KTensor& logits,
                                        const KTensor& target, const KTensor* weight,
                                        int64_t ignore_index) TCV_CUDA_ENTRY;

/// dlogits = a·w[t]·(p_c − [c = t]) + b·(p_c·Σw − w[c]), as on the CPU.
TCV_CUDA_API void cross_entropy_backward(const KTensor& dlogits, const KTensor& logits,
                                         const KTensor& target, const KTensor* weight,
                                         const KTensor& lse, int64_t ignore_index,
                                         const KTensor& grad, double scale_nll, double scale_smooth)
    TCV_CUDA_ENTRY;

/// out[n, s] = −w[t]·log_probs[n, t, s], 0 where t == ignore_index.
TCV_CUDA_API void nll_forward(const KTensor& out, const KTensor& log_probs, const KTensor& target,
                              const KTensor* weight, int64_t ignore_index) TCV_CUDA_ENTRY;

/// dlog_probs is zero except dlog_probs[n, t, s] = −w[t]·grad[n, s]·scale.
TCV_CUDA_API void nll_backward(const KTensor& dlog_probs, const KTensor& target,
                               const KTensor* weight, int64_t ignore_index, const KTensor& grad,
                               double scale) TCV_CUDA_ENTRY;

/// out = loss(input, target) elementwise (mse, smooth_l1, bce_with_logits).
TCV_CUDA_API void pointwise_loss(PointwiseLoss loss, const KTensor& out, const KTensor& input,
                                 const KTensor& target, const KTensor* pos_weight, double beta)
    TCV_CUDA_ENTRY;

/// d = grad · ∂loss/∂arg elementwise.
TCV_CUDA_API void pointwise_loss_backward(PointwiseLoss loss, LossArg arg, const KTensor& d,
                                          const KTensor& grad, const KTensor& input,
                                          const KTensor& target, const KTensor* pos_weight,
                                          double beta) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
