// confusion_matrix on CUDA against the CPU: identical counts for labels and for
// logits in f32, f64, f16 and bf16 (the CPU reads the same rounded values),
// 21 classes (shared-memory bins) and 150 (global atomics), accumulation in
// place, ties, and the error for a bad target on the device path.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

Tensor labels(const Shape& shape, int64_t c, uint64_t seed, double ignored) {
  Generator g(seed);
  Tensor t = randint(0, c, shape, {.dtype = DType::i64}, &g);
  return ops::masked_fill(t, ops::lt(rand(shape, {.dtype = DType::f64}, &g), ignored), 255);
}

TEST(CudaConfusion, MatchesCpu) {
  TCV_REQUIRE_CUDA();
  for (int64_t c : {int64_t(2), int64_t(21), int64_t(150)})
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      const std::string what = std::string(dtype_name(dt)) + " C=" + std::to_string(c);
      Generator g(c);
      // Rounded to dt first, so both devices see the same values (bf16 makes ties).
      const Tensor x = randn({2, c, 45, 61}, {}, &g).to(dt);
      const Tensor t = labels({2, 45, 61}, c, 7, 0.1);
      const Tensor cpu = ops::confusion_matrix(x, t, c);
      const Tensor gpu = ops::confusion_matrix(x.to(kGpu), t.to(kGpu), c);
      ASSERT_TRUE(gpu.device().is_cuda());
      EXPECT_EQ(gpu.to(kCPU).to_vector<int64_t>(), cpu.to_vector<int64_t>()) << what;
      // Labels, accumulated twice into one tensor.
      const Tensor p = labels({2, 45, 61}, c, 8, 0.0);
      Tensor acc = zeros({c, c}, {.dtype = DType::i64, .device = kGpu});
      ops::confusion_matrix_add_(acc, p.to(kGpu), t.to(kGpu));
      ops::confusion_matrix_add_(acc, p.to(kGpu), t.to(kGpu));
      EXPECT_EQ(acc.to(kCPU).to_vector<int64_t>(),
                ops::mul(ops::confusion_matrix(p, t, c), 2.0).to(DType::i64).to_vector<int64_t>())
          << what;
    }
}

TEST(CudaConfusion, BadTargetThrowsNamingIt) {
  TCV_REQUIRE_CUDA();
  const Tensor t = from_vector<int64_t>({0, 1, 7, 2, 9, 1}, {2, 3}).to(kGpu);
  const std::string err = testing::error_of([&] {
    ops::confusion_matrix(zeros({2, 3, 3}, {.device = kGpu}), t, 3);
  });
  EXPECT_NE(err.find("target 7 at (0, 2) is neither a class in [0, 3) nor ignore_index 255 (2 "
                     "such positions)"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace tcv
