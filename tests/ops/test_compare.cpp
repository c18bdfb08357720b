// The comparison behind the op table and the CPU-vs-CUDA tests
// (support/cuda_compare.h), exercised without a GPU: the CPU stands in for the
// second device, and functions that misbehave on purpose must make it fail.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "support/op_cases.h"

namespace tcv::testing {
namespace {

const ParityOptions kCpuTwice{.other = kCPU};

/// The failures f reports, intercepted (the test itself does not fail).
std::string failures_of(const std::function<void()>& f) {
  ::testing::TestPartResultArray results;
  {
    const ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  std::string all;
  for (int i = 0; i < results.size(); ++i)
    all += results.GetTestPartResult(i).message() + std::string("\n");
  return all;
}

#define EXPECT_FAILS_WITH(statement, text)                            \
  do {                                                                \
    const std::string failures = failures_of([&] { statement; });     \
    EXPECT_NE(failures.find(text), std::string::npos)                 \
        << "expected a failure containing \"" << text << "\", got:\n" \
        << failures;                                                  \
  } while (0)

std::vector<Tensor> two_inputs(DType dt) {
  return {random_input({3, 4}, 1, dt, true, -1, 1), random_input({3, 4}, 2, dt, true, -1, 1)};
}

TEST(Compare, TwoDevicePathRunsOnTheCpu) {
  const ParityResult r = expect_parity(
      "mul", [](const In& v) { return ops::mul(v[0], v[1]); }, two_inputs(DType::f32),
      {.ulps = 1, .terms = 1}, kCpuTwice);
  EXPECT_TRUE(r.exact_checked);
  EXPECT_TRUE(r.other_checked);
  EXPECT_EQ(r.worst_other, 0.0);  // the same CPU, the same result
  EXPECT_GT(r.worst, 0.0);        // f32 is off the exact result, within the bound
  EXPECT_LE(r.worst, 1.0);
}

TEST(Compare, EveryTableCaseRunsTheTwoDevicePath) {
  // One case of each of a few ops, through the whole comparison with the CPU
  // as the second device: views, 16-bit through f32, custom bounds, several outputs.
  for (const std::string op : {"conv2d", "batch_norm", "cross_entropy", "max", "softmax", "pad"}) {
    const OpCase* c = op_registry().cases_of(op).front();
    SCOPED_TRACE(c->id());
    const ParityResult r = parity_case(*c, c->dtypes.front(), kCPU);
    EXPECT_TRUE(r.other_checked);
    EXPECT_EQ(r.worst_other, 0.0);
  }
}

TEST(Compare, FailsWhenAnInputGetsNoGradientOnAnyDevice) {
  // v[1] requires grad, but the function cuts it from the graph: no device
  // gives it a gradient. (This once passed, since both lacked one alike.)
  EXPECT_FAILS_WITH(expect_parity(
                        "cut", [](const In& v) { return ops::mul(v[0], v[1].detach()); },
                        two_inputs(DType::f32), {.ulps = 1, .terms = 1}, kCpuTwice),
                    "input 1 requires grad but gets no gradient on the cpu");
}

TEST(Compare, FailsWhenOneDeviceGivesNoGradient) {
  int calls = 0;
  // The CPU runs, then the exact run (f64), then the second device, which
  // drops the gradient.
  auto fn = [&calls](const In& v) {
    ++calls;
    return ops::mul(v[0], calls >= 3 ? v[1].detach() : v[1]);
  };
  EXPECT_FAILS_WITH(expect_parity("drops", fn, two_inputs(DType::f32), {.ulps = 1}, kCpuTwice),
                    "input 1 requires grad but gets no gradient on the second device");
}

TEST(Compare, FailsWhenNoOutputIsDifferentiable) {
  EXPECT_FAILS_WITH(expect_parity(
                        "compare", [](const In& v) { return ops::gt(v[0], v[1]); },
                        two_inputs(DType::f32), {}, kCpuTwice),
                    "(no output is differentiable)");
}

TEST(Compare, FailsWhenTheSecondDeviceDiffers) {
  int calls = 0;
  auto fn = [&calls](const In& v) {
    ++calls;
    return calls >= 3 ? ops::mul(ops::mul(v[0], v[1]), 1.001) : ops::mul(v[0], v[1]);
  };
  EXPECT_FAILS_WITH(expect_parity("off", fn, two_inputs(DType::f32), {.ulps = 1}, kCpuTwice),
                    "output 0 on the second device (against the cpu)");
}

TEST(Compare, FailsWhenTheCpuIsOffTheExactResult) {
  // Right in f64, a relative 1e-4 off in f32: far past one rounding.
  auto fn = [](const In& v) {
    const Tensor y = ops::mul(v[0], v[1]);
    return v[0].dtype() == DType::f64 ? y : ops::mul(y, 1.0001);
  };
  EXPECT_FAILS_WITH(expect_parity("biased", fn, two_inputs(DType::f32), {.ulps = 1, .terms = 1}),
                    "exceeds the bound");
}

TEST(Compare, ExactToleranceMeansBitEqual) {
  auto fn = [](const In& v) { return v[0].dtype() == DType::f64 ? v[0] : ops::add(v[0], 1e-7); };
  EXPECT_FAILS_WITH(
      expect_parity("copy", fn, {random_input({5}, 3, DType::f32, false, 1, 2)}, Tol{}),
      "exceeds the bound 0");
}

TEST(Compare, CudaComparisonSkipsWithoutAGpu) {
  if (cuda_is_available()) GTEST_SKIP() << "a GPU is present: the comparison runs";
  const int before = cuda_compare_count();
  expect_cuda_matches_cpu("mul", [](const In& v) { return ops::mul(v[0], v[1]); },
                          two_inputs(DType::f32), {.ulps = 1, .terms = 1});
  EXPECT_EQ(cuda_compare_count(), before);
}

}  // namespace
}  // namespace tcv::testing
