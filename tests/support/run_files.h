// Test helpers for what a training run leaves behind: text files, the lines
// of metrics.jsonl, checkpoints compared byte for byte, and small slices of
// Fashion-MNIST (Debian's dataset-fashion-mnist) written as raw IDX files for
// runs that take a second.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "engine/error.h"
#include "engine/json.h"
#include "engine/serialize.h"
#include "engine/tensor.h"

namespace tcv::testing {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// The whole file as bytes ("" when it cannot be opened).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A JSON file's value; a file that cannot be opened is an error naming it.
inline Json read_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  TCV_CHECK(f.good(), "cannot open ", p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return json_parse(ss.str());
}

/// The JSON values of a JSON-lines file, empty lines skipped.
inline std::vector<Json> read_jsonl(const std::filesystem::path& p) {
  std::vector<Json> out;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(json_parse(line));
  return out;
}

/// The rows of `run`'s metrics.jsonl whose "split" is `split`, in file order.
inline std::vector<Json> split_rows(const std::filesystem::path& run, const std::string& split) {
  std::vector<Json> v;
  for (auto& j : read_jsonl(run / "metrics.jsonl"))
    if (json_string(j, "split") == split) v.push_back(j);
  return v;
}

/// Every tensor of two checkpoints holds the same bytes (same names, shapes
/// and dtypes in the same order). With `with_optimizer` the files must also
/// carry optimizer state ("optim." tensors), which is compared the same way.
inline void expect_bitwise_equal(const std::filesystem::path& a, const std::filesystem::path& b,
                                 bool with_optimizer = true) {
  const auto wa = load_safetensors(a.string()).tensors;
  const auto wb = load_safetensors(b.string()).tensors;
  ASSERT_EQ(wa.size(), wb.size());
  int optim = 0, differ = 0;
  for (size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wa[i].first, wb[i].first);
    const Tensor& x = wa[i].second;
    const Tensor& y = wb[i].second;
    ASSERT_EQ(x.shape(), y.shape()) << wa[i].first;
    ASSERT_EQ(x.dtype(), y.dtype()) << wa[i].first;
    ASSERT_TRUE(x.is_contiguous() && y.is_contiguous()) << wa[i].first;
    const bool same = std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
    EXPECT_TRUE(same) << wa[i].first;
    differ += !same;
    optim += wa[i].first.rfind("optim.", 0) == 0;
  }
  if (with_optimizer) {
    EXPECT_GT(optim, 0);
  }
  std::printf("compared %zu tensors (%d optimizer): %d differ\n", wa.size(), optim, differ);
}

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

/// The first images of each Fashion-MNIST split, as IDX files in `dir`.
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
