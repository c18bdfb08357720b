// Shared test helpers: the finite-difference gradient check every
// differentiable op goes through, and tensor comparison with abs + rel·|ref|.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "support/error_of.h"

namespace tcv::testing {

struct GradCheckOptions {
  double eps = 1e-6;   ///< central-difference step
  double atol = 1e-6;  ///< absolute tolerance
  double rtol = 1e-4;  ///< relative tolerance (of the numerical value)
  /// Skips elements closer than this to a kink (e.g. relu at 0): both sides of
  /// the difference must agree with the derivative there. 0 = check all.
  double kink = 0.0;
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Checks d sum(fn(inputs) * w)/d input against central differences, in f64,
/// for every input that requires grad. Returns the number of elements checked.
int64_t check_gradients(const std::string& name, const TensorFn& fn, std::vector<Tensor> inputs,
                        const GradCheckOptions& opts = {});

/// EXPECTs |actual - expected| <= atol + rtol·|expected| elementwise (any dtypes).
void expect_close(const Tensor& actual, const Tensor& expected, double atol = 1e-6,
                  double rtol = 1e-5, const std::string& what = "");

/// A random f64 tensor that requires grad (seeded).
Tensor rand_f64(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0,
                bool requires_grad = true);

/// Every dtype, for tests of data-movement ops.
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8,  DType::b8};

/// A tensor from literal values (given as doubles) in the given shape and dtype.
Tensor lit(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f64);

/// 0, 1, 2, ... (from `start`) in the given shape and dtype; bool gets a mix of
/// false and true.
Tensor iota(const Shape& shape, DType dtype, double start = 0.0);

/// The repository root (env TCV_SOURCE_DIR overrides the one compiled in), for
/// test data under tests/data and the shipped configs.
std::string source_dir();

/// Number of ops gradient-checked in this process (for the summary line).
int& gradcheck_count();

}  // namespace tcv::testing
