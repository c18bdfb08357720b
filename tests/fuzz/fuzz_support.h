// What the harnesses share: inputs for parsers that take a path, and a check
// that stops the run (a libFuzzer crash) when a parser breaks its promise.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/sequential.h"

namespace tcv::fuzz {

/// The model whose weights and optimizer state fuzz_safetensors loads (and
/// make_seeds writes): conv weight and bias, BatchNorm buffers (an i64 among
/// them), a Linear head. Input (N, 1, 4, 4); the head takes the flattened (N, 8).
inline std::shared_ptr<nn::Sequential> tiny_model() {
  return std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(1, 2, 3), std::make_shared<nn::BatchNorm2d>(2),
      std::make_shared<nn::Linear>(8, 3)});
}

/// Writes the input to one file per process (in memory under /dev/shm when it
/// exists) and returns its path; `suffix` is appended (".json", ".bin", ...).
inline std::string write_input(std::string_view bytes, const std::string& suffix = "") {
  static const std::string dir = [] {
    if (const char* t = std::getenv("TMPDIR"); t && *t) return std::string(t);
    return std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  }();
  const std::string path = dir + "/tcv-fuzz-" + std::to_string(getpid()) + suffix;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

/// A directory (one per process) of empty image files the seeds name: `names`
/// and 000001.jpg ... 000012.jpg (the scenes'); the readers only ask whether
/// an image exists.
inline std::string empty_image_dir(std::vector<std::string> names) {
  namespace fs = std::filesystem;
  const std::string d = write_input("", ".images");
  fs::remove(d);
  fs::create_directories(d);
  for (int k = 1; k <= 12; ++k) {
    char name[16];
    std::snprintf(name, sizeof(name), "%06d.jpg", k);
    names.emplace_back(name);
  }
  for (const std::string& name : names) {
    std::FILE* f = std::fopen((fs::path(d) / name).c_str(), "wb");
    if (f) std::fclose(f);
  }
  return d;
}

/// A promise the parser broke with an input it accepted: report and crash.
#define TCV_FUZZ_EXPECT(cond)                                                                \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: accepted input breaks: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

}  // namespace tcv::fuzz
