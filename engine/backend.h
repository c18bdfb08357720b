// The device-dispatch points for the engine's own primitives (allocation,
// fill, copy, in-place arithmetic). Ops dispatch in their own files.
#pragma once

#include "engine/tensor.h"
#include "kernels/cpu/elementwise.h"

namespace tcv::backend {

void* allocate(size_t nbytes, Device device);
void deallocate(void* ptr, size_t nbytes, Device device);
/// dst = value.
void fill(const Tensor& dst, double value);
/// dst = src (same shape, any dtypes and layouts; devices may differ).
void copy(const Tensor& dst, const Tensor& src);
/// dst = dst op other (other broadcast to dst), for add: dst += alpha·other.
void binary_inplace(kernels::BinaryOp op, const Tensor& dst, const Tensor& other, double alpha);

/// Throws "[op] has no CUDA implementation in this build" unless t is on the CPU.
void require_cpu(const char* op, const Tensor& t);

}  // namespace tcv::backend
