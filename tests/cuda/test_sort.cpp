// sort and topk on CUDA beyond the op table's cases (tests/ops/cases_sort.cpp):
// one line of 100000 values (the long-line path), in every dtype, with ties,
// k of 0, 1, 5 and n; NaN (above every number), -0.0 and 0.0 (equal).
// Sorting moves values without arithmetic: results match exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using namespace testing;
using TVec = std::vector<Tensor>;

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8,  DType::b8};
  return d;
}

TVec both(const std::pair<Tensor, Tensor>& p) {
  return {p.first, p.second};
}

TEST(CudaSort, LongLine) {
  TCV_REQUIRE_CUDA();
  const Shape x{100000};
  for (DType dt : all_dtypes()) {
    const Tensor in = testing::random_input(x, 1, dt);
    Generator g(2);
    Tensor tie = randint(0, 3, x, {.dtype = DType::i64}, &g).to(dt);
    if (is_floating(dt)) tie.set_requires_grad(true);
    for (bool desc : {false, true}) {
      const std::string tag = std::string(dtype_name(dt)) + (desc ? " desc" : "");
      expect_cuda_matches_cpu(
          "sort " + tag, [desc](const TVec& v) { return both(ops::sort(v[0], 0, desc)); }, {in},
          Tol{});
      expect_cuda_matches_cpu(
          "sort ties " + tag, [desc](const TVec& v) { return both(ops::sort(v[0], 0, desc)); },
          {tie}, Tol{});
    }
    for (const int64_t k : std::set<int64_t>{0, 1, 5, x[0]})
      for (bool largest : {true, false})
        expect_cuda_matches_cpu(
            std::string("topk ") + dtype_name(dt) + " k " + std::to_string(k) +
                (largest ? " largest" : " smallest"),
            [k, largest](const TVec& v) { return both(ops::topk(v[0], k, 0, largest)); }, {in},
            Tol{});
  }
}

TEST(CudaSort, NaNAndSignedZero) {
  TCV_REQUIRE_CUDA();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector<double>(
      {1.0, nan, -0.0, 0.0, -inf, 2.0, nan, inf, -0.0, -3.0, 0.0, nan, 1.0, -1.0}, {2, 7});
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (bool desc : {false, true}) {
      expect_cuda_matches_cpu(
          std::string("sort NaN ") + dtype_name(dt) + (desc ? " desc" : ""),
          [desc](const TVec& v) { return both(ops::sort(v[0], 1, desc)); }, {x.to(dt)}, Tol{});
      for (int64_t k : {1, 3, 7})
        expect_cuda_matches_cpu(
            std::string("topk NaN ") + dtype_name(dt) + " k " + std::to_string(k) +
                (desc ? " largest" : " smallest"),
            [desc, k](const TVec& v) { return both(ops::topk(v[0], k, 1, desc)); }, {x.to(dt)},
            Tol{});
    }
}

}  // namespace
}  // namespace tcv
