// Fused multi-tensor optimizer steps on the GPU, the update rules of
// kernels/cpu/optim.h: one launch updates a whole list of parameters, packed
// into chunks of kChunk elements (PyTorch's multi_tensor_apply), the list's
// pointers and sizes travelling in the kernel's arguments (no host-device copy).
//
// f32 and f64 parameters; the arithmetic rounds once per operation of the CPU
// loop's source (no fused multiply-add). The host compiler contracts the CPU
// loop into FMAs where it likes (-march=native, GCC's default
// -ffp-contract=fast), so the two agree within an ulp or so per operation,
// not always to the last bit.
#pragma once

#include <vector>

#include "kernels/base.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/entry.h"

TCV_CUDA_HEADER_BEGIN
namespace tcv::kernels::cuda {

/// One parameter of a multi-tensor step: contiguous device arrays of n elements
/// of the step's dtype. s0 is the momentum buffer (SGD; null without momentum)
/// or exp_avg (Adam); s1 is exp_avg_sq (Adam). `first`: SGD's momentum buffer
/// is fresh and takes d as it is.
struct MultiTensorEntry {
  void* p = nullptr;
  const void* g = nullptr;
  void* s0 = nullptr;
  void* s1 = nullptr;
  int64_t n = 0;
  bool first = false;
};

/// Elements per chunk: one thread block updates one chunk.
constexpr int64_t kOptimChunk = 65536;

/// kernels::cpu::sgd_step over every entry (dt: f32 or f64).
TCV_CUDA_API void sgd_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, double lr,
                                 double momentum, double dampening, double weight_decay,
                                 bool nesterov) TCV_CUDA_ENTRY;

/// kernels::cpu::adam_step over every entry at step `step` (1-based; dt: f32 or f64).
TCV_CUDA_API void adam_step_multi(DType dt, const std::vector<MultiTensorEntry>& ts, double lr,
                                  double beta1, double beta2, double eps, double weight_decay,
                                  cpu::AdamDecay decay, int64_t step) TCV_CUDA_ENTRY;

/// Σ x² over every element of every tensor (contiguous, floating, on the
/// current device), accumulated in f64. One host sync to return it.
TCV_CUDA_API double sum_squares_multi(const std::vector<KTensor>& ts) TCV_CUDA_ENTRY;

}  // namespace tcv::kernels::cuda
TCV_CUDA_HEADER_END
