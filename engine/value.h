// tcv::Value: a JSON value (null, bool, integer, number, string, array,
// object) as the installed API hands it out: the val row of metrics.jsonl, a
// prediction's entry, the lines of a metrics file. Objects keep their keys in
// insertion (or file) order.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tcv {

/// A JSON value that owns its members. Build one as a literal or member by
/// member, read it with the checked accessors, write it with dump():
///
///   Value row = Value::object({{"map", 0.42}, {"images", 500}});
///   row["class_ap"] = Value::object({{"cat", 0.5}, {"dog", nullptr}});
///   double map = row.at("map").as_double();
///   std::string line = row.dump();   // {"map":0.42,"images":500,"class_ap":{...}}
///
/// The accessors throw tcv::Error naming what was asked and what was found
/// (`[value] "map": expected a number, got string`), never undefined
/// behaviour.
class Value {
 public:
  enum class Type : uint8_t { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Value>;
  using Member = std::pair<std::string, Value>;
  using Object = std::vector<Member>;

  /// null.
  Value() = default;
  Value(std::nullptr_t) {}  // NOLINT: implicit, as JSON literals
  Value(bool b) : v_(b) {}  // NOLINT
  template <std::integral T>
  requires(!std::same_as<T, bool>) Value(T i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  template <std::floating_point T>
  Value(T x) : v_(static_cast<double>(x)) {}                       // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                     // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                       // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}                // NOLINT
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}    // NOLINT
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}  // NOLINT
  Value(const Value& o);
  /// A moved-from Value is null.
  Value(Value&& o) noexcept : v_(std::exchange(o.v_, std::monostate{})) {}
  Value& operator=(const Value& o);
  Value& operator=(Value&& o) noexcept {
    if (this != &o) v_ = std::exchange(o.v_, std::monostate{});
    return *this;
  }
  ~Value() = default;

  /// An object of these members, in this order (a key given twice keeps the last value).
  static Value object(std::initializer_list<Member> members = {});
  /// An array of these elements.
  static Value array(std::initializer_list<Value> elements = {});
  /// Parses one JSON document (RFC 8259; a repeated key or nesting deeper than
  /// 512 is an error): tcv::Error "[json] <what> at line L, column C".
  static Value parse(std::string_view text);

  Type type() const { return static_cast<Type>(v_.index()); }
  /// "null", "bool", "integer", "number", "string", "array", "object".
  const char* type_name() const;
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  /// An integer or a number.
  bool is_number() const { return type() == Type::integer || type() == Type::number; }
  bool is_integer() const { return type() == Type::integer; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  bool as_bool() const;
  /// An integer, or a number with no fractional part that fits in int64.
  int64_t as_int() const;
  /// A number or an integer.
  double as_double() const;
  const std::string& as_string() const;

  // ---- objects ----
  /// The member `key`, added (as null) when absent; a null value becomes an
  /// empty object first. Throws on other types.
  Value& operator[](std::string_view key);
  Value& operator[](const char* key) { return (*this)[std::string_view(key)]; }
  /// The member `key`; throws naming the key (and the keys present) when absent.
  const Value& at(std::string_view key) const;
  /// The member `key`, or null when absent (an object only).
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  /// The members, in order.
  const Object& members() const;
  Object& members();

  // ---- arrays ----
  /// Appends `v`; a null value becomes an empty array first.
  void push_back(Value v);
  /// The element `i`; throws naming the index and the size when out of range.
  template <std::integral I>
  const Value& operator[](I i) const {
    return element(static_cast<int64_t>(i));
  }
  template <std::integral I>
  Value& operator[](I i) {
    return const_cast<Value&>(element(static_cast<int64_t>(i)));
  }
  /// The elements, in order.
  const Array& elements() const;
  Array& elements();
  /// Elements of an array, members of an object, 0 for anything else.
  size_t size() const;
  bool empty() const { return size() == 0; }

  /// Compactly (indent < 0) or with `indent` spaces per level. Non-finite
  /// numbers are written as null; bytes that are not UTF-8 as U+FFFD.
  std::string dump(int indent = -1) const;

  /// Same type and value, members in the same order; an integer equals a
  /// number of the same value.
  bool operator==(const Value& o) const;

 private:
  const Value& element(int64_t i) const;

  // Arrays and objects sit behind pointers so that Value can hold Values;
  // copies copy them (a Value never shares its members with another).
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      v_;
};

}  // namespace tcv
