// Training configs: TOML files (toml++) checked against a schema of known keys
// with types, defaults and valid values, using TorchCV's key names
// ("train.batch_size", "solver.lr.base_lr", "network.model_name", ...).
//
// Unknown keys, wrong types and bad values are errors that name the file, the
// line and the key; an unknown key also suggests the closest known one. Any key
// can be overridden from the command line with "--set key=value".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kernels/base.h"

namespace tcv::train {

/// The most iterations a run may count, 2^40 (about 1.1e12): solver.max_iters,
/// solver.max_epoch times an epoch's iterations, and a checkpoint's iteration.
inline constexpr int64_t kMaxIterations = int64_t{1} << 40;

/// The most data loader threads (data.workers) a run may ask for.
inline constexpr int64_t kMaxWorkers = 256;

enum class ValueType : uint8_t { boolean, integer, floating, string, float_array, int_array };

const char* value_type_name(ValueType t);

/// A config value of one of the schema's types.
using ConfigValue =
    std::variant<bool, int64_t, double, std::string, std::vector<double>, std::vector<int64_t>>;

/// One known key of the schema.
struct KeySpec {
  std::string key;  ///< dotted, e.g. "solver.lr.base_lr"
  ValueType type;
  ConfigValue default_value;
  std::string help;
};

/// Every key tcv-train knows, in the order the resolved config is written.
const std::vector<KeySpec>& config_schema();

/// Thrown for a bad config file, key or value (tcv-train exits with status 2).
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A resolved config: every schema key has a value (its default unless set).
class Config {
 public:
  /// All defaults.
  Config();

  /// Parses a TOML file; errors name "file:line".
  static Config from_file(const std::string& path);
  /// Parses TOML text; `name` stands for the file in errors.
  static Config from_string(const std::string& toml, const std::string& name = "<string>");

  /// Applies "key=value"; the value is TOML (42, 0.1, true, "text", [1, 2]); a bare
  /// word is taken as a string for string keys.
  void set_override(const std::string& assignment);

  /// Checks the values (ranges, choices, combinations); errors name key and line.
  /// from_file/from_string/set_override do not; call this once all overrides are in.
  void validate() const;

  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;  ///< integers convert
  const std::string& get_string(const std::string& key) const;
  std::vector<double> get_doubles(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  const ConfigValue& get(const std::string& key) const;
  /// Where the value came from: "file.toml:12", "--set", or "default".
  std::string source(const std::string& key) const;

  /// Sets a value in code (type-checked against the schema).
  void set(const std::string& key, ConfigValue value, const std::string& source = "code");

  /// The resolved config as TOML, every key, grouped by table in schema order.
  std::string to_toml() const;
  /// The file this config was read from ("" when none).
  const std::string& path() const { return path_; }

 private:
  void load_table(const void* table, const std::string& prefix, const std::string& file);
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;

  std::map<std::string, ConfigValue> values_;
  std::map<std::string, std::string> sources_;
  std::string path_;
};

/// The known key closest to `key` (edit distance over dotted names), or "".
std::string closest_key(const std::string& key);

}  // namespace tcv::train
