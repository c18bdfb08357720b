// The shared-memory all-reduce of the Gloo group (dist/shm_allreduce.h), with
// threads as ranks: one region mapped once per rank, as processes map it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist/shm_allreduce.h"
#include "engine/error.h"

namespace tcv::dist::detail {
namespace {

using std::chrono::milliseconds;

void sum_f32(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(out);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

std::string unique_name() {
  static std::atomic<int> n{0};
  return "/tcv-test-shm-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

// Maps one region per rank (rank 0 creates it), runs fn(rank, shm) on a
// thread per rank, and returns each rank's error ("" when none).
template <typename F>
std::vector<std::string> run_ranks(int world, F fn) {
  const std::string name = unique_name();
  std::vector<std::unique_ptr<ShmAllreduce>> shms;
  shms.push_back(ShmAllreduce::create(name, 0, world, 42));
  EXPECT_NE(shms[0], nullptr);
  for (int r = 1; r < world; ++r) shms.push_back(ShmAllreduce::attach(name, r, world, 42));
  ShmAllreduce::unlink(name);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, *shms[r]);
      } catch (const Error& e) {
        errors[r] = e.what();
      } catch (const ShmCallMismatch& m) {
        errors[r] = "mismatch of " + std::to_string(m.calls.size()) + " calls";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

auto never_aborted = [] { return std::string(); };

TEST(ShmAllreduce, SumsInClosedFormAcrossRoundsAndRanks) {
  // Sizes below, at and past one round's window (ranks x 2 MiB).
  for (int world : {2, 3}) {
    const size_t window = static_cast<size_t>(world) * ShmAllreduce::kSegmentBytes / 4;
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, window, 2 * window + 7}) {
      const auto errors = run_ranks(world, [&](int r, ShmAllreduce& shm) {
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((r + 1) * (i % 13 + 1));
        for (int rep = 0; rep < 2; ++rep) {
          std::vector<float> y = x;
          shm.all_reduce({1, 2, 3, static_cast<int64_t>(n)}, y.data(), n, 4, sum_f32,
                         milliseconds(20000), never_aborted);
          const float ranks = static_cast<float>(world * (world + 1) / 2);
          for (size_t i = 0; i < n; ++i)
            if (y[i] != ranks * static_cast<float>(i % 13 + 1))
              TCV_THROW("rank ", r, " n ", n, " element ", i, " is ", y[i]);
        }
      });
      for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "world " << world << " n " << n;
    }
  }
}

// One-phase (small) and two-phase calls in any sequence: each reuses its
// areas only two calls later.
TEST(ShmAllreduce, SmallAndLargeCallsInterleave) {
  const int world = 2;
  const size_t window = world * ShmAllreduce::kSegmentBytes / 4;
  const std::vector<size_t> sizes = {1000, 3, window + 5, 10, 7, 262144, 262145, window, 1, 2};
  const auto errors = run_ranks(world, [&](int r, ShmAllreduce& shm) {
    for (int rep = 0; rep < 3; ++rep)
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t n = sizes[k];
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((r + 1) * (i % 7 + k));
        shm.all_reduce({static_cast<int64_t>(k), 0, 0, static_cast<int64_t>(n)}, x.data(), n, 4,
                       sum_f32, milliseconds(20000), never_aborted);
        for (size_t i = 0; i < n; ++i)
          if (x[i] != 3.0f * static_cast<float>(i % 7 + k))
            TCV_THROW("rank ", r, " call ", k, " element ", i, " is ", x[i]);
      }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(ShmAllreduce, EveryRankGetsTheSameBitsInRankOrder) {
  // Sums that round differently in another order: ((a0 + a1) + a2) everywhere.
  const int world = 3;
  const size_t n = 4096;
  std::vector<std::vector<float>> in(world, std::vector<float>(n)), out(world);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  for (auto& v : in)
    for (float& x : v) x = u(rng) * (rng() % 2 ? 1e-6f : 1.0f);
  const auto errors = run_ranks(world, [&](int r, ShmAllreduce& shm) {
    out[r] = in[r];
    shm.all_reduce({0, 0, 0, static_cast<int64_t>(n)}, out[r].data(), n, 4, sum_f32,
                   milliseconds(20000), never_aborted);
  });
  for (int r = 0; r < world; ++r) ASSERT_EQ(errors[r], "");
  for (size_t i = 0; i < n; ++i) {
    const float want = (in[0][i] + in[1][i]) + in[2][i];
    for (int r = 0; r < world; ++r) ASSERT_EQ(out[r][i], want) << "rank " << r << " i " << i;
  }
}

TEST(ShmAllreduce, DifferentCallsAreAMismatchOnEveryRank) {
  const auto errors = run_ranks(2, [&](int r, ShmAllreduce& shm) {
    std::vector<float> x(100 * (r + 1), 1.0f);
    shm.all_reduce({7, 1, 0, static_cast<int64_t>(x.size())}, x.data(), x.size(), 4, sum_f32,
                   milliseconds(20000), never_aborted);
  });
  EXPECT_EQ(errors[0], "mismatch of 2 calls");
  EXPECT_EQ(errors[1], "mismatch of 2 calls");
}

TEST(ShmAllreduce, AbortAndTimeoutEndTheWaitWithAnError) {
  // Rank 1 never arrives: rank 0 times out naming it.
  auto errors = run_ranks(2, [&](int r, ShmAllreduce& shm) {
    if (r == 1) return;
    float x = 1;
    shm.all_reduce({0, 0, 0, 1}, &x, 1, 4, sum_f32, milliseconds(300), never_aborted);
  });
  EXPECT_NE(errors[0].find("timed out after 300 ms waiting for rank 1"), std::string::npos)
      << errors[0];
  // Rank 1 aborts instead: rank 0 stops at once, naming it.
  const auto t0 = std::chrono::steady_clock::now();
  errors = run_ranks(2, [&](int r, ShmAllreduce& shm) {
    if (r == 1) {
      std::this_thread::sleep_for(milliseconds(50));
      shm.abort();
      return;
    }
    float x = 1;
    shm.all_reduce({0, 0, 0, 1}, &x, 1, 4, sum_f32, milliseconds(20000), never_aborted);
  });
  EXPECT_NE(errors[0].find("rank 1 abandoned"), std::string::npos) << errors[0];
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  // The caller's own abort reason ends its wait too.
  errors = run_ranks(2, [&](int r, ShmAllreduce& shm) {
    if (r == 1) return;
    float x = 1;
    shm.all_reduce({0, 0, 0, 1}, &x, 1, 4, sum_f32, milliseconds(20000),
                   [] { return std::string("stopped by the heartbeat"); });
  });
  EXPECT_EQ(errors[0], "stopped by the heartbeat");
}

TEST(ShmAllreduce, AttachChecksTheStampAndTheSize) {
  const std::string name = unique_name();
  auto a = ShmAllreduce::create(name, 0, 2, 99);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(ShmAllreduce::create(name, 0, 2, 99), nullptr);  // the name is taken
  EXPECT_EQ(ShmAllreduce::attach(name, 1, 2, 98), nullptr);  // another group's token
  EXPECT_EQ(ShmAllreduce::attach(name, 1, 3, 99), nullptr);  // another size
  EXPECT_NE(ShmAllreduce::attach(name, 1, 2, 99), nullptr);
  ShmAllreduce::unlink(name);
  EXPECT_EQ(ShmAllreduce::attach(name, 1, 2, 99), nullptr);  // gone once unlinked
  EXPECT_FALSE(ShmAllreduce::host_key().empty());
}

}  // namespace
}  // namespace tcv::dist::detail
