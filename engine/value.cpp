#include "engine/value.h"

#include <cmath>

#include "engine/error.h"
#include "engine/json.h"

namespace tcv {

namespace {

std::string quoted_keys(const Value::Object& members) {
  std::string out;
  for (const auto& [key, value] : members) {
    (void)value;
    out += (out.empty() ? "\"" : ", \"") + key + "\"";
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Value::Value(const Value& o) {
  *this = o;
}

Value& Value::operator=(const Value& o) {
  if (this == &o) return *this;
  if (o.is_array())
    v_ = std::make_shared<Array>(o.elements());
  else if (o.is_object())
    v_ = std::make_shared<Object>(o.members());
  else
    v_ = o.v_;
  return *this;
}

Value Value::object(std::initializer_list<Member> members) {
  Value v(Object{});
  for (const Member& m : members) v[m.first] = m.second;
  return v;
}

Value Value::array(std::initializer_list<Value> elements) {
  return Value(Array(elements));
}

Value Value::parse(std::string_view text) {
  return to_value(json_parse(text));
}

const char* Value::type_name() const {
  switch (type()) {
    case Type::null:
      return "null";
    case Type::boolean:
      return "bool";
    case Type::integer:
      return "integer";
    case Type::number:
      return "number";
    case Type::string:
      return "string";
    case Type::array:
      return "array";
    case Type::object:
      return "object";
  }
  return "?";
}

bool Value::as_bool() const {
  TCV_CHECK(is_bool(), "[value] expected a bool, got ", type_name());
  return std::get<bool>(v_);
}

int64_t Value::as_int() const {
  if (is_integer()) return std::get<int64_t>(v_);
  if (type() == Type::number) {
    const double x = std::get<double>(v_);
    // [-2^63, 2^63): every double in it converts exactly.
    if (x == std::trunc(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0)
      return static_cast<int64_t>(x);
    TCV_THROW("[value] expected an integer, got ", json_dump(Json(x)));
  }
  TCV_THROW("[value] expected an integer, got ", type_name());
}

double Value::as_double() const {
  if (is_integer()) return static_cast<double>(std::get<int64_t>(v_));
  TCV_CHECK(type() == Type::number, "[value] expected a number, got ", type_name());
  return std::get<double>(v_);
}

const std::string& Value::as_string() const {
  TCV_CHECK(is_string(), "[value] expected a string, got ", type_name());
  return std::get<std::string>(v_);
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) v_ = std::make_shared<Object>();
  TCV_CHECK(is_object(), "[value] \"", key, "\": a member of ", type_name(), ", not of an object");
  Object& m = members();
  for (Member& member : m)
    if (member.first == key) return member.second;
  m.emplace_back(std::string(key), Value());
  return m.back().second;
}

const Value* Value::find(std::string_view key) const {
  TCV_CHECK(is_object(), "[value] \"", key, "\": a member of ", type_name(), ", not of an object");
  for (const Member& member : members())
    if (member.first == key) return &member.second;
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  const Value* v = find(key);
  TCV_CHECK(v, "[value] no member \"", key, "\" (members: ", quoted_keys(members()), ")");
  return *v;
}

const Value::Object& Value::members() const {
  TCV_CHECK(is_object(), "[value] expected an object, got ", type_name());
  return *std::get<std::shared_ptr<Object>>(v_);
}

Value::Object& Value::members() {
  TCV_CHECK(is_object(), "[value] expected an object, got ", type_name());
  return *std::get<std::shared_ptr<Object>>(v_);
}

void Value::push_back(Value v) {
  if (is_null()) v_ = std::make_shared<Array>();
  elements().push_back(std::move(v));
}

const Value& Value::element(int64_t i) const {
  const Array& a = elements();
  TCV_CHECK(i >= 0 && static_cast<size_t>(i) < a.size(), "[value] index ", i,
            " is out of range for an array of ", a.size());
  return a[static_cast<size_t>(i)];
}

const Value::Array& Value::elements() const {
  TCV_CHECK(is_array(), "[value] expected an array, got ", type_name());
  return *std::get<std::shared_ptr<Array>>(v_);
}

Value::Array& Value::elements() {
  TCV_CHECK(is_array(), "[value] expected an array, got ", type_name());
  return *std::get<std::shared_ptr<Array>>(v_);
}

size_t Value::size() const {
  if (is_array()) return elements().size();
  if (is_object()) return members().size();
  return 0;
}

std::string Value::dump(int indent) const {
  return json_dump(to_json(*this), indent);
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_integer() && o.is_integer()) return as_int() == o.as_int();
    return as_double() == o.as_double();
  }
  if (type() != o.type()) return false;
  switch (type()) {
    case Type::null:
      return true;
    case Type::boolean:
      return as_bool() == o.as_bool();
    case Type::string:
      return as_string() == o.as_string();
    case Type::array:
      return elements() == o.elements();
    case Type::object:
      return members() == o.members();
    default:
      return false;
  }
}

// ---- nlohmann's values (engine/json.h) -------------------------------------------------

Json to_json(const Value& v) {
  switch (v.type()) {
    case Value::Type::null:
      return Json();
    case Value::Type::boolean:
      return Json(v.as_bool());
    case Value::Type::integer:
      return Json(v.as_int());
    case Value::Type::number:
      return Json(v.as_double());
    case Value::Type::string:
      return Json(v.as_string());
    case Value::Type::array: {
      Json j = Json::array();
      for (const Value& e : v.elements()) j.push_back(to_json(e));
      return j;
    }
    case Value::Type::object: {
      Json j = Json::object();
      for (const auto& [key, e] : v.members()) j[key] = to_json(e);
      return j;
    }
  }
  return Json();
}

Value to_value(const Json& j) {
  switch (j.type()) {
    case Json::value_t::boolean:
      return Value(j.get<bool>());
    case Json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case Json::value_t::number_float:
      return Value(j.get<double>());
    case Json::value_t::string:
      return Value(j.get<std::string>());
    case Json::value_t::array: {
      Value::Array a;
      a.reserve(j.size());
      for (const Json& e : j) a.push_back(to_value(e));
      return Value(std::move(a));
    }
    case Json::value_t::object: {
      Value::Object o;
      o.reserve(j.size());
      for (const auto& [key, e] : j.items()) o.emplace_back(key, to_value(e));
      return Value(std::move(o));
    }
    default:
      return Value();
  }
}

}  // namespace tcv
