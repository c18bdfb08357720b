// The CUDA runtime: the caching allocator (reuse, splitting, statistics,
// stream safety, empty_cache), pinned host memory, and copies between the
// host and the device in every direction, dtype and layout.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/cuda/runtime.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

namespace cuda = kernels::cuda;
using testing::expect_close;
using testing::iota;
const Device kGPU(DeviceType::CUDA, 0);

TEST(CudaAllocator, ReusesFreedBlocksWithoutCudaMalloc) {
  TCV_REQUIRE_CUDA();
  cuda::set_device(0);
  void* a = cuda::cached_malloc(3 << 20, 0);
  cuda::cached_free(a);
  const auto before = cuda::memory_stats(0);
  void* b = cuda::cached_malloc(3 << 20, 0);
  const auto after = cuda::memory_stats(0);
  EXPECT_EQ(a, b) << "the same-size request on the same stream reuses the cached block";
  EXPECT_EQ(after.num_mallocs, before.num_mallocs);
  EXPECT_EQ(after.allocated - before.allocated, 3 << 20);
  cuda::cached_free(b);
}

TEST(CudaAllocator, SmallRequestsShareOneSegment) {
  TCV_REQUIRE_CUDA();
  cuda::empty_cache();
  const auto s0 = cuda::memory_stats(0);
  std::vector<void*> ps;
  for (int i = 0; i < 64; ++i) ps.push_back(cuda::cached_malloc(1000, 0));
  const auto s1 = cuda::memory_stats(0);
  EXPECT_LE(s1.num_mallocs - s0.num_mallocs, 1) << "64 KiB of small blocks from one 2 MiB segment";
  for (size_t i = 1; i < ps.size(); ++i) EXPECT_NE(ps[i], ps[i - 1]);
  for (void* p : ps) cuda::cached_free(p);
  const auto s2 = cuda::memory_stats(0);
  EXPECT_EQ(s2.allocated, s0.allocated);
  cuda::empty_cache();
  const auto s3 = cuda::memory_stats(0);
  EXPECT_LT(s3.reserved, s1.reserved) << "empty_cache returns whole free segments";
}

TEST(CudaAllocator, PeakAndReset) {
  TCV_REQUIRE_CUDA();
  cuda::reset_peak_memory(0);
  const auto s0 = cuda::memory_stats(0);
  {
    Tensor t = empty({1 << 20}, {.device = kGPU});  // 4 MiB
    EXPECT_GE(cuda::memory_stats(0).peak_allocated, s0.allocated + (4 << 20));
  }
  EXPECT_EQ(cuda::memory_stats(0).allocated, s0.allocated);
  cuda::reset_peak_memory(0);
  EXPECT_EQ(cuda::memory_stats(0).peak_allocated, s0.allocated);
}

TEST(CudaAllocator, BlocksAreKeptPerStream) {
  TCV_REQUIRE_CUDA();
  cuda::Stream copy = cuda::stream(0, cuda::StreamKind::copy);
  void* a = cuda::cached_malloc(5 << 20, 0, copy);
  cuda::cached_free(a);
  void* b = cuda::cached_malloc(5 << 20, 0);  // compute stream
  EXPECT_NE(a, b) << "a block freed on the copy stream is not handed to the compute stream";
  cuda::cached_free(b);
}

TEST(CudaAllocator, RecordStreamDelaysReuse) {
  TCV_REQUIRE_CUDA();
  // A block used on the comm stream is not reused before that stream has passed the free.
  cuda::Stream comm = cuda::stream(0, cuda::StreamKind::comm);
  Tensor t = full({1 << 20}, 3.0, {.device = kGPU});
  cuda::record_stream(t.data_ptr(), comm);
  void* p = t.data_ptr();
  t = Tensor();
  cuda::stream_synchronize(comm);
  void* q = cuda::cached_malloc(4 << 20, 0);
  EXPECT_EQ(p, q) << "after the comm stream passed, the block is reusable";
  cuda::cached_free(q);
}

TEST(CudaAllocator, OutOfMemoryNamesTheSize) {
  TCV_REQUIRE_CUDA();
  const std::string msg =
      testing::error_of([] { cuda::cached_malloc(size_t(1) << 50, 0); });  // 1 PiB
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
}

TEST(CudaCopy, RoundTripsEveryDType) {
  TCV_REQUIRE_CUDA();
  for (DType dt : testing::kAllDTypes) {
    Tensor h = iota({3, 5, 7}, dt);
    Tensor d = h.to(kGPU);
    ASSERT_TRUE(d.device().is_cuda());
    expect_close(d.to(kCPU), h, 0, 0, dtype_name(dt));
  }
}

TEST(CudaCopy, StridedAndConvertingCopies) {
  TCV_REQUIRE_CUDA();
  Tensor h = randn({6, 10}, {.dtype = DType::f64});
  Tensor d = h.to(kGPU);
  // Non-contiguous device source to host.
  expect_close(d.transpose(0, 1).to(kCPU), h.transpose(0, 1), 0, 0, "transpose d2h");
  // Device-to-device with dtype change and a strided destination.
  Tensor dst = zeros({10, 6}, {.dtype = DType::f32, .device = kGPU});
  dst.copy_(d.transpose(0, 1));
  expect_close(dst.to(kCPU), h.transpose(0, 1).to(DType::f32), 0, 0, "d2d convert");
  Tensor half = d.to(DType::bf16);
  expect_close(half.to(kCPU), h.to(DType::bf16), 0, 0, "f64 -> bf16 on the device");
  // Host to a strided device view.
  Tensor big = zeros({10, 12}, {.dtype = DType::f64, .device = kGPU});
  big.slice(1, 0, 12, 2).copy_(h.transpose(0, 1));
  expect_close(big.to(kCPU).slice(1, 0, 12, 2), h.transpose(0, 1), 0, 0, "h2d strided dst");
  // Broadcast source.
  Tensor row = arange(0, 6, 1, {.dtype = DType::f32, .device = kGPU});
  Tensor bc = empty({4, 6}, {.device = kGPU});
  bc.copy_(row.expand({4, 6}));
  expect_close(bc.to(kCPU), arange(0, 6, 1).expand({4, 6}), 0, 0, "broadcast d2d");
}

TEST(CudaCopy, PinnedHostToDeviceIsOrderedBeforeKernels) {
  TCV_REQUIRE_CUDA();
  for (int round = 0; round < 20; ++round) {
    Tensor h = full({1 << 18}, double(round), {.pinned = true});
    ASSERT_TRUE(h.is_pinned());
    Tensor d = h.to(kGPU);
    h = Tensor();  // the pinned block must not be reused before the copy has read it
    Tensor other = full({1 << 18}, -1.0, {.pinned = true});
    Tensor s = ops::sum(d).to(kCPU);
    EXPECT_DOUBLE_EQ(s.item<double>(), double(round) * (1 << 18)) << "round " << round;
  }
}

TEST(CudaCopy, PinMemory) {
  TCV_REQUIRE_CUDA();
  Tensor h = randn({100});
  EXPECT_FALSE(h.is_pinned());
  Tensor p = h.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  expect_close(p, h, 0, 0);
  EXPECT_EQ(p.pin_memory().data_ptr(), p.data_ptr());
}

TEST(CudaDevice, EventsTimeAndOrderStreams) {
  TCV_REQUIRE_CUDA();
  cuda::Event start(true), end(true);
  start.record(nullptr);
  Tensor t = full({1 << 20}, 1.0, {.device = kGPU});
  end.record(nullptr);
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_ms(end), 0.0f);
}

TEST(CudaDevice, BadDeviceIndexIsAnError) {
  TCV_REQUIRE_CUDA();
  const std::string msg = testing::error_of(
      [] { empty({4}, {.device = Device(DeviceType::CUDA, cuda::device_count() + 3)}); });
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tcv
