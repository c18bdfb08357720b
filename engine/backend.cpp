#include "engine/backend.h"

#include "engine/allocator.h"
#include "engine/ops/elementwise.h"
#include "kernels/cuda/runtime.h"

namespace tcv::backend {

void require_cpu(const char* op, const Tensor& t) {
  TCV_CHECK(t.device().is_cpu(), "[", op, "] has no CUDA implementation in this build (tensor on ",
            t.device().str(), ")");
}

void* allocate(size_t nbytes, Device device) {
  if (device.is_cpu()) return CpuAllocator::instance().allocate(nbytes);
  return kernels::cuda::device_malloc(nbytes, device.index);
}

void deallocate(void* ptr, size_t nbytes, Device device) {
  if (device.is_cpu())
    CpuAllocator::instance().deallocate(ptr, nbytes);
  else
    kernels::cuda::device_free(ptr, device.index);
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  require_cpu("fill", dst);
  kernels::cpu::fill(dst.k(), value);
}

void copy(const Tensor& dst, const Tensor& src) {
  TCV_CHECK(dst.shape() == src.shape(), "[copy] shape ", src.shape_str(), " into ",
            dst.shape_str());
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    kernels::cpu::copy(dst.k(), src.k());
    return;
  }
  // Between devices: bytes move contiguously in the source dtype; layout and
  // dtype changes happen on the CPU side.
  if (dst.device().is_cuda() && src.device().is_cpu()) {
    TCV_CHECK(dst.is_contiguous(), "[copy] host-to-device copy needs a contiguous destination");
    Tensor s = src.to(dst.dtype()).contiguous();
    kernels::cuda::memcpy_h2d(dst.data_ptr(), s.data_ptr(), dst.nbytes(), dst.device().index);
    return;
  }
  if (dst.device().is_cpu() && src.device().is_cuda()) {
    TCV_CHECK(src.is_contiguous(), "[copy] device-to-host copy needs a contiguous source");
    Tensor tmp = empty(src.shape(), {.dtype = src.dtype()});
    kernels::cuda::memcpy_d2h(tmp.data_ptr(), src.data_ptr(), src.nbytes(), src.device().index);
    kernels::cpu::copy(dst.k(), tmp.k());
    return;
  }
  TCV_THROW("[copy] device-to-device copies have no CUDA implementation in this build");
}

void binary_inplace(kernels::BinaryOp op, const Tensor& dst, const Tensor& other, double alpha) {
  require_cpu(kernels::binary_op_name(op), dst);
  require_cpu(kernels::binary_op_name(op), other);
  Tensor o = other.dtype() == dst.dtype() ? other : other.to(dst.dtype());
  ops::broadcast_shapes(dst.shape(), o.shape(), kernels::binary_op_name(op));
  TCV_CHECK(o.dim() <= dst.dim(), "[", kernels::binary_op_name(op), "_] cannot broadcast ",
            o.shape_str(), " into ", dst.shape_str());
  kernels::cpu::binary(op, dst.k(), dst.k(), o.expand(dst.shape()).detach().k(), alpha);
}

}  // namespace tcv::backend
