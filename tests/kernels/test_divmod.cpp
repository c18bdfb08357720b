// FastDivmod (kernels/cuda/divmod.h) on the host: the same magic numbers and
// arithmetic the CUDA kernels use, against plain division over every divisor
// class that matters (1, powers of two and their neighbours, primes, the
// largest values) and dividends at the edges of the valid range.
#include "kernels/cuda/divmod.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tcv::kernels::cuda {
namespace {

void expect_exact(uint32_t d, uint32_t n) {
  const FastDivmod f(d);
  uint32_t q = 0, r = 0;
  f.divmod(n, q, r);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(r, n % d) << n << " % " << d;
}

std::vector<uint32_t> divisors() {
  std::vector<uint32_t> ds = {1,     2,     3,       5,           7,           9,
                              10,    49,    196,     784,         3136,        12544,
                              65535, 65537, 1000003, 0x7fffffffu, 0x7ffffffeu, 0x40000001u};
  for (int s = 1; s < 31; ++s) {
    const uint32_t p = uint32_t(1) << s;
    ds.insert(ds.end(), {p - 1, p, p + 1});
  }
  return ds;
}

TEST(FastDivmod, EdgeDividendsForEveryDivisorClass) {
  const uint32_t top = static_cast<uint32_t>(FastDivmod::kLimit - 1);
  for (uint32_t d : divisors()) {
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, top, top - 1, top - d + 1, top / d * d,
                       top / d * d - 1}) {
      if (n > top) continue;
      expect_exact(d, n);
    }
  }
}

TEST(FastDivmod, RandomDividendsAndDivisors) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> any_n(0, static_cast<uint32_t>(FastDivmod::kLimit - 1));
  for (int k = 0; k < 200000; ++k) {
    // Divisors spread over every magnitude, as plane sizes and channel counts are.
    const int bits = 1 + static_cast<int>(rng() % 31);
    const uint32_t d = 1 + static_cast<uint32_t>(rng() % (uint64_t(1) << bits)) % 0x7fffffffu;
    expect_exact(d, any_n(rng));
  }
}

TEST(FastDivmod, EveryDividendForSmallDivisors) {
  // Exhaustive below 2^20 for the plane sizes of a ResNet on 224x224 inputs.
  for (uint32_t d : {3u, 7u, 49u, 196u, 784u}) {
    const FastDivmod f(d);
    for (uint32_t n = 0; n < (1u << 20); ++n) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

TEST(WideDivmod, MatchesIntegerDivision) {
  const WideDivmod w(int64_t(3) << 33);
  int64_t q = 0, r = 0;
  w.divmod((int64_t(7) << 34) + 5, q, r);
  EXPECT_EQ(q, 4);  // 14·2^33 + 5 = 4 · 3·2^33 + (2·2^33 + 5)
  EXPECT_EQ(r, (int64_t(2) << 33) + 5);
  EXPECT_EQ(w.divisor(), int64_t(3) << 33);
}

}  // namespace
}  // namespace tcv::kernels::cuda
