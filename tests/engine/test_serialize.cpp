// safetensors files: round trips for every dtype, the exact byte layout, a
// golden file written by hand in Python, validation of corrupt files, atomic
// writes.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/json.h"
#include "engine/serialize.h"
#include "support/gradcheck.h"
#include "support/temp_dir.h"

namespace tcv {
namespace {

using tcv::testing::source_dir;

/// This file's scratch directory, removed when the tests end.
std::string tmp_dir() {
  static const testing::TempDir dir("serialize");
  return dir.path();
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

/// A file from a header text and data bytes.
std::string make_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// ---------------------------------------------------------------- safetensors

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  const std::string path = tmp_dir() + "/all.safetensors";
  NamedTensors ts;
  ts.emplace_back("f32", from_vector<float>({1.5f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3}));
  ts.emplace_back("f64", from_vector<double>({0.1, 0.2}));
  ts.emplace_back("f16", from_vector<float>({0.5f, -1.25f, 65504.0f}).to(DType::f16));
  ts.emplace_back("bf16", from_vector<float>({1.0f, -0.5f}).to(DType::bf16));
  ts.emplace_back("i32", from_vector<int32_t>({-7, 8}));
  ts.emplace_back("i64", from_vector<int64_t>({int64_t{1} << 40, -3}));
  ts.emplace_back("u8", from_vector<uint8_t>({0, 255, 7}));
  ts.emplace_back("bool", from_vector<bool>({true, false, true}));
  ts.emplace_back("scalar", scalar_tensor(42, {.dtype = DType::i64}));
  ts.emplace_back("empty", zeros({0, 3}));
  // A transposed view is written as its (contiguous) values.
  ts.emplace_back("transposed", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).t());
  save_safetensors(path, ts, {{"format", "pt"}, {"epoch", "3"}});

  const SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& [name, t] = f.tensors[i];
    EXPECT_EQ(name, ts[i].first);
    EXPECT_EQ(t.dtype(), ts[i].second.dtype()) << name;
    EXPECT_EQ(t.shape(), ts[i].second.shape()) << name;
    EXPECT_EQ(t.to_vector<double>(), ts[i].second.to_vector<double>()) << name;
  }
  EXPECT_EQ(f.tensors.back().second.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(f.metadata.size(), 2u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("epoch"), "3");
}

TEST(Safetensors, WritesTheExactLayout) {
  const std::string path = tmp_dir() + "/layout.safetensors";
  save_safetensors(path,
                   {{"a", from_vector<float>({1.0f, 2.0f})}, {"b", from_vector<int64_t>({5})}},
                   {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u) << "data should start 8-byte aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 16);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(
      header.find_last_not_of(' ') + 1,
      std::string(
          R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})")
          .size());
  const Json j = json_parse(header);
  EXPECT_EQ(json_string(j.at("a"), "dtype"), "F32");
  EXPECT_EQ(j.at("b").at("data_offsets")[1], 16);
  float f[2];
  std::memcpy(f, bytes.data() + 8 + n, 8);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 2.0f);
  int64_t b;
  std::memcpy(&b, bytes.data() + 8 + n + 8, 8);
  EXPECT_EQ(b, 5);
}

TEST(Safetensors, ReadsGoldenFileWrittenByPython) {
  // tests/data/golden_tiny.safetensors: written byte by byte with Python's struct
  // and json, values from torch 1.13 (bf16/f16 bit patterns included).
  const SafetensorsFile f = load_safetensors(source_dir() + "/tests/data/golden_tiny.safetensors");
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("note"), "golden \xc3\xa9");
  EXPECT_EQ(f.tensors[0].first, "weight");
  EXPECT_EQ(f.tensors[0].second.shape(), (Shape{2, 2}));
  EXPECT_EQ(f.tensors[0].second.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f}));
  EXPECT_EQ(f.tensors[1].first, "index");
  EXPECT_EQ(f.tensors[1].second.to_vector<int64_t>(),
            (std::vector<int64_t>{7, -1, int64_t{1} << 40}));
  EXPECT_EQ(f.tensors[2].second.dtype(), DType::bf16);
  EXPECT_EQ(f.tensors[2].second.to_vector<float>(), (std::vector<float>{1.0f, -0.5f}));
  EXPECT_EQ(f.tensors[3].second.dtype(), DType::b8);
  EXPECT_EQ(f.tensors[3].second.to_vector<float>(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(f.tensors[4].second.dtype(), DType::f16);
  EXPECT_EQ(f.tensors[4].second.to_vector<float>(), (std::vector<float>{0.3330078125f}));
}

void expect_load_error(const std::string& name, const std::string& bytes,
                       const std::string& needle) {
  const std::string path = tmp_dir() + "/" + name + ".safetensors";
  write_bytes(path, bytes);
  try {
    load_safetensors(path);
    ADD_FAILURE() << name << ": loaded; expected an error mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos)
        << name << ": error does not name the file: " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
  }
}

TEST(Safetensors, RejectsCorruptFilesNamingTheFile) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');
  expect_load_error("short", "abc", "truncated file");
  expect_load_error("header_past_end", le64(1000) + "{}", "runs past the end");
  expect_load_error("huge_header", le64(uint64_t{1} << 40) + "{}", "exceeds the limit");
  expect_load_error("bad_json", make_file("{\"a\": [", ""), "bad JSON header");
  expect_load_error("not_object", make_file("[1, 2]", ""), "expected an object");
  expect_load_error("unknown_dtype",
                    make_file(R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", "\0\0"),
                    "unknown dtype \"F8\"");
  expect_load_error("size_mismatch",
                    make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
                    "needs 12");
  expect_load_error("out_of_range",
                    make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
                    "run past the data section");
  expect_load_error("reversed",
                    make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8),
                    "begin > end");
  expect_load_error(
      "overlap",
      make_file("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                data8),
      "overlap");
  expect_load_error("missing_field", make_file(R"({"a":{"dtype":"F32","shape":[2]}})", data8),
                    "data_offsets");
  expect_load_error("negative_dim",
                    make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
                    "non-negative");
  expect_load_error("bad_metadata", make_file(R"({"__metadata__":{"k":1}})", ""), "__metadata__");
  expect_load_error("dup_key", make_file("{" + ok_entry + "," + ok_entry + "}", data8),
                    "duplicate key \"a\" at line 1, column 58");
  expect_load_error("missing", "", "truncated");
  try {
    load_safetensors(tmp_dir() + "/does_not_exist.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does_not_exist.safetensors"), std::string::npos);
  }
  // A well-formed file built the same way loads: the checks above are not vacuous.
  const std::string path = tmp_dir() + "/handmade.safetensors";
  float two[2] = {3.0f, -1.0f};
  write_bytes(path, make_file("{" + ok_entry + "}", std::string(reinterpret_cast<char*>(two), 8)));
  EXPECT_EQ(load_safetensors(path).tensors.at(0).second.to_vector<float>(),
            (std::vector<float>{3.0f, -1.0f}));
}

TEST(Safetensors, RejectsBadNamesOnSave) {
  const std::string path = tmp_dir() + "/bad_names.safetensors";
  EXPECT_THROW(save_safetensors(path, {{"a", zeros({1})}, {"a", zeros({1})}}), Error);
  EXPECT_THROW(save_safetensors(path, {{"__metadata__", zeros({1})}}), Error);
  EXPECT_THROW(save_safetensors(path, {{"u", Tensor()}}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteFileAtomic, ReplacesContentsAndLeavesNoTempFiles) {
  const std::string dir = tmp_dir() + "/atomic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/state.json";
  write_file_atomic(path, "first version, longer than the second");
  EXPECT_EQ(read_bytes(path), "first version, longer than the second");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_bytes(path), "second");
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"state.json"}));
  save_safetensors(dir + "/m.safetensors", {{"w", ones({2})}});
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"m.safetensors", "state.json"}));
  try {
    write_file_atomic(dir + "/no/such/dir/x.json", "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/dir/x.json"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, RejectsShapesWhoseByteCountOverflows) {
  // 2^61 F64 elements are 2^64 bytes, which wrapped to 0 and matched the empty
  // data_offsets: the tensor came back with 2^61 elements and no memory behind
  // them. A zero size beside huge ones overflowed the strides the same way.
  expect_load_error(
      "wrap64",
      make_file(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", ""),
      "tensor \"a\": shape [2305843009213693952] of F64 is too large");
  expect_load_error(
      "wrap32",
      make_file(R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})",
                ""),
      "shape [2147483648,2147483648] of F32 is too large");
  expect_load_error(
      "zero_and_huge",
      make_file(R"({"a":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})",
                ""),
      "shape [0,4294967296,4294967296] of U8 is too large");
  // Zero sizes beside ordinary ones load as empty tensors.
  const std::string path = tmp_dir() + "/zero.safetensors";
  write_bytes(
      path, make_file(R"({"a":{"dtype":"BF16","shape":[0,1048576,8],"data_offsets":[0,0]}})", ""));
  EXPECT_EQ(load_safetensors(path).tensors.at(0).second.shape(), (Shape{0, 1048576, 8}));
}

}  // namespace
}  // namespace tcv
