// The kernel profiler on a GPU: CUDA kernel calls are timed with events on the
// compute stream (device time) and reported under "cuda:N".
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/profiler.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

TEST(CudaProfiler, TimesKernelsWithEvents) {
  TCV_REQUIRE_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  Tensor x = randn({8, 16, 32, 32}).to(gpu), w = randn({32, 16, 3, 3}).to(gpu);
  ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});  // algorithm search outside the profile
  profiler::take();
  profiler::set_enabled(true);
  for (int i = 0; i < 4; ++i) ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  ops::relu(x);
  profiler::set_enabled(false);
  const auto rows = profiler::take();
  bool conv = false, relu = false;
  for (const auto& r : rows) {
    EXPECT_EQ(r.device, "cuda:0") << r.name;
    EXPECT_GT(r.total_ms, 0.0) << r.name;
    if (r.name == "conv2d_forward") {
      conv = true;
      EXPECT_EQ(r.calls, 4);
      // 8·32·16·9·32·32·2 FLOP per call: far above 1 µs on any GPU, far below 1 s.
      EXPECT_LT(r.total_ms, 1000.0);
    }
    if (r.name == "unary") relu = r.calls == 1;
  }
  EXPECT_TRUE(conv);
  EXPECT_TRUE(relu);
}

}  // namespace
}  // namespace tcv
