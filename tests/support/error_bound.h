// Tolerances from rounding-error bounds, not from one CPU's results.
//
// oneDNN and OpenBLAS pick their kernels by CPU (AVX2, AVX-512, AMX; direct,
// GEMM-based or Winograd convolution), so the order in which an f32 result is
// summed differs from machine to machine. A test that compares such a result
// with an f64 reference uses the worst-case bound of the algorithm, which holds
// for every summation order, blocking and use of FMA:
//
//   |fl(Σᵢ aᵢbᵢ) − Σᵢ aᵢbᵢ| ≤ γₙ · Σᵢ |aᵢ||bᵢ|,   γₙ = n·u / (1 − n·u)
//
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1),
// with u the unit roundoff of the dtype and n the number of terms.
#pragma once

#include <string>
#include <vector>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace tcv::testing {

/// Unit roundoff u: 2^-24 (f32), 2^-53 (f64), 2^-11 (f16), 2^-8 (bf16).
double unit_roundoff(DType dtype);

/// γₙ = n·u / (1 − n·u) for the dtype (n·u must stay below 1/2).
double gamma_n(int64_t n, DType dtype);

/// Winograd F(4×4, 3×3) computes each output tile as Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A.
/// A rounding error in one transformed product reaches an output magnified by
/// up to maxᵢⱼₗ Σₖ |Aₖᵢ||Gₖⱼ||Bₗₖ| = 32/3 per dimension for the interpolation
/// points 0, ±1, ±2 (Lavin and Gray 2016), so by (32/3)² in two dimensions: the
/// bound on its error is this factor times direct convolution's (the growth
/// Barabasz et al. 2020 derive for Winograd convolution).
inline constexpr double kWinograd4x3Growth = (32.0 / 3.0) * (32.0 / 3.0);

/// EXPECTs |actual − expected| ≤ bound elementwise; bound broadcasts to the
/// shape. A failure names the element, both values, the difference and the
/// bound; the largest ratio |diff| / bound is returned (below 1 when it passes).
double expect_within(const Tensor& actual, const Tensor& expected, const Tensor& bound,
                     const std::string& what);

/// The magnitudes a bound on a multilinear op needs: fn evaluated in f64 on
/// |inputs| (the sums Σ|a||b| of every output element), and the gradients of
/// Σ fn(|inputs|)·|dy| (the sums Σ|b||dy| behind every input's gradient).
/// Undefined inputs stay undefined. For conv2d, matmul and linear these are
/// exactly the Σ|·||·| of the forward pass and of each backward product.
struct AbsSums {
  Tensor y;                   ///< Σ|a||b| per output element
  std::vector<Tensor> grads;  ///< Σ|b||dy| per element of each input
};
AbsSums abs_sums(const TensorFn& fn, const std::vector<Tensor>& inputs, const Tensor& dy);

/// What an f32 batch norm is compared with: the f64 reference computation.
struct BatchNormRef {
  Tensor x{};             ///< (N, C, ...) f64
  Tensor weight{};        ///< (C) f64, or undefined (ones)
  Tensor bias{};          ///< (C) f64, or undefined (zeros)
  Tensor dy{};            ///< like x, f64, or undefined (no backward)
  bool training = true;   ///< batch statistics; else running_mean/running_var
  Tensor running_mean{};  ///< (C) f64, eval only
  Tensor running_var{};   ///< (C) f64, eval only
  double eps = 1e-5;
};

/// First-order rounding-error bounds of an f32 batch norm (forward and
/// backward) computed in any summation order, from any of the usual forms
/// (one- or two-pass variance, the affine map folded into x·a + b), with f32
/// copies of the inputs. M = N·H·W terms per channel; with u = 2⁻²⁴:
///   mean:  Em = γ(M+2)·mean|x|
///   var:   Ev = γ(M+4)·(mean x² + 2m² + v) + 2(|m| + mean|x−m|)·Em
///   invstd s = (v+ε)^-½: relative rs = Ev / 2(v+ε) + 3u
///   x̂:     Ex̂ = s·Em + |x̂|·(rs + 2u)
///   y:     |γ|·Ex̂ + 3u·(|γx̂| + |β| + |γ|s(|x| + |m|))
///   dx = γs(dy − A − x̂B), A = mean dy, B = mean dy·x̂:
///          EA = γ(M+2)·mean|dy|, EB = γ(M+3)·mean|dy·x̂| + mean(|dy|·Ex̂),
///          |γ|s(u|dy| + EA + Ex̂|B| + |x̂|EB + 3u(|dy| + |A| + |x̂B|)) + |dx|(rs + 3u)
///   dγ = M·B: M·EB;   dβ = Σdy: γ(M+1)·Σ|dy|
/// In eval mode the statistics are inputs: Em = u|m|, Ev = u·v, and dx = γs·dy.
struct BatchNormBounds {
  Tensor mean, var;              ///< (C): the batch statistics (training only)
  Tensor y, dx, dweight, dbias;  ///< f64, shaped like what they bound
};
BatchNormBounds batch_norm_f32_bounds(const BatchNormRef& ref);

}  // namespace tcv::testing
