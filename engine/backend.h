// The device-dispatch points for the engine's own primitives (allocation,
// fill, copy, in-place arithmetic). Ops dispatch in their own files.
#pragma once

#include "engine/profiler.h"
#include "engine/tensor.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/runtime.h"

namespace tcv::backend {

void* allocate(size_t nbytes, Device device);
void deallocate(void* ptr, size_t nbytes, Device device);
/// dst = value.
void fill(const Tensor& dst, double value);
/// dst = src (same shape, any dtypes and layouts; devices may differ).
void copy(const Tensor& dst, const Tensor& src);
/// dst = dst op other (other broadcast to dst), for add: dst += alpha·other.
void binary_inplace(kernels::BinaryOp op, const Tensor& dst, const Tensor& other, double alpha);

/// Throws unless every tensor is on `device`, naming the op and both devices.
void require_device(const char* op, Device device, std::initializer_list<const Tensor*> ts);

}  // namespace tcv::backend

/// Runs kernels::cpu::fn(args...) for a CPU device, else kernels::cuda::fn(args...)
/// with that GPU current. Both namespaces declare fn with the same signature.
/// Each call is a profiler::Scope named fn (engine/profiler.h).
#define TCV_KERNEL(device, fn, ...)                                 \
  do {                                                              \
    const ::tcv::Device tcv_dev_ = (device);                        \
    if (tcv_dev_.is_cpu()) {                                        \
      ::tcv::profiler::Scope tcv_prof_(#fn, tcv_dev_);              \
      ::tcv::kernels::cpu::fn(__VA_ARGS__);                         \
    } else {                                                        \
      ::tcv::kernels::cuda::DeviceGuard tcv_guard_(tcv_dev_.index); \
      ::tcv::profiler::Scope tcv_prof_(#fn, tcv_dev_);              \
      ::tcv::kernels::cuda::fn(__VA_ARGS__);                        \
    }                                                               \
  } while (0)
