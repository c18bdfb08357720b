// The kernel profiler (engine/profiler.h): off it records nothing; on, every
// TCV_KERNEL dispatch is one call of its kernel, with its time; take() clears.
#include "engine/profiler.h"

#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"

namespace tcv {
namespace {

const profiler::Row* find(const std::vector<profiler::Row>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(Profiler, CountsAndTimesEachKernelCall) {
  profiler::take();
  Tensor x = randn({2, 3, 8, 8}), w = randn({4, 3, 3, 3});
  ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});  // profiler off
  EXPECT_TRUE(profiler::take().empty());

  profiler::set_enabled(true);
  for (int i = 0; i < 3; ++i) ops::conv2d(x, w, Tensor(), {.padding = {1, 1}});
  Tensor s = ops::add(x, x);
  s = ops::add(s, x);
  profiler::set_enabled(false);
  ops::add(x, x);  // off again: not counted
  const auto rows = profiler::take();
  const profiler::Row* conv = find(rows, "conv2d_forward");
  const profiler::Row* add = find(rows, "binary");
  ASSERT_NE(conv, nullptr);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(conv->calls, 3);
  EXPECT_EQ(add->calls, 2);
  EXPECT_EQ(conv->device, "cpu");
  EXPECT_GT(conv->total_ms, 0.0);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].total_ms, rows[i].total_ms);
  EXPECT_TRUE(profiler::take().empty());  // cleared

  const std::string table = profiler::format_table(rows, 1, 10.0);
  EXPECT_NE(table.find("conv2d_forward"), std::string::npos) << table;
  EXPECT_NE(table.find("all kernels"), std::string::npos) << table;
}

TEST(Profiler, ScopeOpenAcrossTakeIsDropped) {
  profiler::take();
  profiler::set_enabled(true);
  {
    profiler::Scope open("outer", kCPU);
    EXPECT_TRUE(profiler::take().empty());  // the open scope has no time yet
    profiler::Scope inner("inner", kCPU);
  }
  profiler::set_enabled(false);
  const auto rows = profiler::take();
  ASSERT_EQ(rows.size(), 1u);  // "inner" only; "outer" began before take()
  EXPECT_EQ(rows[0].name, "inner");
}

}  // namespace
}  // namespace tcv
