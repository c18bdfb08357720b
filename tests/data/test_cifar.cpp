#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "data/cifar.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

using namespace tcv;
using namespace tcv::data;
namespace fs = std::filesystem;

namespace {

using tcv::testing::error_of;
using tcv::testing::TempDir;

// Record r: label bytes, then pixel k of the 3072 = (r * 7 + k) % 256.
std::string records(int n, const std::vector<std::vector<uint8_t>>& labels) {
  std::string b;
  for (int r = 0; r < n; ++r) {
    for (uint8_t l : labels[r]) b.push_back(static_cast<char>(l));
    for (int k = 0; k < 3072; ++k) b.push_back(static_cast<char>((r * 7 + k) % 256));
  }
  return b;
}

void write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST(Cifar, Reads10) {
  TempDir d;
  write(d.path("test_batch.bin"), records(3, {{3}, {9}, {0}}));
  const auto ds = load_cifar(d.path(""), CifarKind::cifar10, false);
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.num_classes(), 10);
  EXPECT_EQ(ds.images().shape(), (Shape{3, 3, 32, 32}));
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{3, 9, 0}));
  const auto px = ds.images().to_vector<uint8_t>();
  // Record 1: red (0, 0) = 7, green (0, 0) = (7 + 1024) % 256, blue (31, 31) = (7 + 3071) % 256.
  EXPECT_EQ(px[3072], 7);
  EXPECT_EQ(px[3072 + 1024], (7 + 1024) % 256);
  EXPECT_EQ(px[2 * 3072 - 1], (7 + 3071) % 256);
}

TEST(Cifar, ReadsTrainBatchesInOrderAndSubdirectory) {
  TempDir d;
  for (int k = 1; k <= 5; ++k)
    write(d.path("cifar-10-batches-bin/data_batch_" + std::to_string(k) + ".bin"),
          records(1, {{static_cast<uint8_t>(k)}}));
  const auto ds = load_cifar(d.path(""), CifarKind::cifar10, true);
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  fs::remove(d.path("cifar-10-batches-bin/data_batch_4.bin"));
  const std::string msg = error_of([&] { load_cifar(d.path(""), CifarKind::cifar10, true); });
  EXPECT_NE(msg.find("data_batch_4.bin"), std::string::npos) << msg;
}

TEST(Cifar, Reads100FineAndCoarse) {
  TempDir d;
  write(d.path("train.bin"), records(3, {{19, 99}, {0, 5}, {7, 42}}));
  const auto fine = load_cifar(d.path(""), CifarKind::cifar100, true);
  EXPECT_EQ(fine.num_classes(), 100);
  EXPECT_EQ(fine.labels().to_vector<int64_t>(), (std::vector<int64_t>{99, 5, 42}));
  const auto coarse = load_cifar(d.path(""), CifarKind::cifar100, true, CifarLabel::coarse);
  EXPECT_EQ(coarse.num_classes(), 20);
  EXPECT_EQ(coarse.labels().to_vector<int64_t>(), (std::vector<int64_t>{19, 0, 7}));
  EXPECT_EQ(fine.images().to_vector<uint8_t>()[3072 * 2], 14);  // record 2, first pixel
}

TEST(Cifar, CorruptFilesAreErrorsNamingThem) {
  TempDir d;
  const std::string trunc = d.path("short.bin");
  write(trunc, records(3, {{1}, {2}, {3}}).substr(0, 3 * 3073 - 10));
  std::string msg = error_of([&] { read_cifar({trunc}, CifarKind::cifar10); });
  EXPECT_NE(msg.find(trunc), std::string::npos) << msg;
  EXPECT_NE(msg.find("3073"), std::string::npos) << msg;
  const std::string bad_label = d.path("label.bin");
  write(bad_label, records(2, {{1}, {10}}));
  msg = error_of([&] { read_cifar({bad_label}, CifarKind::cifar10); });
  EXPECT_NE(msg.find(bad_label), std::string::npos) << msg;
  EXPECT_NE(msg.find("record 1"), std::string::npos) << msg;
  // A CIFAR-10 file read as CIFAR-100 (3 x 3073 is not a multiple of 3074).
  write(trunc, records(3, {{1}, {2}, {3}}));
  EXPECT_THROW(read_cifar({trunc}, CifarKind::cifar100), Error);
  const std::string empty = d.path("empty.bin");
  write(empty, "");
  EXPECT_NE(error_of([&] { read_cifar({empty}, CifarKind::cifar10); }).find(empty),
            std::string::npos);
  msg = error_of([&] { read_cifar({d.path("none.bin")}, CifarKind::cifar10); });
  EXPECT_NE(msg.find("none.bin"), std::string::npos) << msg;
}
