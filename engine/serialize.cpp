#include "engine/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <set>

#include "engine/autograd.h"
#include "engine/json.h"

namespace tcv {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; big-endian hosts need byte swapping");

namespace {

// The reference implementation refuses headers above 100 MB; so do we, so a
// corrupt length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
    case DType::b8:
      return "BOOL";
  }
  return "?";
}

bool parse_safetensors_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kTable[] = {
      {"F32", DType::f32}, {"F64", DType::f64}, {"F16", DType::f16}, {"BF16", DType::bf16},
      {"I32", DType::i32}, {"I64", DType::i64}, {"U8", DType::u8},   {"BOOL", DType::b8}};
  for (const auto& [name, dt] : kTable) {
    if (s == name) {
      *out = dt;
      return true;
    }
  }
  return false;
}

std::string errno_str() {
  return std::strerror(errno);
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// A temp file beside the destination that becomes it on commit() (fsync,
/// rename, fsync of the directory) or disappears if never committed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)) {
    static std::atomic<uint64_t> counter{0};
    tmp_ =
        path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    TCV_CHECK(fd_ >= 0, "[write_file_atomic] cannot create temp file ", tmp_, " for ", path_, ": ",
              errno_str());
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min<size_t>(n, 1u << 30));
      if (w < 0 && errno == EINTR) continue;
      TCV_CHECK(w > 0, "[write_file_atomic] writing ", tmp_, " (for ", path_, "): ", errno_str());
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  void commit() {
    TCV_CHECK(::fsync(fd_) == 0, "[write_file_atomic] fsync of ", tmp_, ": ", errno_str());
    const int rc = ::close(fd_);
    fd_ = -1;
    TCV_CHECK(rc == 0, "[write_file_atomic] closing ", tmp_, ": ", errno_str());
    TCV_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, "[write_file_atomic] renaming ", tmp_,
              " to ", path_, ": ", errno_str());
    committed_ = true;
    // Without this the rename itself may not survive a power loss.
    const std::string dir = dir_of(path_);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    TCV_CHECK(dfd >= 0, "[write_file_atomic] opening directory ", dir, ": ", errno_str());
    const int drc = ::fsync(dfd);
    ::close(dfd);
    TCV_CHECK(drc == 0, "[write_file_atomic] fsync of directory ", dir, ": ", errno_str());
  }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

std::string read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TCV_CHECK(fd >= 0, "[load_safetensors] cannot open ", path, ": ", errno_str());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string e = errno_str();
    ::close(fd);
    TCV_THROW("[load_safetensors] cannot stat ", path, ": ", e);
  }
  std::string buf(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const std::string e = r < 0 ? errno_str() : "unexpected end of file";
      ::close(fd);
      TCV_THROW("[load_safetensors] reading ", path, ": ", e);
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return buf;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents) {
  AtomicFile f(path);
  f.write(contents.data(), contents.size());
  f.commit();
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  NoGradGuard no_grad;
  std::vector<Tensor> data;
  data.reserve(tensors.size());
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TCV_CHECK(!name.empty() && name != "__metadata__", "[save_safetensors] ", path,
              ": invalid tensor name \"", name, "\"");
    TCV_CHECK(seen.insert(name).second, "[save_safetensors] ", path, ": duplicate tensor name \"",
              name, "\"");
    TCV_CHECK(t.defined(), "[save_safetensors] ", path, ": tensor \"", name, "\" is undefined");
    Tensor c = t.detach().to(kCPU).contiguous();
    Json shape = Json::array();
    for (int64_t s : c.shape()) shape.push_back(s);
    const uint64_t n = c.nbytes();
    Json entry = Json::object();
    entry["dtype"] = safetensors_dtype(c.dtype());
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = Json::array({offset, offset + n});
    header[name] = std::move(entry);
    offset += n;
    data.push_back(std::move(c));
  }
  std::string h = json_dump(header);
  // Pad with spaces so the data starts 8-byte aligned (what the reference writer does).
  h.append((8 - h.size() % 8) % 8, ' ');
  uint8_t len[8];
  const uint64_t hl = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(hl >> (8 * i));

  AtomicFile f(path);
  f.write(len, 8);
  f.write(h.data(), h.size());
  for (const Tensor& c : data)
    if (c.nbytes() > 0) f.write(c.data_ptr(), c.nbytes());
  f.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string buf = read_whole_file(path);
  const std::string where = "[load_safetensors] " + path + ": ";
  TCV_CHECK(buf.size() >= 8, where, "truncated file (", buf.size(),
            " bytes; a safetensors file starts with an 8-byte header length)");
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<uint8_t>(buf[i])) << (8 * i);
  TCV_CHECK(hl <= kMaxHeaderBytes, where, "header length ", hl, " exceeds the limit of ",
            kMaxHeaderBytes, " bytes");
  TCV_CHECK(hl <= buf.size() - 8, where, "header length ", hl, " runs past the end of the file (",
            buf.size(), " bytes)");
  const std::string_view text(buf.data() + 8, hl);
  Json header;
  try {
    header = json_parse(text);
  } catch (const Error& e) {
    TCV_THROW(where, "bad JSON header: ", e.what());
  }
  TCV_CHECK(header.is_object(), where, "header is a JSON ", header.type_name(),
            ", expected an object");
  const char* data = buf.data() + 8 + hl;
  const uint64_t data_size = buf.size() - 8 - hl;

  SafetensorsFile out;
  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.get_ref<const Json::object_t&>()) {
    if (name == "__metadata__") {
      TCV_CHECK(entry.is_object(), where, "\"__metadata__\" must be an object of strings");
      for (const auto& [k, v] : entry.get_ref<const Json::object_t&>()) {
        TCV_CHECK(v.is_string(), where, "\"__metadata__\" value of \"", k, "\" is a ",
                  v.type_name(), ", expected a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string at = where + "tensor \"" + name + "\": ";
    TCV_CHECK(entry.is_object(), at, "entry is a ", entry.type_name(), ", expected an object");
    const auto dt = entry.find("dtype");
    const auto sh = entry.find("shape");
    const auto off = entry.find("data_offsets");
    TCV_CHECK(dt != entry.end() && sh != entry.end() && off != entry.end(), at,
              "needs \"dtype\", \"shape\" and \"data_offsets\"");
    DType dtype{};
    TCV_CHECK(dt->is_string() && parse_safetensors_dtype(dt->get<std::string>(), &dtype), at,
              "unknown dtype ", json_dump(*dt),
              " (supported: F32, F64, F16, BF16, I32, I64, U8, BOOL)");
    TCV_CHECK(sh->is_array(), at, "\"shape\" must be an array of non-negative integers");
    Shape shape;
    // The byte count and the strides (the product of the sizes, a zero one
    // counting as 1) must fit in int64 whatever the data offsets say.
    const uint64_t limit = (uint64_t{1} << 62) / dtype_size(dtype);
    uint64_t numel = 1, span = 1;
    for (const Json& d : *sh) {
      // A non-negative integer in the file reads as an unsigned number.
      TCV_CHECK(d.is_number_unsigned(), at, "\"shape\" must hold non-negative integers, got ",
                json_dump(*sh));
      const uint64_t n = d.get<uint64_t>();
      TCV_CHECK(std::max<uint64_t>(n, 1) <= limit / span, at, "shape ", json_dump(*sh), " of ",
                safetensors_dtype(dtype), " is too large");
      shape.push_back(static_cast<int64_t>(n));
      numel *= n;
      span *= std::max<uint64_t>(n, 1);
    }
    TCV_CHECK(off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() &&
                  (*off)[1].is_number_unsigned(),
              at, "\"data_offsets\" must be [begin, end], got ", json_dump(*off));
    const uint64_t begin = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    TCV_CHECK(begin <= end, at, "data_offsets [", begin, ", ", end, "] has begin > end");
    TCV_CHECK(end <= data_size, at, "data_offsets [", begin, ", ", end,
              "] run past the data section (", data_size, " bytes; file truncated?)");
    const uint64_t nbytes = numel * dtype_size(dtype);
    TCV_CHECK(end - begin == nbytes, at, "data_offsets [", begin, ", ", end, "] hold ", end - begin,
              " bytes but ", safetensors_dtype(dtype), " ", shape_str(shape), " needs ", nbytes);
    if (nbytes > 0) ranges.push_back({begin, end, name});
    Tensor t = empty(shape, {.dtype = dtype});
    if (nbytes > 0) std::memcpy(t.data_ptr(), data + begin, nbytes);
    out.tensors.emplace_back(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    TCV_CHECK(ranges[i].begin >= ranges[i - 1].end, where, "tensors \"", ranges[i - 1].name, "\" [",
              ranges[i - 1].begin, ", ", ranges[i - 1].end, ") and \"", ranges[i].name, "\" [",
              ranges[i].begin, ", ", ranges[i].end, ") overlap");
  }
  return out;
}

}  // namespace tcv
