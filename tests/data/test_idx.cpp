#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "data/idx.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using tcv::data::read_idx;

namespace {

const std::string kDir = "/usr/share/datasets/fashion-mnist/";

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// tiny_idx() compressed by Python's gzip.compress(mtime=0): the library links zlib
// privately, so the tests bring their gzip bytes along.
std::string tiny_idx_gz() {
  return std::string(
      "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\x63\x60\xe0\x60\x62\x60\x60\x00\x61\x66"
      "\x46\x26\x66\x16\x56\x36\x00\x48\x94\x3e\xe5\x12\x00\x00\x00",
      35);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A 2x3 u8 IDX file holding 1..6.
std::string tiny_idx() {
  return std::string("\0\0\x08\x02\0\0\0\x02\0\0\0\x03\x01\x02\x03\x04\x05\x06", 18);
}

// Expects `fn` to throw a tcv::Error whose message contains every needle.
template <typename F>
void expect_error(F fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const tcv::Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << n;
  }
}

}  // namespace

TEST(Idx, ReadsFashionMnistTrainImages) {
  const tcv::Tensor t = read_idx(kDir + "train-images-idx3-ubyte.gz");
  EXPECT_EQ(t.dtype(), tcv::DType::u8);
  EXPECT_EQ(t.shape(), (tcv::Shape{60000, 28, 28}));
  // The first image is an ankle boot: dark corner, bright middle.
  const uint8_t* p = t.data<uint8_t>();
  EXPECT_EQ(p[0], 0);
  int64_t sum = 0;
  for (int64_t i = 0; i < 784; ++i) sum += p[i];
  EXPECT_GT(sum, 784 * 40);
}

TEST(Idx, ReadsFashionMnistLabels) {
  const tcv::Tensor train = read_idx(kDir + "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(train.shape(), (tcv::Shape{60000}));
  const auto y = train.to_vector<int64_t>();
  // The first training labels of Fashion-MNIST.
  const std::vector<int64_t> first{9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
  EXPECT_EQ(std::vector<int64_t>(y.begin(), y.begin() + 10), first);
  std::vector<int64_t> counts(10, 0);
  for (auto v : y) ++counts.at(v);
  for (auto c : counts) EXPECT_EQ(c, 6000);  // balanced classes

  const tcv::Tensor test = read_idx(kDir + "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(test.shape(), (tcv::Shape{10000}));
  EXPECT_EQ(test.to_vector<int64_t>()[0], 9);
}

TEST(Idx, RawAndGzipGiveTheSameTensor) {
  const tcv::testing::TempDir tmp("idx");
  const fs::path d = tmp.root();
  write(d / "raw-idx", tiny_idx());
  write(d / "gz-idx.gz", tiny_idx_gz());
  const auto a = read_idx((d / "raw-idx").string());
  const auto b = read_idx((d / "gz-idx.gz").string());
  EXPECT_EQ(a.shape(), (tcv::Shape{2, 3}));
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.to_vector<int64_t>(), a.to_vector<int64_t>());
}

TEST(Idx, BigEndianInt32AndFloat) {
  // 0x0C (i32), 1 dim of 2: -2, 258.
  const std::string i32("\0\0\x0C\x01\0\0\0\x02\xff\xff\xff\xfe\0\0\x01\x02", 16);
  const auto t = tcv::data::parse_idx(i32, "i32");
  EXPECT_EQ(t.dtype(), tcv::DType::i32);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{-2, 258}));
  // 0x0D (f32), 1 dim of 1: 1.5f = 0x3fc00000.
  const std::string f32("\0\0\x0D\x01\0\0\0\x01\x3f\xc0\0\0", 12);
  EXPECT_EQ(tcv::data::parse_idx(f32, "f32").to_vector<float>()[0], 1.5f);
}

TEST(Idx, CorruptFilesNameTheFile) {
  const tcv::testing::TempDir tmp("idx");
  const fs::path d = tmp.root();
  const std::string full = tiny_idx();

  const std::string trunc = (d / "truncated-idx").string();
  write(trunc, full.substr(0, full.size() - 2));
  expect_error([&] { read_idx(trunc); }, {trunc, "truncated", "need 18 bytes"});

  const std::string magic = (d / "bad-magic-idx").string();
  write(magic, "\x01\x02" + full.substr(2));
  expect_error([&] { read_idx(magic); }, {magic, "not an IDX file"});

  const std::string code = (d / "bad-code-idx").string();
  std::string c = full;
  c[2] = 0x07;
  write(code, c);
  expect_error([&] { read_idx(code); }, {code, "type code"});

  const std::string crc = (d / "bad-crc.gz").string();
  std::string zc = tiny_idx_gz();
  zc[zc.size() - 6] ^= 0x55;  // inside the CRC-32 trailer
  write(crc, zc);
  expect_error([&] { read_idx(crc); }, {crc, "corrupt gzip"});

  const std::string garbage = (d / "garbage.gz").string();
  write(garbage, std::string("\x1f\x8b\x08\x00", 4) + std::string(64, 'x'));
  expect_error([&] { read_idx(garbage); }, {garbage, "gzip"});

  const std::string gz_trunc = (d / "truncated.gz").string();
  const std::string z = slurp(kDir + "t10k-labels-idx1-ubyte.gz");
  ASSERT_GT(z.size(), 1000u);
  write(gz_trunc, z.substr(0, z.size() / 2));
  expect_error([&] { read_idx(gz_trunc); }, {gz_trunc, "gzip"});

  const std::string missing = (d / "does-not-exist").string();
  expect_error([&] { read_idx(missing); }, {missing, "cannot open"});
}

TEST(Idx, ZeroDimBesideHugeDimsIsAnError) {
  // Found by fuzz_idx: i8, 6 dims (0, 2305, 3, 4286545792, 32768, 16908288) hold
  // no element, so the 28 bytes are the whole file, but the strides of such a
  // tensor overflow int64 (undefined behaviour when it was made).
  const std::string bytes(
      "\x00\x00\x09\x06\x00\x00\x00\x00\x00\x00\x09\x01\x00\x00\x00\x03"
      "\xff\x7f\x7f\x80\x00\x00\x80\x00\x01\x02\x00\x00",
      28);
  expect_error([&] { tcv::data::parse_idx(bytes, "fuzz-idx"); },
               {"fuzz-idx", "IDX dims (0, 2305, 3, 4286545792", "too large"});
  // A zero dim beside ordinary ones is still an empty tensor.
  const std::string empty("\0\0\x08\x03\0\0\0\0\0\0\0\x1c\0\0\0\x1c", 16);
  EXPECT_EQ(tcv::data::parse_idx(empty, "empty").shape(), (tcv::Shape{0, 28, 28}));
}

TEST(Idx, EmptyU8FileParsesWithoutCopyingFromNowhere) {
  // Found by fuzz_idx (UBSan: null pointer passed to memcpy): u8 dims
  // (458752, 7168, 0) hold no element; the copy into the tensor, which has no
  // memory, was made anyway.
  const std::string bytes("\x00\x00\x08\x03\x00\x07\x00\x00\x00\x00\x1c\x00\x00\x00\x00\x00", 16);
  const tcv::Tensor t = tcv::data::parse_idx(bytes, "fuzz-idx");
  EXPECT_EQ(t.shape(), (tcv::Shape{458752, 7168, 0}));
  EXPECT_EQ(t.numel(), 0);
}
