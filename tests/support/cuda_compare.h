// CPU-vs-CUDA checks: every op runs the same random inputs on both devices and
// must agree, outputs and gradients. They skip themselves, with a message,
// where no GPU is present.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/ops.h"
#include "kernels/cuda/settings.h"

#define TCV_REQUIRE_CUDA()                                                        \
  do {                                                                            \
    if (!::tcv::cuda_is_available())                                              \
      GTEST_SKIP() << "no CUDA device here: this CPU-vs-CUDA test runs on a GPU"; \
  } while (0)

namespace tcv::testing {

struct CudaCompareOptions {
  double atol = 1e-5;
  double rtol = 1e-4;  ///< f32: 1e-4 of the CPU value; use 1e-2 for bf16
  bool grads = true;   ///< compare the gradients of inputs that require grad
  uint64_t seed = 11;  ///< for the upstream gradients
};

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs fn on `inputs` (CPU tensors; those requiring grad are leaves) and on
/// copies on cuda:0, then EXPECTs every output close to the CPU's; with
/// grads, backpropagates the same random upstream gradients through the
/// floating outputs on both devices and compares the inputs' gradients.
void expect_cuda_matches_cpu(const std::string& name, const MultiFn& fn,
                             const std::vector<Tensor>& inputs, CudaCompareOptions opts = {});
/// The same for an op with one output.
void expect_cuda_matches_cpu(const std::string& name,
                             const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs, CudaCompareOptions opts = {});

/// A seeded random input for CPU-vs-CUDA tests, the same on every machine:
/// floating dtypes uniform in [lo, hi) (drawn in f64, then converted; a leaf
/// requiring grad when asked), integers uniform in [0, 100), bool in {0, 1}.
Tensor random_input(const Shape& shape, uint64_t seed, DType dtype = DType::f32,
                    bool requires_grad = true, double lo = -2.0, double hi = 2.0);

/// For a scope, the elementwise loops and batch norm take their 64-bit index
/// paths at every size (kernels/cuda/settings.h).
struct WideIndicesScope {
  WideIndicesScope() { kernels::cuda::set_force_wide_indices(true); }
  ~WideIndicesScope() { kernels::cuda::set_force_wide_indices(false); }
  WideIndicesScope(const WideIndicesScope&) = delete;
  WideIndicesScope& operator=(const WideIndicesScope&) = delete;
};

/// Number of CPU-vs-CUDA comparisons run in this process.
int& cuda_compare_count();

}  // namespace tcv::testing
