// A fresh directory under the system temp dir for one test, removed with it.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace tcv::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "tcv") {
    static std::atomic<int> count{0};
    root_ = std::filesystem::temp_directory_path() /
            ("tcv_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(count++));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory itself.
  const std::filesystem::path& root() const { return root_; }
  /// A path inside it, as a string.
  std::string path(const std::string& rel = "") const { return (root_ / rel).string(); }

 private:
  std::filesystem::path root_;
};

/// Writes `bytes` to `path`, creating its parent directories; a test's fixture
/// files (the library's own writer is tcv::data::write_file).
inline void put_file(const std::string& path, const std::string& bytes) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f.good()) throw std::runtime_error(path + ": cannot write the test's file");
}

}  // namespace tcv::testing
