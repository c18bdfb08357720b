// Used when tcv is built without CUDA: no device, and a clear error if asked for one.
#include "kernels/base.h"
#include "kernels/cuda/runtime.h"

namespace tcv::kernels::cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  TCV_THROW("[", what, "] this build of tcv has no CUDA support (configure with TCV_WITH_CUDA=ON)");
}
}  // namespace

int device_count() { return 0; }
void* device_malloc(size_t, int) { no_cuda("cuda malloc"); }
void device_free(void*, int) {}
void memcpy_h2d(void*, const void*, size_t, int) { no_cuda("copy to cuda"); }
void memcpy_d2h(void*, const void*, size_t, int) { no_cuda("copy from cuda"); }
void fill_f32(float*, size_t, float, int) { no_cuda("fill"); }

}  // namespace tcv::kernels::cuda
