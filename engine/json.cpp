#include "engine/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "kernels/base.h"

namespace tcv {

namespace {

const char* type_str(Json::Type t) {
  switch (t) {
    case Json::Type::null:
      return "null";
    case Json::Type::boolean:
      return "bool";
    case Json::Type::integer:
      return "integer";
    case Json::Type::number:
      return "number";
    case Json::Type::string:
      return "string";
    case Json::Type::array:
      return "array";
    case Json::Type::object:
      return "object";
  }
  return "?";
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Json document() {
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    TCV_THROW("[json] ", what, " at line ", line, ", column ", col);
  }

  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  char peek() {
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    return s_[pos_];
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("invalid literal");
    pos_ += word.size();
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 512");
    const char c = peek();
    switch (c) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return Json(string());
      case 't':
        literal("true");
        return Json(true);
      case 'f':
        literal("false");
        return Json(false);
      case 'n':
        literal("null");
        return Json();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail(std::string("unexpected character '") + c + "'");
    }
  }

  Json object(int depth) {
    expect('{');
    Json obj = Json::object();
    if (peek() == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      if (peek() != '"') fail("expected a string key");
      std::string key = string();
      expect(':');
      Json v = value(depth + 1);
      // Duplicate keys are ambiguous (which one wins differs between readers).
      if (obj.contains(key)) fail("duplicate key \"" + key + "\"");
      obj.as_object().emplace_back(std::move(key), std::move(v));
      const char c = peek();
      ++pos_;
      if (c == '}') return obj;
      if (c != ',') fail("expected ',' or '}'");
    }
  }

  Json array(int depth) {
    expect('[');
    Json arr = Json::array();
    if (peek() == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      arr.push_back(value(depth + 1));
      const char c = peek();
      ++pos_;
      if (c == ']') return arr;
      if (c != ',') fail("expected ',' or ']'");
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        fail("invalid hex digit in \\u escape");
    }
    return v;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (s_.substr(pos_, 2) != "\\u") fail("unpaired surrogate in \\u escape");
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xdc00 || lo >= 0xe000) fail("invalid low surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            fail("unpaired surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Json number() {
    const size_t start = pos_;
    bool is_float = false;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - b;
    };
    const size_t int_begin = pos_;
    const size_t nint = digits();
    if (nint == 0) fail("invalid number");
    if (nint > 1 && s_[int_begin] == '0') fail("leading zero in number");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      is_float = true;
      if (digits() == 0) fail("invalid number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      is_float = true;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("invalid number");
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    if (!is_float) {
      int64_t v = 0;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) return Json(v);
      // Out of int64 range: keep it as a double, like most readers.
    }
    double d = 0.0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) fail("number out of range");
    if (r.ec != std::errc() || r.ptr != e) fail("invalid number");
    return Json(d);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

}  // namespace

Json Json::array(Array items) {
  Json j;
  j.type_ = Type::array;
  j.arr_ = std::move(items);
  return j;
}

Json Json::object(Object items) {
  Json j;
  j.type_ = Type::object;
  j.obj_ = std::move(items);
  return j;
}

const char* Json::type_name() const {
  return type_str(type_);
}

bool Json::as_bool() const {
  TCV_CHECK(is_bool(), "[json] expected bool, got ", type_name());
  return bool_;
}

int64_t Json::as_int() const {
  if (type_ == Type::number && std::nearbyint(num_) == num_ && std::abs(num_) < 9.2e18)
    return static_cast<int64_t>(num_);
  TCV_CHECK(is_int(), "[json] expected integer, got ", type_name(),
            type_ == Type::number ? " with a fractional part" : "");
  return int_;
}

double Json::as_double() const {
  TCV_CHECK(is_number(), "[json] expected number, got ", type_name());
  return type_ == Type::integer ? static_cast<double>(int_) : num_;
}

const std::string& Json::as_string() const {
  TCV_CHECK(is_string(), "[json] expected string, got ", type_name());
  return str_;
}

const Json::Array& Json::as_array() const {
  TCV_CHECK(is_array(), "[json] expected array, got ", type_name());
  return arr_;
}

Json::Array& Json::as_array() {
  TCV_CHECK(is_array(), "[json] expected array, got ", type_name());
  return arr_;
}

const Json::Object& Json::as_object() const {
  TCV_CHECK(is_object(), "[json] expected object, got ", type_name());
  return obj_;
}

Json::Object& Json::as_object() {
  TCV_CHECK(is_object(), "[json] expected object, got ", type_name());
  return obj_;
}

size_t Json::size() const {
  if (is_array()) return arr_.size();
  if (is_object()) return obj_.size();
  TCV_THROW("[json] size() of a ", type_name(), " (expected array or object)");
}

void Json::push_back(Json v) {
  if (is_null()) type_ = Type::array;
  as_array().push_back(std::move(v));
}

const Json& Json::operator[](size_t i) const {
  const Array& a = as_array();
  TCV_CHECK(i < a.size(), "[json] index ", i, " out of range for an array of ", a.size());
  return a[i];
}

Json& Json::operator[](const std::string& key) {
  if (is_null()) type_ = Type::object;
  Object& o = as_object();
  for (auto& [k, v] : o)
    if (k == key) return v;
  o.emplace_back(key, Json());
  return o.back().second;
}

const Json* Json::find(const std::string& key) const {
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::at(const std::string& key) const {
  const Json* v = find(key);
  if (v == nullptr) {
    std::string keys;
    for (const auto& [k, unused] : obj_) keys += (keys.empty() ? "" : ", ") + k;
    TCV_THROW("[json] missing key \"", key, "\" (keys: ", keys.empty() ? "none" : keys, ")");
  }
  return *v;
}

bool Json::operator==(const Json& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::null:
      return true;
    case Type::boolean:
      return bool_ == o.bool_;
    case Type::integer:
      return int_ == o.int_;
    case Type::number:
      return num_ == o.num_;
    case Type::string:
      return str_ == o.str_;
    case Type::array:
      return arr_ == o.arr_;
    case Type::object:
      return obj_ == o.obj_;
  }
  return false;
}

void json_escape(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  switch (type_) {
    case Type::null:
      out += "null";
      break;
    case Type::boolean:
      out += bool_ ? "true" : "false";
      break;
    case Type::integer:
      out += std::to_string(int_);
      break;
    case Type::number: {
      if (!std::isfinite(num_)) {
        out += "null";
        break;
      }
      // Shortest text that reads back to the same double.
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof(buf), num_);
      std::string_view sv(buf, static_cast<size_t>(r.ptr - buf));
      out += sv;
      // Keep it a number (not an integer) when read back.
      if (sv.find_first_of(".eE") == std::string_view::npos) out += ".0";
      break;
    }
    case Type::string:
      json_escape(out, str_);
      break;
    case Type::array: {
      out += '[';
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, depth + 1);
        arr_[i].dump_to(out, indent, depth + 1);
      }
      if (!arr_.empty()) newline(out, indent, depth);
      out += ']';
      break;
    }
    case Type::object: {
      out += '{';
      for (size_t i = 0; i < obj_.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, depth + 1);
        json_escape(out, obj_[i].first);
        out += indent < 0 ? ":" : ": ";
        obj_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!obj_.empty()) newline(out, indent, depth);
      out += '}';
      break;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

Json Json::parse(std::string_view text) {
  return Parser(text).document();
}

}  // namespace tcv
