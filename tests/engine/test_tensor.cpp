// Tensors: creation, views sharing storage, dtype conversion, RNG, printing.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/allocator.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

TEST(Tensor, CreationFillsValues) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.dtype(), DType::f32);
  for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  for (double v : ones({4}, {.dtype = DType::f64}).to_vector<double>()) EXPECT_EQ(v, 1.0);
  for (int64_t v : full({3}, 7, {.dtype = DType::i64}).to_vector<int64_t>()) EXPECT_EQ(v, 7);
  // Any non-zero fill is true for bool, as in torch.full(..., 0.5, dtype=torch.bool).
  for (bool v : full({3}, 0.5, {.dtype = DType::b8}).to_vector<bool>()) EXPECT_TRUE(v);
  for (bool v : full({3}, 0.0, {.dtype = DType::b8}).to_vector<bool>()) EXPECT_FALSE(v);
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1.0, 2.0, 0.25, {.dtype = DType::f64}).to_vector<double>(),
            (std::vector<double>{1.0, 1.25, 1.5, 1.75}));
  Tensor s = scalar_tensor(3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_DOUBLE_EQ(s.item(), 3.5);
}

TEST(Tensor, FromVectorKeepsDtypeAndShape) {
  Tensor t = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.size(1), 3);
  EXPECT_EQ(t.select(1, 2).to_vector<int32_t>(), (std::vector<int32_t>{3, 6}));
  EXPECT_THROW(from_vector<float>({1, 2, 3}, {2, 2}), Error);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = arange(0.0, 12.0, 1.0, {.dtype = DType::f32}).reshape({3, 4});
  Tensor row = t.select(0, 1);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  row.fill_(-1);
  EXPECT_EQ(t.to_vector<float>()[5], -1.0f);
  EXPECT_EQ(t.storage().get(), row.storage().get());

  Tensor tt = t.t();
  EXPECT_EQ(tt.shape(), (Shape{4, 3}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.strides(), (Shape{1, 4}));
  Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, -1, 8, 1, -1, 9, 2, -1, 10, 3, -1, 11}));

  Tensor sl = t.slice(1, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(sl.shape(), (Shape{3, 2}));
  EXPECT_EQ(sl.to_vector<float>(), (std::vector<float>{1, 3, -1, -1, 9, 11}));
  EXPECT_EQ(t.narrow(0, 2, 1).to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(Tensor, ExpandSqueezeUnsqueezePermute) {
  Tensor v = from_vector<float>({1, 2, 3});
  Tensor e = v.unsqueeze(0).expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(v.unsqueeze(1).shape(), (Shape{3, 1}));
  EXPECT_EQ(v.unsqueeze(-1).squeeze(1).shape(), (Shape{3}));
  EXPECT_EQ(zeros({1, 3, 1}).squeeze().shape(), (Shape{3}));
  EXPECT_THROW(v.expand({2, 4}), Error);

  Tensor x = arange(0.0, 24.0, 1.0, {.dtype = DType::f32}).reshape({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.contiguous().to_vector<float>()[1], 4.0f);  // p[0][0][1] = x[0][1][0]
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.reshape({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_THROW(x.reshape({5, -1}), Error);
  EXPECT_THROW(x.permute({0, 0, 1}), Error);
}

TEST(Tensor, ViewOfNonContiguousNeedsReshape) {
  Tensor x = zeros({4, 6}).t();  // (6, 4) strides (1, 6)
  EXPECT_THROW(x.view({24}), Error);
  Tensor r = x.reshape({24});
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_NE(r.storage().get(), x.storage().get());  // reshape copied
  Tensor y = zeros({4, 6});
  EXPECT_EQ(y.reshape({2, 12}).storage().get(), y.storage().get());  // reshape viewed
}

TEST(Tensor, DtypeConversionsRoundTrip) {
  Tensor x = from_vector<float>({-2.5f, 0.0f, 1.0f, 3.75f, 65504.0f, 1e-3f});
  EXPECT_EQ(x.to(DType::f16).to(DType::f32).to_vector<float>(),
            (std::vector<float>{-2.5f, 0.0f, 1.0f, 3.75f, 65504.0f, 0.0010004044f}));
  const auto bf = x.to(DType::bf16).to(DType::f32).to_vector<float>();
  EXPECT_EQ(bf[0], -2.5f);
  EXPECT_EQ(bf[3], 3.75f);
  EXPECT_EQ(bf[4], 65536.0f);  // 8 bits of mantissa
  EXPECT_EQ(x.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 1, 3, 65504, 0}));
  EXPECT_EQ(x.to(DType::b8).to_vector<bool>(),
            (std::vector<bool>{true, false, true, true, true, true}));
  EXPECT_EQ(from_vector<uint8_t>({0, 255}).to(DType::f32).to_vector<float>(),
            (std::vector<float>{0.0f, 255.0f}));
  // f16 rounding to nearest even and overflow to inf.
  EXPECT_EQ(Half::to_float(Half::from_float(2049.0f)), 2048.0f);
  EXPECT_EQ(Half::to_float(Half::from_float(2051.0f)), 2052.0f);
  EXPECT_TRUE(std::isinf(Half::to_float(Half::from_float(70000.0f))));
  EXPECT_EQ(Half::to_float(Half::from_float(5.96e-8f)),
            5.9604644775390625e-8f);  // smallest subnormal
}

TEST(Tensor, CopyAndInPlaceBumpVersion) {
  Tensor x = zeros({3});
  const uint32_t v0 = x.version();
  x.add_(ones({3}), 2.0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  x.mul_(from_vector<float>({1, 2, 3}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  x.copy_(from_vector<double>({7}));  // broadcast + convert
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{7, 7, 7}));
  EXPECT_EQ(x.version(), v0 + 3);
  Tensor view = x.slice(0, 0, 2);
  view.zero_();
  EXPECT_EQ(x.version(), v0 + 4);  // views share the counter
}

TEST(Tensor, PrintingIsReadable) {
  Tensor x = from_vector<float>({1.0f, 2.5f, -3.0f, 4.0f}, {2, 2});
  EXPECT_EQ(x.str(),
            "tensor([[1.0000, 2.5000],\n        [-3.0000, 4.0000]], shape=(2, 2), dtype=f32)");
  EXPECT_EQ(from_vector<int64_t>({1, 2}).str(), "tensor([1, 2], shape=(2), dtype=i64)");
  Tensor big = zeros({2000});
  EXPECT_NE(big.str().find("..."), std::string::npos);
}

TEST(Tensor, ErrorsNameTheOp) {
  Tensor x = zeros({2, 3});
  try {
    x.size(5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dim 5 out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Device::parse("gpu"), Error);
  EXPECT_THROW(parse_dtype("float128"), Error);
  EXPECT_EQ(Device::parse("cuda:1").index, 1);
}

TEST(Random, PhiloxMatchesReferenceVector) {
  // Known-answer test from the Random123 distribution (philox4x32_10, zero key and counter).
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Random, DrawsFollowTheirPhiloxDefinition) {
  // Every draw reads Philox blocks of counters offset, offset + 1, ... under key
  // seed: rand element i is word i % 4 of block i / 4 as (w >> 8) / 2^24; randn
  // pairs words (2j, 2j + 1) of block i / 2 by Box-Muller; randint makes one
  // 64-bit word of each pair; dropout keeps i where rand's value < 1 - p. The
  // CUDA kernels draw the same. A seed with a high word, and an offset just
  // below 2^32 so counters carry into their second word.
  const uint64_t seed = 0x123456789abcdefull, offset = (uint64_t{1} << 32) - 5;
  auto words = [&](uint64_t k) {
    const uint64_t c = offset + k;
    return philox4x32({static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0, 0},
                      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  };
  auto unit = [](uint32_t w) { return static_cast<double>(w >> 8) / 16777216.0; };
  const int64_t n = 103;
  Generator g(seed);
  g.set_offset(offset);
  const auto u = rand({n}, {.dtype = DType::f64}, &g).to_vector<double>();
  EXPECT_EQ(g.offset(), offset + 26);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(u[i], unit(words(static_cast<uint64_t>(i / 4))[i % 4])) << i;
  g.set_offset(offset);
  const auto z = randn({n}, {.dtype = DType::f64}, &g).to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    const auto w = words(static_cast<uint64_t>(i / 2));
    const int j = static_cast<int>(i % 2) * 2;
    const double want = std::sqrt(-2.0 * std::log(1.0 - unit(w[j]))) *
                        std::cos(2.0 * 3.14159265358979323846 * unit(w[j + 1]));
    ASSERT_NEAR(z[i], want, 1e-12) << i;
  }
  g.set_offset(offset);
  const auto r = randint(-5, 1000, {n}, {.dtype = DType::i64}, &g).to_vector<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const auto w = words(static_cast<uint64_t>(i / 2));
    const int j = static_cast<int>(i % 2) * 2;
    const uint64_t v = (static_cast<uint64_t>(w[j]) << 32) | w[j + 1];
    ASSERT_EQ(r[i], -5 + static_cast<int64_t>(v % 1005)) << i;
  }
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    g.set_offset(offset);
    const Tensor x = full({n}, 2.0, {.dtype = dt});
    const auto y = ops::dropout(x, {.p = 0.3, .generator = &g}).to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = unit(words(static_cast<uint64_t>(i / 4))[i % 4]) < 0.7;
      ASSERT_NEAR(y[i], keep ? 2.0 / 0.7 : 0.0, 1e-2) << dtype_name(dt) << " " << i;
    }
  }
}

TEST(Random, SameSeedSameNumbersAnyThreadCount) {
  Generator g1(42), g2(42);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor a = randn({100003}, {}, &g1);
  omp_set_num_threads(2);
  Tensor b = randn({100003}, {}, &g2);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  // Successive draws differ and the stream position advances.
  Tensor c = randn({10}, {}, &g1);
  EXPECT_NE(c.to_vector<float>(), b.slice(0, 0, 10).to_vector<float>());
}

TEST(Random, InPlaceDrawsWriteStraightIntoTheTensor) {
  // uniform_/normal_ on a contiguous f32 tensor: the same numbers as drawing a
  // new tensor, without an f64 temporary of twice its size.
  CpuAllocator& a = CpuAllocator::instance();
  for (bool is_normal : {false, true}) {
    Tensor t = empty({1 << 18});
    manual_seed(5);
    a.reset_peak();
    const int64_t before = a.stats().allocated;
    if (is_normal)
      normal_(t, 0.5, 2.0);
    else
      uniform_(t, -1.0, 3.0);
    EXPECT_EQ(a.stats().peak_allocated, before);  // nothing allocated
    manual_seed(5);
    const Tensor ref = is_normal ? normal({1 << 18}, 0.5, 2.0) : uniform({1 << 18}, -1.0, 3.0);
    EXPECT_EQ(t.to_vector<float>(), ref.to_vector<float>());
  }
}

TEST(Random, DistributionsHaveTheirMoments) {
  Generator g(7);
  Tensor u = rand({200000}, {.dtype = DType::f64}, &g);
  EXPECT_NEAR(ops::mean(u).item(), 0.5, 0.005);
  EXPECT_GE(ops::min(u).item(), 0.0);
  EXPECT_LT(ops::max(u).item(), 1.0);
  Tensor n = randn({200000}, {.dtype = DType::f64}, &g);
  EXPECT_NEAR(ops::mean(n).item(), 0.0, 0.01);
  EXPECT_NEAR(ops::var(n).item(), 1.0, 0.02);
  Tensor i = randint(3, 7, {10000}, {.dtype = DType::i64}, &g);
  EXPECT_EQ(ops::min(i).item(), 3);
  EXPECT_EQ(ops::max(i).item(), 6);
  Tensor p = randperm(1000, &g);
  std::vector<int64_t> v = p.to_vector<int64_t>();
  std::sort(v.begin(), v.end());
  for (int64_t k = 0; k < 1000; ++k) EXPECT_EQ(v[k], k);
}

TEST(Allocator, ReusesFreedBlocks) {
  CpuAllocator& a = CpuAllocator::instance();
  { Tensor warm = empty({1 << 20}); }
  const MemoryStats before = a.stats();
  for (int i = 0; i < 10; ++i) {
    Tensor t = empty({1 << 20});
    t.fill_(1);
  }
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.system_allocs, before.system_allocs);  // served from the cache
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(CpuAllocator::round_size(5000), 5120u);
  EXPECT_EQ(CpuAllocator::round_size(1 << 20), size_t{1} << 20);
}

TEST(Tensor, EmptyRejectsShapesTooLargeToAddress) {
  // A zero size makes no elements, but the strides still multiply the other
  // sizes (parse_idx made such a tensor from a 28-byte file; the multiplication
  // overflowed).
  const std::string msg = testing::error_of([] { empty({0, int64_t{1} << 40, int64_t{1} << 40}); });
  EXPECT_NE(msg.find("[empty] shape (0, 1099511627776, 1099511627776) of f32 is too large"),
            std::string::npos)
      << msg;
  EXPECT_THROW(empty({int64_t{1} << 61}, {.dtype = DType::f64}), Error);  // 2^64 bytes
  EXPECT_EQ(empty({0, 1 << 20, 1 << 20}).numel(), 0);
  EXPECT_EQ(empty({0, 1 << 20, 1 << 20}).strides(), (Shape{int64_t{1} << 40, 1 << 20, 1}));
}

}  // namespace
}  // namespace tcv

namespace tcv {
namespace {

TEST(Device, CudaRequestsWithoutAGpuAreClearErrors) {
  if (cuda_is_available()) GTEST_SKIP() << "a GPU is present; the CUDA tests cover it";
  EXPECT_EQ(cuda_device_count(), 0);
  try {
    zeros({2}).to(Device(DeviceType::CUDA, 0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tcv
