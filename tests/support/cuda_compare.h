// Comparing an op across devices, with one tolerance policy (Tol).
//
// The CPU result in the dtype under test is compared with the exact result
// (the same function on the same rounded inputs, computed in f64), within a
// bound the op's algorithm guarantees; where a GPU is present the CUDA result
// is compared with the CPU's within twice that bound, since both lie within it
// of the exact result. Outputs and the gradients of every input that requires
// grad are compared; an input that requires grad and gets no gradient on
// either device is a failure. The bounds follow support/error_bound.h: a few
// ulps for what a pointwise op rounds, γₙ·Σ|terms| for what it sums, growth
// factors for fast algorithms, and bounds of their own for the ops whose
// rounding errors do not reduce to those (softmax, losses, batch norm).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
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

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// The view of an input the op sees (see ParityOptions::views).
using InputView = std::function<Tensor(const Tensor&)>;

/// What a bound is computed from: the exact run (f64 for floating tensors).
struct BoundArgs {
  MultiFn fn;                      ///< the function compared, on the leaves
  std::vector<Tensor> leaves;      ///< its inputs, floating ones in f64
  std::vector<Tensor> leaf_grads;  ///< exact gradients of the leaves (undefined where none)
  std::vector<Tensor> inputs;      ///< what the op sees: the leaves through their views
  std::vector<Tensor> grads;       ///< exact gradients of what the op sees
  std::vector<Tensor> outputs;     ///< exact outputs
  std::vector<Tensor> dy;          ///< f64 upstream gradient of each output (undefined where none)
  std::vector<DType> out_dtypes;   ///< dtype each output was computed in
  std::vector<DType> in_dtypes;    ///< dtype of each input (and of its gradient)
};

/// One-sided bounds (f64, broadcastable to what they bound) on |result − exact|
/// of each output and each input gradient; an undefined bound means exact.
struct Bounds {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;
};
/// A bound of its own: gradient bounds shaped as the inputs the op sees.
using BoundFn = std::function<Bounds(const BoundArgs&)>;

/// Where Σ|terms| of a summing op comes from.
enum class Sums : uint8_t {
  /// The op is multilinear in its floating inputs (conv, matmul, sums,
  /// averaging, scatter_add, add, mul, div on magnitudes): the op evaluated on
  /// |inputs| with |dy| gives every Σ|terms| (abs_sums).
  of_magnitudes,
  /// The gradient routes dy to the inputs with coefficients ≥ 0 (selection,
  /// max pooling, padding, indexing): the gradient at the inputs with |dy|
  /// gives Σ|terms|; selected outputs are exact.
  routed,
};

/// How the second device's result must agree with the CPU's.
enum class Agreement : uint8_t {
  within_bound,  ///< within twice the bound: each device is within it of the exact result
  /// bit for bit: both kernels make the same correctly rounded operations in
  /// the same order (box_iou, nms), so any difference is a defect
  bit_equal,
};

/// The precision a 16-bit result's terms are formed and summed in.
enum class Accumulate : uint8_t {
  wide,  ///< f32 or wider, rounded once at the end (every GPU kernel, most CPU ones)
  /// every step rounded to the 16-bit dtype: gradients built from 16-bit
  /// tensor ops (elementwise backward, index backward), the CPU's pad and scatter
  in_dtype,
};

/// How far a result may be from the exact one (support/error_bound.h), per
/// element, in the dtype u it was computed in:
///
///   |result − exact| ≤ ulps·(u·(|exact| + scale) + η)
///                      + growth·(γ_terms + term_ulps·u)·Σ|terms|
///
/// ulps counts the roundings a pointwise op makes (relative to its value, and
/// to `scale` where a rounding is relative to something else: an upstream
/// gradient, a term that cancels; η is half the dtype's smallest subnormal, the
/// absolute error of a rounding that underflows); terms is the longest sum
/// behind one result, term_ulps the roundings each term carries before it is
/// summed (a product dy·b formed in the dtype). A 16-bit result computed in
/// f32 (Accumulate::wide) is the f32 result rounded once more: its ulps count
/// f32's on top of that one, and a sum gets that rounding.
/// Gradients use grad_ulps and grad_scale where given. Tol{} is exact: data
/// movement, selection, comparisons. `bound` replaces the formula for ops whose
/// rounding errors need a bound of their own.
struct Tol {
  double ulps = 0;
  double scale = 0;
  double grad_ulps = -1;   ///< < 0: ulps
  double grad_scale = -1;  ///< < 0: scale
  int64_t terms = 0;
  double term_ulps = 0;
  Sums sums = Sums::of_magnitudes;
  Accumulate accumulate = Accumulate::wide;
  double growth = 1;  ///< a fast algorithm's error growth on top of γ_terms
  BoundFn bound{};
  Agreement devices = Agreement::within_bound;
};

/// Bounds of a Tol for a run (the formula above, or tol.bound).
Bounds tol_bounds(const Tol& tol, const BoundArgs& args);

/// Whether 16-bit inputs go to the CPU as they are.
enum class Cpu16 : uint8_t {
  native,   ///< the CPU kernel takes f16/bf16
  via_f32,  ///< the CPU has none: 16-bit inputs go through f32, the result is rounded back
};

struct ParityOptions {
  bool grads = true;   ///< compare the gradients of inputs that require grad
  uint64_t seed = 11;  ///< for the upstream gradients (uniform in [-1, 1])
  Cpu16 cpu16 = Cpu16::native;
  /// The second device: cuda:0 where one exists (else that comparison is
  /// skipped). kCPU runs the two-device comparison CPU against CPU, which
  /// exercises it on a machine without a GPU.
  std::optional<Device> other{};
  /// Compare the CPU with the exact result (false for a function that takes
  /// f32 only: the bounds are then sized from the CPU's values).
  bool against_exact = true;
  bool against_other = true;  ///< compare the second device with the CPU
  /// Per input, the view of the leaf the op sees (empty: the leaf itself), for
  /// bounds of their own (Tol::bound), which reason about what the op sees.
  std::vector<InputView> views{};
};

struct ParityResult {
  bool exact_checked = false;  ///< the CPU was compared with the exact result
  bool other_checked = false;  ///< the second device was compared with the CPU
  double worst = 0;            ///< largest |CPU − exact| / bound
  double worst_other = 0;      ///< largest |other − CPU| / (2·bound)
};

/// Runs fn on `inputs` (CPU tensors in the dtype under test; those requiring
/// grad are leaves), backpropagates the same random upstream gradients through
/// every floating output that requires grad, and EXPECTs: the CPU within the
/// bound of the exact result, and the second device within twice the bound of
/// the CPU; every input that requires grad gets a gradient on every device.
ParityResult expect_parity(const std::string& name, const MultiFn& fn,
                           const std::vector<Tensor>& inputs, const Tol& tol,
                           const ParityOptions& opts = {});
/// The same for an op with one output.
ParityResult expect_parity(const std::string& name,
                           const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                           const std::vector<Tensor>& inputs, const Tol& tol,
                           const ParityOptions& opts = {});

/// expect_parity where a GPU is present (the CPU-vs-CUDA tests, which skip
/// themselves without one).
void expect_cuda_matches_cpu(const std::string& name, const MultiFn& fn,
                             const std::vector<Tensor>& inputs, const Tol& tol,
                             ParityOptions opts = {});
void expect_cuda_matches_cpu(const std::string& name,
                             const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs, const Tol& tol,
                             ParityOptions opts = {});

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
