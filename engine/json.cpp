#include "engine/json.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kernels/base.h"

namespace tcv {

namespace {

constexpr size_t kMaxDepth = 512;

/// "line L, column C" of the byte at `pos` (1-based, as editors count).
std::string line_col(std::string_view text, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

/// A char iterator that leaves where nlohmann's lexer has read up to in
/// `*mark`, so errors the builder raises can say where they are.
class MarkingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  MarkingIterator(const char* p, const char** mark) : p_(p), mark_(mark) {}
  reference operator*() const { return *p_; }
  MarkingIterator& operator++() {
    *mark_ = ++p_;
    return *this;
  }
  MarkingIterator operator++(int) {
    MarkingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const MarkingIterator& o) const { return p_ == o.p_; }

 private:
  const char* p_;
  const char** mark_;
};

/// Builds the value from nlohmann's SAX events: appends members without the
/// linear key search of ordered_map::operator[], rejects repeated keys, and
/// bounds the nesting (the writer and copies of a value recurse).
class Builder {
 public:
  Builder(std::string_view text, const char* const* mark) : text_(text), mark_(mark) {}

  Json take() { return std::move(root_); }

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string&) { return add(Json(v)); }
  bool string(std::string& v) { return add(Json(std::move(v))); }
  bool binary(Json::binary_t&) { fail("binary value"); }

  bool start_object(size_t) {
    open(Json::object());
    keys_.emplace_back();
    return true;
  }
  bool key(std::string& k) {
    if (!keys_.back().insert(k).second) fail("duplicate key \"" + k + "\"");
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    stack_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    open(Json::array());
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::json::exception& e) {
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line 2,
    // column 14: syntax error ..." or "[json.exception.out_of_range.406] number
    // overflow parsing '1e400'"; keep what follows the tag, add the place if missing.
    std::string what = e.what();
    if (const size_t tag = what.find("] ");
        what.rfind("[json.exception.", 0) == 0 && tag != what.npos)
      what.erase(0, tag + 2);
    if (what.find(" at line ") == what.npos)
      what += " at " + line_col(text_, position > 0 ? position - 1 : 0);
    TCV_THROW("[json] ", what);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    TCV_THROW("[json] ", what, " at ", line_col(text_, static_cast<size_t>(*mark_ - text_.data())));
  }

  void open(Json container) {
    if (stack_.size() >= kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    stack_.push_back(place(std::move(container)));
  }

  bool add(Json v) {
    place(std::move(v));
    return true;
  }

  /// Puts `v` where the document is now (the root, the end of the open array
  /// or the open object under the last key) and returns where it went. Only the
  /// innermost open container grows, so the pointers on the stack stay valid.
  Json* place(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      auto& arr = top.get_ref<Json::array_t&>();
      arr.push_back(std::move(v));
      return &arr.back();
    }
    auto& obj = top.get_ref<Json::object_t&>();
    obj.emplace_back(std::move(key_), std::move(v));
    return &obj.back().second;
  }

  std::string_view text_;
  const char* const* mark_;
  Json root_;
  std::vector<Json*> stack_;
  std::vector<std::unordered_set<std::string>> keys_;  // keys of each open object
  std::string key_;
};

std::string type_of(const Json& j) {
  if (j.is_number_float()) return "number";
  if (j.is_number_integer()) return "integer";
  return j.type_name();
}

const Json& member(const Json& obj, std::string_view key) {
  return json_at(obj, key);
}

[[noreturn]] void wrong_type(std::string_view key, const char* expected, const Json& v) {
  TCV_THROW("[json] \"", key, "\": expected ", expected, ", got ", type_of(v));
}

}  // namespace

Json json_parse(std::string_view text) {
  const char* mark = text.data();
  Builder b(text, &mark);
  MarkingIterator first(text.data(), &mark), last(text.data() + text.size(), &mark);
  Json::sax_parse(first, last, &b, nlohmann::json::input_format_t::json, /*strict=*/true);
  return b.take();
}

std::string json_dump(const Json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

const Json& json_at(const Json& obj, std::string_view key) {
  TCV_CHECK(obj.is_object(), "[json] looking up \"", key, "\" in ", type_of(obj),
            " (expected an object)");
  const auto& members = obj.get_ref<const Json::object_t&>();
  for (const auto& [k, v] : members)
    if (k == key) return v;
  std::string keys;
  for (const auto& [k, v] : members) keys += (keys.empty() ? "" : ", ") + k;
  TCV_THROW("[json] missing key \"", key, "\" (keys: ", keys.empty() ? "none" : keys, ")");
}

bool json_bool(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (!v.is_boolean()) wrong_type(key, "a bool", v);
  return v.get<bool>();
}

int64_t json_int(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    TCV_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "[json] \"", key,
              "\": ", u, " is out of range for a signed 64-bit integer");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is the first double past int64's range.
    TCV_CHECK(std::nearbyint(d) == d && std::abs(d) < 9223372036854775808.0, "[json] \"", key,
              "\": expected an integer, got ", d);
    return static_cast<int64_t>(d);
  }
  wrong_type(key, "an integer", v);
}

double json_double(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (!v.is_number()) wrong_type(key, "a number", v);
  return v.get<double>();
}

const std::string& json_string(const Json& obj, std::string_view key) {
  const Json& v = member(obj, key);
  if (!v.is_string()) wrong_type(key, "a string", v);
  return v.get_ref<const std::string&>();
}

}  // namespace tcv
