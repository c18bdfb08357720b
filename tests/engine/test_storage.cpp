// Storage's blocked (nChw16c) bytes: accessors never convert, the conversion
// to row-major is the named step make_row_major(), once, from any number of
// threads, and a thread reading the blocked bytes keeps correct values while
// another converts.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/base.h"
#include "support/error_of.h"

namespace tcv {
namespace {

using testing::error_of;

Tensor random_activation(uint64_t seed) {
  Generator g(seed);
  return randn({2, 32, 5, 3}, {}, &g);  // (N, C, H, W), C a multiple of 16
}

TEST(Storage, AccessorsDoNotConvert) {
  const Tensor x = random_activation(1);
  const Tensor b = to_blocked(x);
  const auto& st = b.storage();
  ASSERT_TRUE(b.is_blocked());
  void* const blocked = st->blocked_bytes();
  const kernels::KTensor kt = b.desc_as_stored();
  EXPECT_TRUE(kt.blocked);
  EXPECT_EQ(kt.data, blocked);
  EXPECT_TRUE(st->blocked());  // asking for the bytes as stored changed nothing
  const std::string msg = error_of([&] { st->data(); });
  EXPECT_NE(msg.find("make_row_major"), std::string::npos) << msg;
  EXPECT_TRUE(st->blocked());

  // The named step converts, once; the nChw16c bytes stay where they were.
  void* const plain = st->make_row_major();
  EXPECT_FALSE(st->blocked());
  EXPECT_FALSE(b.is_blocked());
  EXPECT_EQ(st->make_row_major(), plain);
  EXPECT_EQ(st->data(), plain);
  EXPECT_EQ(st->blocked_bytes(), blocked);
  EXPECT_NE(plain, blocked);
  EXPECT_EQ(b.to_vector<float>(), x.to_vector<float>());
}

TEST(Storage, ElementReadsConvertThroughTheNamedStep) {
  const Tensor x = random_activation(2);
  const Tensor b = to_blocked(x);
  EXPECT_EQ(b.to_vector<float>(), x.to_vector<float>());  // data_ptr -> make_row_major
  EXPECT_FALSE(b.storage()->blocked());
  const Tensor plain = zeros({4});
  EXPECT_THROW(plain.storage()->blocked_bytes(), Error);  // never blocked
  EXPECT_EQ(plain.storage()->make_row_major(), plain.storage()->data());
}

TEST(Storage, ThreadsConvertingTogetherGetOneBuffer) {
  for (int round = 0; round < 20; ++round) {
    const Tensor x = random_activation(10 + round);
    const Tensor b = to_blocked(x);
    constexpr int kThreads = 6;
    std::vector<void*> got(kThreads);
    std::latch start(kThreads);
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i)
      ts.emplace_back([&, i] {
        start.arrive_and_wait();
        got[i] = b.storage()->make_row_major();
      });
    for (auto& t : ts) t.join();
    for (int i = 1; i < kThreads; ++i) EXPECT_EQ(got[i], got[0]);
    EXPECT_EQ(b.to_vector<float>(), x.to_vector<float>());
  }
}

// One thread runs ops that read the blocked bytes (relu keeps the layout, so it
// reads them as they are) while another reads the tensor row-major, which
// converts the storage: both see the right values in every round.
TEST(Storage, ReadingBlockedBytesWhileAnotherThreadConverts) {
  std::atomic<int> wrong{0};
  for (int round = 0; round < 40; ++round) {
    const Tensor x = random_activation(100 + round);
    const std::vector<float> want_x = x.to_vector<float>();
    const std::vector<float> want_relu = ops::relu(x).to_vector<float>();
    const Tensor b = to_blocked(x);
    std::latch start(2);
    std::thread reader([&] {
      start.arrive_and_wait();
      for (int k = 0; k < 3; ++k)
        if (ops::relu(b).to_vector<float>() != want_relu) ++wrong;
    });
    std::thread converter([&] {
      start.arrive_and_wait();
      if (b.to_vector<float>() != want_x) ++wrong;
      // Fresh allocations of the same size, filled: they would land in the
      // nChw16c buffer had the conversion freed it.
      for (int k = 0; k < 3; ++k) ops::sum(full(x.shape(), -7.0));
    });
    reader.join();
    converter.join();
  }
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace tcv
