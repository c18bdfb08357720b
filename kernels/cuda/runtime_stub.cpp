// Used when tcv is built without CUDA: no device, and a clear error if asked for one.
#include "kernels/base.h"
#include "kernels/cuda/runtime.h"

namespace tcv::kernels::cuda {

[[noreturn]] void unavailable(const char* fn) {
  TCV_THROW("[", fn, "] needs CUDA, which this build of tcv does not have (configure with ",
            "TCV_WITH_CUDA=ON where nvcc is installed)");
}

int device_count() {
  return 0;
}
int current_device() {
  return 0;
}
void set_device(int) {
  unavailable("cuda set_device");
}
DeviceGuard::DeviceGuard(int) : previous_(0) {
  unavailable("cuda DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;
Stream stream(int, StreamKind) {
  unavailable("cuda stream");
}
Stream compute_stream() {
  unavailable("cuda stream");
}
void stream_wait_stream(Stream, Stream) {
  unavailable("cuda stream_wait_stream");
}
void stream_synchronize(Stream) {
  unavailable("cuda stream_synchronize");
}
void device_synchronize(int) {
  unavailable("cuda synchronize");
}

Event::Event(bool) {
  unavailable("cuda Event");
}
Event::~Event() = default;
Event::Event(Event&& other) noexcept : event_(other.event_) {}
Event& Event::operator=(Event&&) noexcept {
  return *this;
}
void Event::record(Stream) {
  unavailable("cuda Event");
}
void Event::block(Stream) const {
  unavailable("cuda Event");
}
void Event::synchronize() const {
  unavailable("cuda Event");
}
bool Event::query() const {
  unavailable("cuda Event");
}
float Event::elapsed_ms(const Event&) const {
  unavailable("cuda Event");
}

void* cached_malloc(size_t, int, Stream) {
  unavailable("cuda malloc");
}
void cached_free(void*) {}
void record_stream(void*, Stream) {}
DeviceMemoryStats memory_stats(int) {
  return {};
}
void reset_peak_memory(int) {}
void empty_cache() {}
void* pinned_malloc(size_t) {
  unavailable("pinned malloc");
}
void pinned_free(void*) {}
void pinned_record_stream(void*, Stream) {}
bool is_pinned(const void*) {
  return false;
}
void memcpy_h2d_async(void*, const void*, size_t, Stream) {
  unavailable("copy to cuda");
}
void memcpy_d2d_async(void*, const void*, size_t, Stream) {
  unavailable("cuda copy");
}
void memcpy_d2h(void*, const void*, size_t, Stream) {
  unavailable("copy from cuda");
}

}  // namespace tcv::kernels::cuda
