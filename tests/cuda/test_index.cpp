// Indexing ops on CUDA against the CPU: cat (dims 0/1/last, several inputs,
// mixed dtypes promoted, non-contiguous inputs, skipped 1-D empties), with
// gradients; index_select (i64 and i32 indices, repeated indices, every dim,
// strided index); gather and scatter_add (every dim, indices smaller than the
// input, repeated targets accumulated with atomics, f32/f64/f16/bf16 and
// integer/bool data); masked_fill (broadcast masks, every dtype); empty
// inputs; out-of-range indices throw naming the op and the index.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad = true) {
  return testing::random_input(shape, seed, dt, grad);
}

Tensor indices(const Shape& shape, int64_t hi, uint64_t seed, DType dt = DType::i64) {
  Generator g(seed);
  return randint(0, hi, shape, {.dtype = DType::i64}, &g).to(dt);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = o.atol = 1e-12;
  } else if (dt == DType::f16 || dt == DType::bf16) {
    o.rtol = 1e-2;
    o.atol = 1e-2;
  } else {
    o.rtol = 1e-5;
    o.atol = 1e-5;
  }
  return o;
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8,  DType::b8};
  return d;
}

TEST(CudaIndex, Cat) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (int64_t dim : {0, 1, 2, -1})
      expect_cuda_matches_cpu(
          std::string("cat ") + dtype_name(dt) + " dim " + std::to_string(dim),
          [dim](const TVec& v) {
            return ops::cat({v[0], v[1], v[2]}, dim);
          },
          {input({2, 3, 4}, 1, dt), input({2, 3, 4}, 2, dt), input({2, 3, 4}, 3, dt)}, tol_for(dt));
  // Different sizes along dim, mixed dtypes (promoted), transposed and sliced inputs.
  expect_cuda_matches_cpu(
      "cat mixed",
      [](const TVec& v) {
        return ops::cat({v[0], v[1].transpose(0, 1), v[2].slice(1, 0, 10, 2)}, 0);
      },
      {input({3, 5}, 4, DType::f32), input({5, 7}, 5, DType::f64), input({2, 10}, 6, DType::f32)},
      tol_for(DType::f32));
  expect_cuda_matches_cpu(
      "cat skips 1-D empty",
      [](const TVec& v) {
        return ops::cat({v[0], v[1], v[2]}, 1);
      },
      {input({0}, 7, DType::f32), input({4, 3}, 8, DType::f32), input({4, 0}, 9, DType::f32)});
  expect_cuda_matches_cpu(
      "cat large",
      [](const TVec& v) {
        return ops::cat({v[0], v[1]}, 1);
      },
      {input({64, 1000, 7}, 10, DType::f32), input({64, 1001, 7}, 11, DType::f32)});
}

TEST(CudaIndex, IndexSelect) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (DType it : {DType::i64, DType::i32})
      for (int64_t dim : {0, 1, 2}) {
        const Shape xs = {5, 6, 7};
        const Tensor idx = indices({9}, xs[dim], 12, it);  // 9 > size: repeats
        expect_cuda_matches_cpu(
            std::string("index_select ") + dtype_name(dt) + " " + dtype_name(it) + " dim " +
                std::to_string(dim),
            [dim](const TVec& v) { return ops::index_select(v[0], dim, v[1]); },
            {input(xs, 13, dt), idx}, tol_for(dt));
      }
  expect_cuda_matches_cpu(
      "index_select strided index",
      [](const TVec& v) { return ops::index_select(v[0], 0, v[1].slice(0, 0, 20, 3)); },
      {input({10, 33}, 14, DType::f32), indices({20}, 10, 15)});
  expect_cuda_matches_cpu(
      "index_select transposed input",
      [](const TVec& v) { return ops::index_select(v[0].transpose(0, 1), 1, v[1]); },
      {input({10, 33}, 16, DType::f32), indices({4}, 10, 17)});
  expect_cuda_matches_cpu("index_select empty index",
                          [](const TVec& v) { return ops::index_select(v[0], 1, v[1]); },
                          {input({4, 6}, 18, DType::f32), indices({0}, 6, 19)});
  expect_cuda_matches_cpu("index_select 1-D",
                          [](const TVec& v) { return ops::index_select(v[0], 0, v[1]); },
                          {input({1000}, 20, DType::f32), indices({777}, 1000, 21)});
}

TEST(CudaIndex, Gather) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (DType it : {DType::i64, DType::i32})
      for (int64_t dim : {0, 1, 2}) {
        const Shape xs = {4, 5, 6};
        Shape is = {3, 4, 5};  // smaller than x outside dim
        is[dim] = 8;           // and longer along it
        expect_cuda_matches_cpu(
            std::string("gather ") + dtype_name(dt) + " " + dtype_name(it) + " dim " +
                std::to_string(dim),
            [dim](const TVec& v) { return ops::gather(v[0], dim, v[1]); },
            {input(xs, 22, dt), indices(is, xs[dim], 23, it)}, tol_for(dt));
      }
  expect_cuda_matches_cpu("gather transposed input",
                          [](const TVec& v) { return ops::gather(v[0].transpose(0, 1), 1, v[1]); },
                          {input({7, 9}, 24, DType::f32), indices({9, 11}, 7, 25)});
  expect_cuda_matches_cpu("gather broadcast index",
                          [](const TVec& v) {
                            return ops::gather(v[0], 1, v[1].expand({6, 3}));
                          },
                          {input({6, 5}, 26, DType::f32), indices({1, 3}, 5, 27)});
  expect_cuda_matches_cpu("gather empty", [](const TVec& v) { return ops::gather(v[0], 1, v[1]); },
                          {input({6, 5}, 28, DType::f32), indices({6, 0}, 5, 29)});
  // The classic use: pick the target's log-probability of each row.
  expect_cuda_matches_cpu("gather large", [](const TVec& v) { return ops::gather(v[0], 1, v[1]); },
                          {input({4096, 1000}, 30, DType::f32), indices({4096, 1}, 1000, 31)});
}

TEST(CudaIndex, ScatterAdd) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (DType it : {DType::i64, DType::i32})
      for (int64_t dim : {0, 1, 2}) {
        const Shape xs = {4, 5, 6};
        Shape is = {3, 4, 5};
        is[dim] = 7;  // more sources than targets along dim: repeated indices
        Shape ss = {4, 5, 6};
        ss[dim] = 9;  // src larger than index
        // 16-bit and integer sums depend on the order only through rounding/overflow.
        expect_cuda_matches_cpu(
            std::string("scatter_add ") + dtype_name(dt) + " " + dtype_name(it) + " dim " +
                std::to_string(dim),
            [dim](const TVec& v) { return ops::scatter_add(v[0], dim, v[1], v[2]); },
            {input(xs, 32, dt), indices(is, xs[dim], 33, it), input(ss, 34, dt)}, tol_for(dt));
      }
  // Many sources onto few targets: heavy atomic contention.
  expect_cuda_matches_cpu(
      "scatter_add contention", [](const TVec& v) { return ops::scatter_add(v[0], 0, v[1], v[2]); },
      {input({3, 8}, 35, DType::f32), indices({5000, 8}, 3, 36), input({5000, 8}, 37, DType::f32)},
      CudaCompareOptions{.atol = 1e-3, .rtol = 1e-4});
  expect_cuda_matches_cpu(
      "scatter_add transposed src",
      [](const TVec& v) { return ops::scatter_add(v[0], 1, v[1], v[2].transpose(0, 1)); },
      {input({6, 5}, 38, DType::f32), indices({6, 7}, 5, 39), input({7, 6}, 40, DType::f32)});
  expect_cuda_matches_cpu(
      "scatter_add empty index",
      [](const TVec& v) { return ops::scatter_add(v[0], 0, v[1], v[2]); },
      {input({6, 5}, 41, DType::f32), indices({0, 5}, 6, 42), input({0, 5}, 43, DType::f32)});
}

TEST(CudaIndex, MaskedFill) {
  TCV_REQUIRE_CUDA();
  for (DType dt : all_dtypes())
    for (double value : {0.0, -1.5, 7.0}) {
      if (dt == DType::u8 && value < 0) continue;  // not representable: undefined in C++
      Generator g(44);
      const Tensor mask = ops::lt(uniform({5, 1, 7}, 0.0, 1.0, {}, &g), 0.4);
      expect_cuda_matches_cpu(
          std::string("masked_fill ") + dtype_name(dt) + " " + std::to_string(value),
          [value](const TVec& v) { return ops::masked_fill(v[0], v[1], value); },
          {input({5, 6, 7}, 45, dt), mask}, tol_for(dt));
    }
  Generator g(46);
  const Tensor mask = ops::lt(uniform({9, 13}, 0.0, 1.0, {}, &g), 0.5);
  expect_cuda_matches_cpu(
      "masked_fill transposed",
      [](const TVec& v) { return ops::masked_fill(v[0].transpose(0, 1), v[1], 3.0); },
      {input({13, 9}, 47, DType::f32), mask});
  expect_cuda_matches_cpu("masked_fill empty",
                          [](const TVec& v) { return ops::masked_fill(v[0], v[1], 1.0); },
                          {input({0, 4}, 48, DType::f32), ops::lt(zeros({0, 4}), 1.0)});
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
