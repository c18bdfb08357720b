// Indexing ops on CUDA beyond the op table's cases (tests/ops/cases_index.cpp,
// cases_shape.cpp): large inputs, and out-of-range indices, which throw
// naming the op and the index and leave the device usable.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using namespace testing;
using TVec = std::vector<Tensor>;

Tensor indices(const Shape& shape, int64_t hi, uint64_t seed) {
  Generator g(seed);
  return randint(0, hi, shape, {.dtype = DType::i64}, &g);
}

TEST(CudaIndex, LargeInputs) {
  TCV_REQUIRE_CUDA();
  // Data movement: exact, the gradients slices of dy.
  expect_cuda_matches_cpu(
      "cat large",
      [](const TVec& v) {
        return ops::cat({v[0], v[1]}, 1);
      },
      {random_input({64, 1000, 7}, 10, DType::f32), random_input({64, 1001, 7}, 11, DType::f32)},
      Tol{});
  // The classic use: pick the target's log-probability of each row (one index
  // per row: no index repeats).
  expect_cuda_matches_cpu(
      "gather large", [](const TVec& v) { return ops::gather(v[0], 1, v[1]); },
      {random_input({4096, 1000}, 30, DType::f32), indices({4096, 1}, 1000, 31)}, Tol{});
}

TEST(CudaIndex, OutOfRangeIndexThrows) {
  TCV_REQUIRE_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const Tensor x = zeros({4, 5}, {.device = gpu});
  const Tensor bad = from_vector<int64_t>({0, 2, 5, 1}, {4}).to(gpu);
  try {
    ops::index_select(x, 1, bad);
    ADD_FAILURE() << "index_select accepted index 5 for size 5";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("[index_select] index 5 is out of range for dim 1 of size 5"),
        std::string::npos)
        << e.what();
  }
  const Tensor neg = from_vector<int32_t>({0, -1, 3, 1}, {4, 1}).to(gpu);
  try {
    ops::gather(x, 0, neg);
    ADD_FAILURE() << "gather accepted index -1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[gather] index -1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::scatter_add(x, 0, from_vector<int64_t>({4}, {1, 1}).to(gpu),
                                zeros({1, 1}, {.device = gpu})),
               Error);
  // The device is still usable afterwards.
  EXPECT_NO_THROW(ops::index_select(x, 1, from_vector<int64_t>({4}, {1}).to(gpu)).to(kCPU));
}

}  // namespace
}  // namespace tcv
