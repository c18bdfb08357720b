// Where a step's time goes, per kernel entry point: every engine dispatch
// (TCV_KERNEL) opens a profiler::Scope named after the kernel function. Off by
// default, when a dispatch costs one relaxed atomic load. On, CPU kernels are
// timed with the wall clock (they run synchronously) and CUDA kernels with a
// pair of events on the compute stream, resolved by take(), so GPU times are
// device times, not launch times.
//
//   profiler::set_enabled(true);
//   ... steps ...
//   auto rows = profiler::take();              // waits for the GPUs, clears
//   std::cout << profiler::format_table(rows, steps, step_ms);
//
// tcv-bench train --profile prints this table after the timed steps.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace tcv::profiler {

namespace detail {
extern std::atomic<bool> g_enabled;
}

inline bool enabled() {
  return detail::g_enabled.load(std::memory_order_relaxed);
}
void set_enabled(bool on);

/// Times one kernel call on `device` while profiling is on (the current CUDA
/// device must be `device`, as TCV_KERNEL's DeviceGuard makes it).
class Scope {
 public:
  Scope(const char* name, Device device) {
    if (enabled()) begin(name, device);
  }
  ~Scope() {
    if (slot_ >= 0) end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void begin(const char* name, Device device);
  void end();
  int64_t slot_ = -1;
  uint64_t generation_ = 0;
};

struct Row {
  std::string name;    ///< kernel entry point, e.g. "conv2d_forward"
  std::string device;  ///< "cpu" or "cuda:N"
  int64_t calls = 0;
  double total_ms = 0.0;
};

/// Totals per (kernel, device) since the last take(), largest first. Waits for
/// the GPU work it timed; clears what it returns.
std::vector<Row> take();

/// A text table: calls and milliseconds per step (totals divided by `steps`)
/// and each row's share of `step_ms`, the measured step time.
std::string format_table(const std::vector<Row>& rows, int64_t steps, double step_ms);

}  // namespace tcv::profiler
