// The CUDA runtime as the engine sees it: device count, memory, copies.
// Builds without CUDA get stubs (runtime_stub.cpp) that report no device.
#pragma once

#include <cstddef>

namespace tcv::kernels::cuda {

/// Number of visible devices; 0 when CUDA is absent or no device is present.
int device_count();
void* device_malloc(size_t nbytes, int device);
void device_free(void* ptr, int device);
void memcpy_h2d(void* dst, const void* src, size_t nbytes, int device);
void memcpy_d2h(void* dst, const void* src, size_t nbytes, int device);
/// Fills n floats with value on the device (a smoke kernel for the toolchain).
void fill_f32(float* dst, size_t n, float value, int device);

}  // namespace tcv::kernels::cuda
