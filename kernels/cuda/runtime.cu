// Devices, streams, events, copies. The caching allocators live in allocator.cu.
#include <array>
#include <mutex>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"

namespace tcv::kernels::cuda {

namespace {
constexpr int kMaxDevices = 16;
thread_local int tls_device = -1;

struct DeviceStreams {
  std::once_flag once;
  std::array<cudaStream_t, 3> streams{};
};
DeviceStreams g_streams[kMaxDevices];

cudaStream_t resolve(Stream s) {
  return s ? static_cast<cudaStream_t>(s) : static_cast<cudaStream_t>(compute_stream());
}
}  // namespace

[[noreturn]] void unavailable(const char* fn) {
  TCV_THROW("[", fn, "] needs CUDA, which this build of tcv does not have");
}

int device_count() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error
      return 0;
    }
    return count;
  }();
  return n;
}

int current_device() {
  if (tls_device < 0) TCV_CUDA_CHECK(cudaGetDevice(&tls_device));
  return tls_device;
}

void set_device(int device) {
  if (device == tls_device) return;
  TCV_CHECK(device >= 0 && device < device_count(), "[cuda] device ", device, " does not exist (",
            device_count(), " visible)");
  TCV_CUDA_CHECK(cudaSetDevice(device));
  tls_device = device;
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()) {
  set_device(device);
}
DeviceGuard::~DeviceGuard() {
  if (previous_ != tls_device) {
    cudaSetDevice(previous_);
    tls_device = previous_;
  }
}

Stream stream(int device, StreamKind kind) {
  TCV_CHECK(device >= 0 && device < kMaxDevices && device < device_count(), "[cuda] device ",
            device, " does not exist (", device_count(), " visible)");
  DeviceStreams& ds = g_streams[device];
  std::call_once(ds.once, [&] {
    DeviceGuard guard(device);
    for (auto& s : ds.streams) TCV_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  });
  return ds.streams[static_cast<int>(kind)];
}

Stream compute_stream() {
  return stream(current_device(), StreamKind::compute);
}

void stream_wait_stream(Stream waiter, Stream signaler) {
  if (waiter == signaler) return;
  Event e;
  e.record(signaler);
  e.block(waiter);
}

void stream_synchronize(Stream s) {
  TCV_CUDA_CHECK(cudaStreamSynchronize(resolve(s)));
}

void device_synchronize(int device) {
  DeviceGuard guard(device);
  TCV_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- events ------------------------------------------------------------------

Event::Event(bool timing) {
  cudaEvent_t e;
  TCV_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  event_ = e;
}
Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
Event::Event(Event&& other) noexcept : event_(other.event_) {
  other.event_ = nullptr;
}
Event& Event::operator=(Event&& other) noexcept {
  std::swap(event_, other.event_);
  return *this;
}
void Event::record(Stream s) {
  TCV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), resolve(s)));
}
void Event::block(Stream s) const {
  TCV_CUDA_CHECK(cudaStreamWaitEvent(resolve(s), static_cast<cudaEvent_t>(event_), 0));
}
void Event::synchronize() const {
  TCV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}
bool Event::query() const {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (err == cudaErrorNotReady) return false;
  TCV_CUDA_CHECK(err);
  return true;
}
float Event::elapsed_ms(const Event& end) const {
  float ms = 0;
  TCV_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_),
                                      static_cast<cudaEvent_t>(end.event_)));
  return ms;
}

// ---- copies ------------------------------------------------------------------

void memcpy_h2d_async(void* dst, const void* src, size_t nbytes, Stream s) {
  if (nbytes == 0) return;
  TCV_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, resolve(s)));
}

void memcpy_d2d_async(void* dst, const void* src, size_t nbytes, Stream s) {
  if (nbytes == 0) return;
  TCV_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, resolve(s)));
}

void memcpy_d2h(void* dst, const void* src, size_t nbytes, Stream s) {
  if (nbytes == 0) return;
  cudaStream_t st = resolve(s);
  TCV_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, st));
  TCV_CUDA_CHECK(cudaStreamSynchronize(st));
}

}  // namespace tcv::kernels::cuda
