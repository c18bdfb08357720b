// The vectorizable float exp/log/tanh/sigmoid/log1p/softplus (kernels/cpu/vmath.h):
// error in ulps against double <cmath> over a sample of all 2^32 float bit
// patterns, and the special values. The same functions through the ops (where
// the loops vectorize) must give the same values as the header.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/ops.h"
#include "kernels/cpu/vmath.h"

namespace tcv {
namespace {

namespace vm = kernels::cpu::vm;

// Distance between a float result and the exact (double) value, in units of
// the float spacing at that value; results that overflow float must be inf.
double ulps(float got, double exact) {
  if (std::isnan(exact)) return std::isnan(got) ? 0 : 1e9;
  const float rounded = static_cast<float>(exact);
  if (std::isinf(rounded)) return got == rounded ? 0 : 1e9;
  int e = 0;
  std::frexp(std::fabs(exact), &e);
  const double spacing = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(got) - exact) / spacing;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Every 509th bit pattern (8.4M floats of every sign and exponent, NaNs too).
template <typename F, typename R>
void expect_max_ulps(const char* name, F f, R exact, double bound) {
  double worst = 0;
  float at = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 509) {
    const float x = from_bits(static_cast<uint32_t>(u));
    const double err = ulps(f(x), exact(static_cast<double>(x)));
    if (err > worst) {
      worst = err;
      at = x;
    }
  }
  EXPECT_LE(worst, bound) << name << " worst at x = " << at;
}

TEST(VectorMath, UlpErrorOverSampledFloats) {
  // Bounds are the maxima found by evaluating all 2^32 floats, rounded up.
  expect_max_ulps(
      "exp", [](float x) { return vm::exp(x); }, [](double x) { return std::exp(x); }, 1.05);
  expect_max_ulps(
      "log", [](float x) { return vm::log(x); }, [](double x) { return std::log(x); }, 0.9);
  expect_max_ulps(
      "tanh", [](float x) { return vm::tanh(x); }, [](double x) { return std::tanh(x); }, 1.4);
  expect_max_ulps(
      "sigmoid", [](float x) { return vm::sigmoid(x); },
      [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 2.45);
  expect_max_ulps(
      "log1p", [](float x) { return vm::log1p(x); }, [](double x) { return std::log1p(x); }, 1.45);
  expect_max_ulps(
      "softplus", [](float x) { return vm::softplus(x); },
      [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }, 2.15);
}

TEST(VectorMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float denorm = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(vm::exp(0.0f), 1.0f);
  EXPECT_EQ(vm::exp(-inf), 0.0f);
  EXPECT_EQ(vm::exp(inf), inf);
  EXPECT_TRUE(std::isnan(vm::exp(nan)));
  EXPECT_EQ(vm::exp(88.7f), std::exp(88.7f));      // just below overflow
  EXPECT_EQ(vm::exp(88.73f), inf);                 // just above
  EXPECT_EQ(vm::exp(-103.2f), std::exp(-103.2f));  // a subnormal result
  EXPECT_EQ(vm::exp(-104.0f), 0.0f);

  EXPECT_EQ(vm::log(1.0f), 0.0f);
  EXPECT_EQ(vm::log(0.0f), -inf);
  EXPECT_EQ(vm::log(-0.0f), -inf);
  EXPECT_EQ(vm::log(inf), inf);
  EXPECT_TRUE(std::isnan(vm::log(-1.0f)));
  EXPECT_TRUE(std::isnan(vm::log(-inf)));
  EXPECT_TRUE(std::isnan(vm::log(nan)));
  EXPECT_NEAR(vm::log(denorm), std::log(static_cast<double>(denorm)), 1e-5);
  EXPECT_EQ(vm::log(std::numeric_limits<float>::max()),
            std::log(std::numeric_limits<float>::max()));

  EXPECT_EQ(vm::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(vm::tanh(-0.0f)));
  EXPECT_EQ(vm::tanh(inf), 1.0f);
  EXPECT_EQ(vm::tanh(-inf), -1.0f);
  EXPECT_EQ(vm::tanh(1e-30f), 1e-30f);
  EXPECT_TRUE(std::isnan(vm::tanh(nan)));

  EXPECT_EQ(vm::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(vm::sigmoid(inf), 1.0f);
  EXPECT_EQ(vm::sigmoid(-inf), 0.0f);
  // e^-80 is a normal float: computed as e^x / (1 + e^x), no overflow of e^-x.
  EXPECT_NEAR(vm::sigmoid(-80.0f) / std::exp(-80.0), 1.0, 1e-6);
  EXPECT_GT(vm::sigmoid(-100.0f), 0.0f);  // subnormal, not 0
  EXPECT_TRUE(std::isnan(vm::sigmoid(nan)));

  EXPECT_EQ(vm::log1p(0.0f), 0.0f);
  EXPECT_EQ(vm::log1p(-1.0f), -inf);
  EXPECT_EQ(vm::log1p(inf), inf);
  EXPECT_EQ(vm::log1p(1e-10f), 1e-10f);
  EXPECT_TRUE(std::isnan(vm::log1p(-2.0f)));

  EXPECT_EQ(vm::softplus(-inf), 0.0f);
  EXPECT_EQ(vm::softplus(inf), inf);
  EXPECT_EQ(vm::softplus(100.0f), 100.0f);
  EXPECT_NEAR(vm::softplus(-80.0f) / std::exp(-80.0), 1.0, 1e-6);
}

TEST(VectorMath, OpsStayWithinTheBounds) {
  // Through the op loops (vectorized, split across threads, compiled for the
  // host CPU, where the compiler may fuse multiply-adds) the values keep the
  // same error bounds, lane by lane, special values included.
  std::vector<float> xs;
  for (int i = -4000; i < 4000; ++i) xs.push_back(static_cast<float>(i) * 0.023f);
  for (float s : {0.0f, -0.0f, 1e-39f, 88.72f, -103.5f, 1e30f, -1e30f}) xs.push_back(s);
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  const Tensor x = from_vector<float>(xs, {static_cast<int64_t>(xs.size())});
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*exact)(double);
    double bound;
  };
  const Case cases[] = {
      {"exp", ops::exp, [](double v) { return std::exp(v); }, 1.05},
      {"log", ops::log, [](double v) { return std::log(v); }, 0.9},
      {"sigmoid", ops::sigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 2.45},
      {"tanh", ops::tanh, [](double v) { return std::tanh(v); }, 1.4},
  };
  for (const Case& c : cases) {
    const std::vector<float> got = c.op(x).to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_LE(ulps(got[i], c.exact(static_cast<double>(xs[i]))), c.bound)
          << c.name << "(" << xs[i] << ") = " << got[i];
  }
}

}  // namespace
}  // namespace tcv
