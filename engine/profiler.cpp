#include "engine/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "kernels/cuda/runtime.h"

namespace tcv::profiler {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

using Clock = std::chrono::steady_clock;

/// One open or finished timing. CUDA records keep their events until take().
struct Record {
  const char* name = nullptr;
  Device device;
  Clock::time_point t0;
  double cpu_ms = 0.0;
  bool done = false;  ///< its scope has closed
  std::unique_ptr<kernels::cuda::Event> start, stop;
};

struct State {
  std::mutex mu;
  std::vector<Record> records;
  /// Bumped by take(): a scope still open across it finds its record gone.
  uint64_t generation = 0;
  /// Timing events from resolved records, reused (creating events is not free).
  std::vector<std::unique_ptr<kernels::cuda::Event>> spare;

  std::unique_ptr<kernels::cuda::Event> event() {
    if (spare.empty()) return std::make_unique<kernels::cuda::Event>(true);
    auto e = std::move(spare.back());
    spare.pop_back();
    return e;
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

void set_enabled(bool on) {
  detail::g_enabled.store(on, std::memory_order_relaxed);
}

void Scope::begin(const char* name, Device device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  Record r;
  r.name = name;
  r.device = device;
  if (device.is_cuda()) {
    r.start = s.event();
    r.stop = s.event();
    r.start->record(kernels::cuda::compute_stream());
  }
  slot_ = static_cast<int64_t>(s.records.size());
  generation_ = s.generation;
  s.records.push_back(std::move(r));
  s.records.back().t0 = Clock::now();
}

void Scope::end() {
  const Clock::time_point t1 = Clock::now();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (generation_ != s.generation) return;  // take() ran while this scope was open
  Record& r = s.records[static_cast<size_t>(slot_)];
  r.done = true;
  if (r.device.is_cuda())
    r.stop->record(kernels::cuda::compute_stream());
  else
    r.cpu_ms = std::chrono::duration<double, std::milli>(t1 - r.t0).count();
}

std::vector<Row> take() {
  State& s = state();
  std::vector<Record> records;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    records.swap(s.records);
    ++s.generation;
  }
  std::map<std::pair<std::string, std::string>, Row> totals;
  for (Record& r : records) {
    if (!r.done) continue;  // its scope was still open: dropped
    double ms = r.cpu_ms;
    if (r.device.is_cuda()) {
      r.stop->synchronize();
      ms = r.start->elapsed_ms(*r.stop);
    }
    Row& row = totals[{r.name, r.device.str()}];
    row.name = r.name;
    row.device = r.device.str();
    ++row.calls;
    row.total_ms += ms;
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (Record& r : records)
      if (r.start) {
        s.spare.push_back(std::move(r.start));
        s.spare.push_back(std::move(r.stop));
      }
  }
  std::vector<Row> rows;
  for (auto& [key, row] : totals) rows.push_back(std::move(row));
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
  return rows;
}

std::string format_table(const std::vector<Row>& rows, int64_t steps, double step_ms) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "  %-34s %-7s %11s %10s %9s\n", "kernel", "device", "calls/step",
                "ms/step", "of step");
  out += line;
  double sum = 0.0;
  for (const Row& r : rows) {
    const double ms = r.total_ms / n;
    sum += ms;
    std::snprintf(line, sizeof line, "  %-34s %-7s %11.1f %10.3f %8.1f%%\n", r.name.c_str(),
                  r.device.c_str(), static_cast<double>(r.calls) / n, ms,
                  step_ms > 0 ? 100.0 * ms / step_ms : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-34s %-7s %11s %10.3f %8.1f%%\n", "all kernels", "", "", sum,
                step_ms > 0 ? 100.0 * sum / step_ms : 0.0);
  out += line;
  return out;
}

}  // namespace tcv::profiler
