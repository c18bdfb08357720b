// JSON for safetensors headers, trainer state, JSON-lines logs and data sets'
// annotation files: Debian's nlohmann-json (ordered objects), with a strict
// reader and checked accessors whose errors are tcv::Error. Inside the
// library only: the installed API speaks tcv::Value (engine/value.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/value.h"

namespace tcv {

/// A JSON value whose objects keep their keys in insertion (or file) order.
/// Build values with nlohmann's API and write them with json_dump():
///
///   Json j = Json::object();
///   j["epoch"] = 3;
///   j["tags"] = Json::array({"a", "b"});
///   std::string line = json_dump(j);          // {"epoch":3,"tags":["a","b"]}
///
/// Read outside data with json_parse() and the checked accessors below rather
/// than nlohmann's parse(), at() and get<>(): those throw nlohmann's own
/// exceptions, and get<>() converts silently between number types.
using Json = nlohmann::ordered_json;

/// Parses one JSON document (RFC 8259: UTF-8, nothing after the value but
/// whitespace). Stricter than nlohmann's parse(): a key repeated in one object
/// and nesting deeper than 512 are errors, and an object with many keys is
/// built in linear time. Errors are tcv::Error "[json] <what> at line L, column C"
/// (or naming the repeated key).
Json json_parse(std::string_view text);

/// Writes `j` compactly (indent < 0) or with `indent` spaces per level.
/// Non-finite numbers are written as null (JSON has no NaN/Inf); bytes that
/// are not UTF-8 are replaced by U+FFFD instead of failing.
std::string json_dump(const Json& j, int indent = -1);

/// The member `key` of the object `obj`; tcv::Error naming the key (and the
/// keys present) when it is absent, or naming the type when `obj` is no object.
const Json& json_at(const Json& obj, std::string_view key);

/// The member `key` of `obj` as a bool, integer, number or string. Errors name
/// the key and what was found: `[json] "epoch": expected an integer, got string`.
/// json_int accepts a number with no fractional part that fits in int64
/// (`1e3`); json_double accepts integers.
bool json_bool(const Json& obj, std::string_view key);
int64_t json_int(const Json& obj, std::string_view key);
double json_double(const Json& obj, std::string_view key);
const std::string& json_string(const Json& obj, std::string_view key);

/// The same value as a tcv::Value (the installed API's JSON type), and back.
/// Unsigned integers beyond int64 become numbers.
Value to_value(const Json& j);
Json to_json(const Value& v);

}  // namespace tcv
