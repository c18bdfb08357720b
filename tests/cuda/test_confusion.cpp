// confusion_matrix on CUDA beyond the op table's cases (tests/ops/cases_reduce.cpp,
// which compare the counts from labels and logits in every floating dtype, with
// shared-memory bins and global atomics, ties and accumulation in place): the
// error for a bad target on the device path.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

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
