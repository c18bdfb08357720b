// Test helper: small slices of Fashion-MNIST (Debian's dataset-fashion-mnist)
// written as raw IDX files, for training runs that take a second.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/idx.h"
#include "engine/tensor.h"

namespace tcv::testing {

/// Writes the first n samples of an IDX tensor (u8) as a raw IDX file.
inline void write_idx_head(const Tensor& t, int64_t n, const std::filesystem::path& p) {
  std::string out("\0\0\x08", 3);
  out += static_cast<char>(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    const auto v = static_cast<uint32_t>(d == 0 ? n : t.size(d));
    for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((v >> s) & 0xff);
  }
  const int64_t per = t.numel() / t.size(0);
  out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(n * per));
  std::ofstream(p, std::ios::binary) << out;
}

/// The first n images of each Fashion-MNIST split, as IDX files in `dir`.
inline void write_small_fmnist(const std::filesystem::path& dir, int64_t n_train, int64_t n_test) {
  std::filesystem::create_directories(dir);
  const std::string src = "/usr/share/datasets/fashion-mnist/";
  write_idx_head(data::read_idx(src + "train-images-idx3-ubyte.gz"), n_train,
                 dir / "train-images-idx3-ubyte");
  write_idx_head(data::read_idx(src + "train-labels-idx1-ubyte.gz"), n_train,
                 dir / "train-labels-idx1-ubyte");
  write_idx_head(data::read_idx(src + "t10k-images-idx3-ubyte.gz"), n_test,
                 dir / "t10k-images-idx3-ubyte");
  write_idx_head(data::read_idx(src + "t10k-labels-idx1-ubyte.gz"), n_test,
                 dir / "t10k-labels-idx1-ubyte");
}

}  // namespace tcv::testing
