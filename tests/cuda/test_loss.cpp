// Losses on CUDA beyond the op table's cases (tests/ops/cases_loss.cpp): an
// out-of-range target throws a clear error on the device path.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

TEST(CudaLoss, CrossEntropyOutOfRangeTargetThrows) {
  TCV_REQUIRE_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const Tensor x = zeros({3, 4}, {.device = gpu});
  for (int64_t bad : {int64_t(4), int64_t(-1), int64_t(100)}) {
    const Tensor t = from_vector<int64_t>({0, bad, 2}, {3}).to(gpu);
    try {
      ops::cross_entropy(x, t);
      ADD_FAILURE() << "no error for target " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[cross_entropy] target " + std::to_string(bad) + " is out of bounds"),
                std::string::npos)
          << msg;
    }
    EXPECT_THROW(ops::nll_loss(x, t), Error);
  }
  // ignore_index is not out of range.
  const Tensor t = from_vector<int64_t>({0, -100, 2}, {3}).to(gpu);
  EXPECT_NO_THROW(ops::cross_entropy(x, t));
}

}  // namespace
}  // namespace tcv
