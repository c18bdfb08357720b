// softmax and log_softmax on CUDA beyond the op table's cases
// (tests/ops/cases_softmax.cpp): lines of 100000 values, split over blocks;
// rows with -inf entries and rows of only -inf (NaN as on the CPU); half
// inputs rejected as on the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "support/cuda_compare.h"
#include "support/op_bounds.h"

namespace tcv {
namespace {

using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

TEST(CudaSoftmax, LongLines) {
  TCV_REQUIRE_CUDA();
  struct Line {
    Shape x;
    int64_t dim;
  };
  for (DType dt : {DType::f32, DType::f64})
    for (const Line& l : {Line{{2, 100000}, 1}, Line{{100000, 2}, 0}})
      for (bool log : {false, true})
        expect_cuda_matches_cpu(
            std::string(log ? "log_softmax " : "softmax ") + dtype_name(dt) + " " + shape_str(l.x),
            [&l, log](const TVec& v) {
              return log ? ops::log_softmax(v[0], l.dim) : ops::softmax(v[0], l.dim);
            },
            {testing::random_input(l.x, log ? 2 : 1, dt, true, -3.0, 3.0)},
            {.bound = testing::softmax_bound(l.dim, log)});
}

TEST(CudaSoftmax, InfinityRows) {
  TCV_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  // Row 0 has some -inf, row 1 only -inf (NaN on both devices), row 2 is plain.
  Tensor x = from_vector<double>(
                 {-inf, 1.0, 2.0, -inf, -inf, -inf, -inf, -inf, 0.5, -1.0, 3.0, 2.0}, {3, 4})
                 .to(DType::f32);
  for (bool log : {false, true})
    expect_cuda_matches_cpu(
        log ? "log_softmax -inf" : "softmax -inf",
        [log](const TVec& v) { return log ? ops::log_softmax(v[0], 1) : ops::softmax(v[0], 1); },
        {x}, {.bound = testing::softmax_bound(1, log)}, {.grads = false});
}

TEST(CudaSoftmax, RejectsHalfLikeTheCpu) {
  TCV_REQUIRE_CUDA();
  const Tensor x = zeros({2, 3}, {.dtype = DType::bf16, .device = Device(DeviceType::CUDA, 0)});
  EXPECT_THROW(ops::softmax(x, 1), Error);
}

}  // namespace
}  // namespace tcv
