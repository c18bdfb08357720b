// The CUDA runtime as code above the engine sees it, as tcv::cuda: devices,
// the compute/copy/comm streams and events, the caching device allocator and
// its statistics. It is built with the CUDA kernels (kernels/cuda/runtime.h;
// builds without CUDA report no device and throw a clear error elsewhere), and
// reached from above the engine through this header only.
#pragma once

#include "kernels/cuda/runtime.h"

namespace tcv::cuda {

using kernels::cuda::cached_free;
using kernels::cuda::cached_malloc;
using kernels::cuda::compute_stream;
using kernels::cuda::current_device;
using kernels::cuda::device_count;
using kernels::cuda::device_synchronize;
using kernels::cuda::DeviceGuard;
using kernels::cuda::DeviceMemoryStats;
using kernels::cuda::empty_cache;
using kernels::cuda::Event;
using kernels::cuda::memory_stats;
using kernels::cuda::record_stream;
using kernels::cuda::reset_peak_memory;
using kernels::cuda::set_device;
using kernels::cuda::Stream;
using kernels::cuda::stream;
using kernels::cuda::stream_synchronize;
using kernels::cuda::stream_wait_stream;
using kernels::cuda::StreamKind;

}  // namespace tcv::cuda
