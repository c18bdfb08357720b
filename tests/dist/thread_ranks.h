// What the in-process DDP tests share: ranks as threads over a FakeWorld, and
// one optimizer step's backward with gradient accumulation.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/ddp.h"
#include "dist/fake_group.h"
#include "engine/tensor.h"

namespace tcv::dist::testing {

/// Runs fn(rank, group) on `world` threads, each with its FakeGroup of one
/// FakeWorld; a rank that throws fails the test with its message.
template <typename F>
void run_ranks(int world, F fn) {
  auto w = std::make_shared<FakeWorld>(world);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, std::make_shared<FakeGroup>(w, r));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

/// The backward of one step of `micro` micro-batches, the first micro - 1
/// under no_sync (gradient accumulation).

/// Micro-batch m is xs[step * micro + m] and ys[...],
/// of which this rank takes rows [rank * b, (rank + 1) * b); `loss(out, y)` is
/// the scalar each one backpropagates.
template <typename Loss>
void accumulate_step(DDP& ddp, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                     int64_t step, int64_t micro, int rank, int64_t b, Loss loss) {
  for (int64_t m = 0; m < micro; ++m) {
    const Tensor x = xs[step * micro + m].narrow(0, rank * b, b);
    const Tensor y = ys[step * micro + m].narrow(0, rank * b, b);
    if (m + 1 < micro) {
      auto guard = ddp.no_sync();
      loss(ddp.forward(x), y).backward();
    } else {
      loss(ddp.forward(x), y).backward();
    }
  }
}

}  // namespace tcv::dist::testing
