#include "engine/backend.h"

#include "engine/allocator.h"
#include "engine/ops/elementwise.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/runtime.h"

namespace tcv::backend {

namespace cuda = kernels::cuda;

void require_device(const char* op, Device device, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    TCV_CHECK(!t->defined() || t->device() == device, "[", op, "] expects every tensor on ",
              device.str(), ", got one on ", t->device().str());
}

void* allocate(size_t nbytes, Device device) {
  if (device.is_cpu()) return CpuAllocator::instance().allocate(nbytes);
  return cuda::cached_malloc(nbytes, device.index);
}

void deallocate(void* ptr, size_t nbytes, Device device) {
  if (device.is_cpu())
    CpuAllocator::instance().deallocate(ptr, nbytes);
  else
    cuda::cached_free(ptr);
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  TCV_KERNEL(dst.device(), fill, dst.strided_desc(), value);
}

namespace {

/// Host to device. A pinned source goes on the copy stream, asynchronously:
/// the copy stream first waits for the compute stream (the destination block
/// may have been in use there), and the compute stream then waits for the
/// copy, so kernels queued after this see the bytes. The pinned block is not
/// reused before the copy has read it.
void copy_h2d(const Tensor& dst, const Tensor& src) {
  cuda::DeviceGuard guard(dst.device().index);
  const bool direct = src.dtype() == dst.dtype() && src.is_contiguous();
  Tensor s = direct ? src : src.to(dst.dtype()).contiguous();
  Tensor d = dst.is_contiguous()
                 ? dst
                 : empty(dst.shape(), {.dtype = dst.dtype(), .device = dst.device()});
  if (cuda::is_pinned(s.data_ptr())) {
    cuda::Stream compute = cuda::compute_stream();
    cuda::Stream copy = cuda::stream(dst.device().index, cuda::StreamKind::copy);
    cuda::stream_wait_stream(copy, compute);
    cuda::memcpy_h2d_async(d.data_ptr(), s.data_ptr(), d.nbytes(), copy);
    cuda::pinned_record_stream(s.data_ptr(), copy);
    cuda::stream_wait_stream(compute, copy);
  } else {
    cuda::memcpy_h2d_async(d.data_ptr(), s.data_ptr(), d.nbytes());
  }
  if (!dst.is_contiguous()) cuda::copy(dst.strided_desc(), d.strided_desc());
}

void copy_d2h(const Tensor& dst, const Tensor& src) {
  cuda::DeviceGuard guard(src.device().index);
  Tensor s = src;
  if (!src.is_contiguous()) {
    s = empty(src.shape(), {.dtype = src.dtype(), .device = src.device()});
    cuda::copy(s.strided_desc(), src.strided_desc());
  }
  if (dst.is_contiguous() && dst.dtype() == src.dtype()) {
    cuda::memcpy_d2h(dst.data_ptr(), s.data_ptr(), s.nbytes());
    return;
  }
  Tensor tmp = empty(src.shape(), {.dtype = src.dtype()});
  cuda::memcpy_d2h(tmp.data_ptr(), s.data_ptr(), s.nbytes());
  kernels::cpu::copy(dst.strided_desc(), tmp.strided_desc());
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  TCV_CHECK(dst.shape() == src.shape(), "[copy] shape ", src.shape_str(), " into ",
            dst.shape_str());
  if (dst.numel() == 0) return;
  const Device dd = dst.device(), sd = src.device();
  if (dd.is_cpu() && sd.is_cpu()) {
    profiler::Scope prof("copy", dd);
    kernels::cpu::copy(dst.strided_desc(), src.strided_desc());
  } else if (dd.is_cuda() && sd.is_cpu()) {
    copy_h2d(dst, src);
  } else if (dd.is_cpu() && sd.is_cuda()) {
    copy_d2h(dst, src);
  } else if (dd == sd) {
    cuda::DeviceGuard guard(dd.index);
    cuda::copy(dst.strided_desc(), src.strided_desc());
  } else {
    // Between GPUs: through the host (rare; peer copies are not worth the set-up here).
    copy(dst, src.to(kCPU));
  }
}

void binary_inplace(kernels::BinaryOp op, const Tensor& dst, const Tensor& other, double alpha) {
  const char* name = kernels::binary_op_name(op);
  require_device(name, dst.device(), {&other});
  Tensor o = other.dtype() == dst.dtype() ? other : other.to(dst.dtype());
  ops::broadcast_shapes(dst.shape(), o.shape(), name);
  if (dst.is_blocked() && o.shape() == dst.shape()) {  // stays blocked (other converted)
    TCV_KERNEL(dst.device(), binary, op, flat_desc(dst), flat_desc(dst), flat_desc(to_blocked(o)),
               alpha);
    return;
  }
  TCV_CHECK(o.dim() <= dst.dim(), "[", name, "_] cannot broadcast ", o.shape_str(), " into ",
            dst.shape_str());
  TCV_KERNEL(dst.device(), binary, op, dst.strided_desc(), dst.strided_desc(),
             o.expand(dst.shape()).detach().strided_desc(), alpha);
}

}  // namespace tcv::backend
