// The CUDA runtime as the rest of tcv sees it: devices, the three streams per
// device, events, the caching device allocator, pinned host buffers, copies.
//
// Streams: every device has one compute stream (all kernels of the engine run
// there), one copy stream (input batches from pinned memory) and one comm
// stream (NCCL). They are ordered with events, never with a device
// synchronize on the hot path.
//
// Builds without CUDA link runtime_stub.cpp instead: device_count() is 0 and
// everything else throws a clear error.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tcv::kernels::cuda {

/// A cudaStream_t, opaque to code that does not include the CUDA headers.
using Stream = void*;

enum class StreamKind : uint8_t { compute, copy, comm };

/// Number of visible devices; 0 when CUDA is absent or no device is present.
int device_count();
/// The calling thread's current device, and setting it (cheap when unchanged).
int current_device();
void set_device(int device);

/// Sets the current device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

/// The stream of that kind on `device` (created on first use, never destroyed).
Stream stream(int device, StreamKind kind = StreamKind::compute);
/// The compute stream of the current device: where the engine's kernels run.
Stream compute_stream();
/// Makes `waiter` wait for all work queued so far on `signaler` (an event, no host block).
void stream_wait_stream(Stream waiter, Stream signaler);
/// Blocks the host until everything queued on `s` has run.
void stream_synchronize(Stream s);
/// Blocks the host until everything on `device` has run.
void device_synchronize(int device);

/// A CUDA event (timing enabled when asked).
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(Stream s);
  /// Makes stream `s` wait for this event (no host block).
  void block(Stream s) const;
  void synchronize() const;
  bool query() const;
  /// Milliseconds between two recorded timing events.
  float elapsed_ms(const Event& end) const;
  void* raw() const { return event_; }

 private:
  void* event_ = nullptr;
};

/// Device memory through the caching allocator: size-binned free lists per
/// (device, stream), block splitting, no cudaMalloc once the cache is warm.
/// A block is reused only on the stream it was allocated for, unless
/// record_stream() marked it as used elsewhere: then it is reused only after
/// those streams have passed the point of its release.
void* cached_malloc(size_t nbytes, int device, Stream s = nullptr);  // nullptr: compute stream
void cached_free(void* ptr);
/// Marks ptr (from cached_malloc) as used on stream s.
void record_stream(void* ptr, Stream s);

struct DeviceMemoryStats {
  int64_t allocated = 0;       ///< bytes in live blocks
  int64_t reserved = 0;        ///< bytes obtained with cudaMalloc (live + cached)
  int64_t peak_allocated = 0;  ///< high-water mark of allocated
  int64_t peak_reserved = 0;
  int64_t num_mallocs = 0;  ///< cudaMalloc calls
  int64_t num_frees = 0;    ///< cudaFree calls
};
DeviceMemoryStats memory_stats(int device);
void reset_peak_memory(int device);
/// Returns every cached, unused block of every device to the driver.
void empty_cache();

/// Page-locked host memory, cached like device blocks. A block freed after an
/// async copy is reused only once that copy's stream has passed the free point.
void* pinned_malloc(size_t nbytes);
void pinned_free(void* ptr);
/// Marks a pinned block as read or written by work queued on `s`.
void pinned_record_stream(void* ptr, Stream s);
bool is_pinned(const void* ptr);

/// Copies queued on a stream (nullptr: the compute stream of the current device).
void memcpy_h2d_async(void* dst, const void* src, size_t nbytes, Stream s = nullptr);
void memcpy_d2d_async(void* dst, const void* src, size_t nbytes, Stream s = nullptr);
/// Waits for the stream, then returns with the bytes on the host.
void memcpy_d2h(void* dst, const void* src, size_t nbytes, Stream s = nullptr);

/// Throws "[fn] needs CUDA, which this build of tcv does not have".
[[noreturn]] void unavailable(const char* fn);

}  // namespace tcv::kernels::cuda
