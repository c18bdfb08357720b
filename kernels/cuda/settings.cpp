// The CUDA backend's switches live in plain C++ so every build has them.
#include <atomic>
#include <cstdlib>
#include <string>

#include "kernels/cuda/settings.h"

#include "kernels/base.h"

namespace tcv::kernels::cuda {

namespace {
std::atomic<bool> g_tf32{false};
std::atomic<bool> g_benchmark{true};
// TCV_CUDA_WIDE_INDICES=1 turns wide indices on from the start (the GPU check
// reruns the elementwise and batch-norm tests so).
bool wide_from_env() {
  const char* v = std::getenv("TCV_CUDA_WIDE_INDICES");
  if (v == nullptr || std::string(v).empty() || std::string(v) == "0") return false;
  TCV_CHECK(std::string(v) == "1", "TCV_CUDA_WIDE_INDICES must be 0 or 1, got '", v, "'");
  return true;
}
std::atomic<int> g_wide{-1};  // -1: not read from the environment yet
}  // namespace

void set_allow_tf32(bool allow) {
  g_tf32 = allow;
}
bool get_allow_tf32() {
  return g_tf32;
}
void set_cudnn_benchmark(bool on) {
  g_benchmark = on;
}
bool get_cudnn_benchmark() {
  return g_benchmark;
}
void set_force_wide_indices(bool on) {
  g_wide = on ? 1 : 0;
}
bool get_force_wide_indices() {
  int w = g_wide.load(std::memory_order_relaxed);
  if (w < 0) {
    w = wide_from_env() ? 1 : 0;
    g_wide = w;
  }
  return w == 1;
}

}  // namespace tcv::kernels::cuda
