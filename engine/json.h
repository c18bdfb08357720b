// A small JSON value with a strict parser and a writer: enough for safetensors
// headers, trainer state and JSON-lines logs, without a third-party dependency.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tcv {

/// A JSON value. Objects keep their keys in insertion (or file) order.
///
///   Json j = Json::object();
///   j["epoch"] = 3;
///   j["loss"] = 0.25;
///   j["tags"] = Json::array({"a", "b"});
///   std::string line = j.dump();          // {"epoch":3,"loss":0.25,"tags":["a","b"]}
///   Json k = Json::parse(line);
///   int64_t e = k.at("epoch").as_int();
class Json {
 public:
  enum class Type : uint8_t { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  Json(std::nullptr_t) {}                           // NOLINT: implicit like a literal
  Json(bool b) : type_(Type::boolean), bool_(b) {}  // NOLINT
  template <std::integral I>
  requires(!std::same_as<I, bool>) Json(I v)
      : type_(Type::integer), int_(static_cast<int64_t>(v)) {}      // NOLINT
  Json(double v) : type_(Type::number), num_(v) {}                  // NOLINT
  Json(float v) : Json(static_cast<double>(v)) {}                   // NOLINT
  Json(const char* s) : type_(Type::string), str_(s) {}             // NOLINT
  Json(std::string s) : type_(Type::string), str_(std::move(s)) {}  // NOLINT
  Json(std::string_view s) : type_(Type::string), str_(s) {}        // NOLINT

  static Json array(Array items = {});
  static Json object(Object items = {});

  Type type() const { return type_; }
  const char* type_name() const;
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_int() const { return type_ == Type::integer; }
  /// Integer or floating-point number.
  bool is_number() const { return type_ == Type::integer || type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  // ---- typed access; each throws tcv::Error naming the expected and actual type ----
  bool as_bool() const;
  /// An integer (a number with a fractional part is an error).
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  /// Elements of an array or members of an object.
  size_t size() const;
  /// Appends to an array (a null value becomes an empty array first).
  void push_back(Json v);
  const Json& operator[](size_t i) const;

  /// The member `key`, inserted as null if absent (a null value becomes an object first).
  Json& operator[](const std::string& key);
  /// The member `key`; throws naming the key when absent.
  const Json& at(const std::string& key) const;
  /// The member `key`, or nullptr.
  const Json* find(const std::string& key) const;
  bool contains(const std::string& key) const { return find(key) != nullptr; }

  /// Serialises compactly (indent < 0) or pretty-printed with `indent` spaces.
  /// Non-finite numbers are written as null (JSON has no NaN/Inf).
  std::string dump(int indent = -1) const;

  /// Parses one JSON document (RFC 8259; trailing whitespace only). Errors are
  /// tcv::Error "[json] <what> at line L, column C".
  static Json parse(std::string_view text);

  bool operator==(const Json& o) const;

 private:
  void dump_to(std::string& out, int indent, int depth) const;

  Type type_ = Type::null;
  bool bool_ = false;
  int64_t int_ = 0;
  double num_ = 0.0;
  std::string str_;
  Array arr_;
  Object obj_;
};

/// Appends `s` to `out` as a quoted, escaped JSON string.
void json_escape(std::string& out, std::string_view s);

}  // namespace tcv
