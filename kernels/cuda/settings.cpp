// The CUDA backend's switches live in plain C++ so every build has them.
#include <atomic>

#include "kernels/cuda/settings.h"

namespace tcv::kernels::cuda {

namespace {
std::atomic<bool> g_tf32{false};
std::atomic<bool> g_benchmark{true};
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

}  // namespace tcv::kernels::cuda
