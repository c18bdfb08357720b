// How a CUDA kernel header declares its entry points so that one header
// serves both builds:
//
//   TCV_CUDA_API void softmax(...) TCV_CUDA_ENTRY;
//
// With CUDA this is a plain declaration, defined in the matching .cu file.
// Without it, an inline definition that throws "[softmax] needs CUDA ...":
// no stub files to keep in step with the real ones.
#pragma once

#include "kernels/cuda/runtime.h"

#if defined(TCV_WITH_CUDA)
#define TCV_CUDA_API
#define TCV_CUDA_ENTRY
#define TCV_CUDA_HEADER_BEGIN
#define TCV_CUDA_HEADER_END
#else
#define TCV_CUDA_API inline
#define TCV_CUDA_ENTRY \
  { ::tcv::kernels::cuda::unavailable(__func__); }
#define TCV_CUDA_HEADER_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"")
#define TCV_CUDA_HEADER_END _Pragma("GCC diagnostic pop")
#endif
