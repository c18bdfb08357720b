// Which GPU libraries a process maps. cuBLAS (and with it cuBLASLt, about
// 150 MiB resident) is opened by the first GEMM on a GPU, never at load time, so
// CPU runs of a CUDA build stay as small as those of a CPU-only build.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "engine/device.h"
#include "engine/ops.h"
#include "engine/rng.h"

namespace tcv {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

TEST(CudaLibraries, CpuWorkDoesNotLoadCublas) {
  Tensor a = randn({64, 64});
  Tensor x = randn({2, 16, 8, 8});
  Tensor w = randn({16, 16, 3, 3});
  EXPECT_EQ(ops::matmul(a, a).shape(), (Shape{64, 64}));
  EXPECT_EQ(ops::conv2d(x, w).shape(), (Shape{2, 16, 6, 6}));
  EXPECT_FALSE(mapped("libcublas")) << "cuBLAS was loaded by CPU work";
  if (!cuda_is_available()) return;
  // The first GEMM on a GPU opens it.
  Tensor g = a.to(Device::parse("cuda"));
  EXPECT_NEAR(ops::matmul(g, g).to(Device::parse("cpu")).to_vector<float>()[0],
              ops::matmul(a, a).to_vector<float>()[0], 1e-3);
  EXPECT_TRUE(mapped("libcublas.so"));
}

}  // namespace
}  // namespace tcv
