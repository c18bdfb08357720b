// Float exp, log, tanh, sigmoid and log1p written so that a plain loop over
// them vectorizes: no branches and no calls, only arithmetic, bit casts and
// selects. glibc's scalar expf/logf/tanhf are calls the compiler cannot
// vectorize, which made these ops 15-60x slower than relu on 16-lane AVX-512.
// Double arguments go to <cmath> unchanged.
//
// Largest error against the exact value, found by evaluating every one of the
// 2^32 floats: exp 1.02 ulp, log 0.87, tanh 1.34, sigmoid 2.41, log1p 1.44,
// softplus 2.12. inf, -inf, NaN, zeros and subnormal results follow <cmath>
// (tests/kernels/test_vmath.cpp checks a sample and the special values).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

// Always inlined: a loop vectorizes only when the call is gone, and in large
// kernel files GCC's inliner otherwise runs out of budget and leaves calls.
#define TCV_VM_INLINE [[gnu::always_inline]] inline

namespace tcv::kernels::cpu::vm {

namespace detail {

// ln 2 split so that n * kLn2Hi is exact for |n| < 2^9 (kLn2Hi has 15 bits).
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.42860676533018708e-6f;
constexpr float kLog2e = 1.44269504088896341f;
// Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to an integer, which
// then sits in the low mantissa bits.
constexpr float kRoundMagic = 12582912.0f;

/// 2^n for integer n in [-252, 254] as two normal factors, so scaling a value
/// in [0.5, 2] by both gives subnormal and overflowing results correctly.
TCV_VM_INLINE float pow2_lo(int32_t n) {
  return std::bit_cast<float>((n - (n >> 1) + 127) << 23);
}
TCV_VM_INLINE float pow2_hi(int32_t n) {
  return std::bit_cast<float>(((n >> 1) + 127) << 23);
}

}  // namespace detail

/// e^x. Minimax polynomial on [-ln2/2, ln2/2] after Cody-Waite reduction.
TCV_VM_INLINE float exp(float x) {
  using namespace detail;
  // NaN takes the low bound here (both compares fail) and is restored at the end.
  float xc = x > -104.0f ? x : -104.0f;
  xc = xc < 89.0f ? xc : 89.0f;
  const float t = xc * kLog2e + kRoundMagic;
  const int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRoundMagic);
  const float nf = t - kRoundMagic;
  const float r = (xc - nf * kLn2Hi) - nf * kLn2Lo;
  const float r2 = r * r;
  const float q =
      0.49999993451f +
      r * (0.16666520688f + r * (0.041668387409f + r * (0.0083687100353f + r * 0.0013814611001f)));
  const float p = 1.0f + (r + r2 * q);
  const float y = (p * pow2_hi(n)) * pow2_lo(n);
  return x != x ? x : y;
}

/// Natural log. x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
/// log(1 + f) = f - f^2/2 + f^3 P(f), P minimax.
TCV_VM_INLINE float log(float x) {
  using namespace detail;
  constexpr float kMinNormal = 1.17549435e-38f;
  const bool sub = x < kMinNormal;
  const uint32_t bits = std::bit_cast<uint32_t>(sub ? x * 8388608.0f : x);  // 2^23 lifts subnormals
  // Exponent and mantissa split at sqrt(1/2) (0x3f3504f3) rather than at 1, so
  // m = x 2^-e lands in [sqrt(1/2), sqrt(2)) without a compare. Unsigned
  // arithmetic: a negative x (sign bit set) wraps where int32_t would overflow
  // (undefined), and its result is replaced by NaN below.
  const int32_t e = static_cast<int32_t>(bits - 0x3f3504f3u) >> 23;
  const float m = std::bit_cast<float>(bits - (static_cast<uint32_t>(e) << 23));
  const float f = m - 1.0f;
  const float z = f * f;
  const float poly =
      0.33333331710f +
      f * (-0.25000821056f +
           f * (0.20001226667f +
                f * (-0.16623356479f +
                     f * (0.14201762467f +
                          f * (-0.13160195053f + f * (0.12761550362f + f * -0.076344299106f))))));
  const float ef = static_cast<float>(e) - (sub ? 23.0f : 0.0f);
  float y = f * z * poly + ef * kLn2Lo;
  y = y - 0.5f * z;
  y = (f + y) + ef * kLn2Hi;
  y = x == INFINITY ? x : y;
  y = x == 0.0f ? -INFINITY : y;
  y = x < 0.0f ? NAN : y;
  return x != x ? x : y;
}

/// tanh: an odd minimax polynomial below |x| = 0.625, 1 - 2 / (e^{2|x|} + 1) above.
TCV_VM_INLINE float tanh(float x) {
  // On |x|, then the sign copied back, so tanh(-0) = -0.
  const float a = std::fabs(x);
  const float z = a * a;
  const float small =
      a + a * z *
              (-0.33333281940f +
               z * (0.13331442158f +
                    z * (-0.053739712157f + z * (0.020639078741f + z * -0.0057049783738f))));
  const float big = 1.0f - 2.0f / (vm::exp(2.0f * a) + 1.0f);
  return std::copysign(a < 0.625f ? small : big, x);
}

/// 1 / (1 + e^-x); below 0 as e^x / (1 + e^x), so that e^-x cannot overflow
/// where the result is still a (subnormal) float.
TCV_VM_INLINE float sigmoid(float x) {
  const float e = vm::exp(-std::fabs(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

/// log(1 + x) for x > -1: log(u) corrected by the rounding of u = 1 + x.
TCV_VM_INLINE float log1p(float x) {
  const float u = 1.0f + x;
  const float l = vm::log(u);
  // At u = 0 and u = inf the correction is 0/0 or inf - inf; log(u) is the answer.
  return u == 0.0f || u == INFINITY ? l : l - ((u - 1.0f) - x) / u;
}

/// log(1 + e^x) without overflow.
TCV_VM_INLINE float softplus(float x) {
  return (x > 0.0f ? x : 0.0f) + vm::log1p(vm::exp(-std::fabs(x)));
}

inline double exp(double x) {
  return std::exp(x);
}
inline double log(double x) {
  return std::log(x);
}
inline double tanh(double x) {
  return std::tanh(x);
}
inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
inline double log1p(double x) {
  return std::log1p(x);
}
inline double softplus(double x) {
  return (x > 0.0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)));
}

}  // namespace tcv::kernels::cpu::vm

namespace tcv::kernels::cpu {

/// The CPU's Math policy for the shared elementwise formulas (kernels/pointwise.h):
/// the vectorizable functions above, std:: for the rest. Always inlined, like
/// them, so the loops that call a formula still vectorize.
struct VecMath {
#define TCV_VEC_MATH(name, fn)       \
  template <typename F>              \
  TCV_VM_INLINE static F name(F x) { \
    return fn(x);                    \
  }
  TCV_VEC_MATH(exp, vm::exp)
  TCV_VEC_MATH(log, vm::log)
  TCV_VEC_MATH(sqrt, std::sqrt)
  TCV_VEC_MATH(tanh, vm::tanh)
  TCV_VEC_MATH(sigmoid, vm::sigmoid)
  TCV_VEC_MATH(softplus, vm::softplus)
  TCV_VEC_MATH(abs, std::abs)
#undef TCV_VEC_MATH
  template <typename F>
  TCV_VM_INLINE static F pow(F x, F y) {
    return std::pow(x, y);
  }
};

}  // namespace tcv::kernels::cpu
