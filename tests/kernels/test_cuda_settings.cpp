// The CUDA backend's process-wide switches, which every build has (no GPU
// needed): defaults, setters, and TCV_CUDA_WIDE_INDICES read from the
// environment on first use, with a clear error for a bad value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/base.h"
#include "kernels/cuda/settings.h"

namespace tcv {
namespace {

namespace cu = kernels::cuda;

TEST(CudaSettings, WideIndicesFromTheEnvironmentThenSetters) {
  // First use in this process: the bad value is named, and nothing is cached.
  ::setenv("TCV_CUDA_WIDE_INDICES", "yes", 1);
  try {
    cu::get_force_wide_indices();
    FAIL() << "expected an error for TCV_CUDA_WIDE_INDICES=yes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TCV_CUDA_WIDE_INDICES must be 0 or 1, got 'yes'"),
              std::string::npos)
        << e.what();
  }
  ::setenv("TCV_CUDA_WIDE_INDICES", "1", 1);
  EXPECT_TRUE(cu::get_force_wide_indices());
  ::setenv("TCV_CUDA_WIDE_INDICES", "0", 1);
  EXPECT_TRUE(cu::get_force_wide_indices());  // read once, then kept
  cu::set_force_wide_indices(false);
  EXPECT_FALSE(cu::get_force_wide_indices());
  cu::set_force_wide_indices(true);
  EXPECT_TRUE(cu::get_force_wide_indices());
  cu::set_force_wide_indices(false);
  ::unsetenv("TCV_CUDA_WIDE_INDICES");
}

TEST(CudaSettings, Defaults) {
  EXPECT_FALSE(cu::get_allow_tf32());
  EXPECT_TRUE(cu::get_cudnn_benchmark());
}

}  // namespace
}  // namespace tcv
