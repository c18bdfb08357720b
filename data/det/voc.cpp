#include "data/det/voc.h"

#include <pugixml.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "data/idx.h"

namespace tcv::data {

namespace fs = std::filesystem;

namespace {

// The line (1-based) of byte `offset` in `text`.
int64_t line_of(const std::string& text, ptrdiff_t offset) {
  const auto end = text.begin() + std::clamp<ptrdiff_t>(offset, 0, std::ssize(text));
  return 1 + std::count(text.begin(), end, '\n');
}

// The text of child `key` of `node` as a decimal number (an optional sign,
// digits with a decimal point, an exponent); `what` names it in errors.
// strtod also reads hexadecimal ("0x20" as 32), "inf" and "nan".
double number_of(const pugi::xml_node& node, const char* key, const std::string& name,
                 const std::string& what) {
  const pugi::xml_node c = node.child(key);
  TCV_CHECK(c, name, ": ", what, " has no <", key, ">");
  const std::string t = trim(c.child_value());
  // from_chars (general format) reads no hexadecimal and no leading '+'.
  const size_t skip = !t.empty() && t[0] == '+' && t.size() > 1 && t[1] != '-' ? 1 : 0;
  double v = 0;
  const auto r = std::from_chars(t.data() + skip, t.data() + t.size(), v);
  const bool decimal = t.find_first_not_of("+-.0123456789eE") == std::string::npos;
  TCV_CHECK(!t.empty() && decimal && r.ec == std::errc() && r.ptr == t.data() + t.size() &&
                std::isfinite(v),
            name, ": ", what, " <", key, "> is '", t, "', not a ",
            decimal || t.empty() ? "number" : "decimal number");
  return v;
}

int64_t integer_of(const pugi::xml_node& node, const char* key, const std::string& name,
                   const std::string& what) {
  const double v = number_of(node, key, name, what);
  TCV_CHECK(v == std::floor(v) && std::abs(v) < 9.0e15, name, ": ", what, " <", key, "> is ", v,
            ", not an integer");
  return static_cast<int64_t>(v);
}

// An optional 0/1 flag (absent: false).
bool flag_of(const pugi::xml_node& node, const char* key, const std::string& name,
             const std::string& what) {
  if (!node.child(key)) return false;
  const int64_t v = integer_of(node, key, name, what);
  TCV_CHECK(v == 0 || v == 1, name, ": ", what, " <", key, "> is ", v, ", expected 0 or 1");
  return v == 1;
}

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

void add_text(pugi::xml_node parent, const char* key, const std::string& value) {
  parent.append_child(key).append_child(pugi::node_pcdata).set_value(value.c_str());
}

struct StringWriter : pugi::xml_writer {
  std::string out;
  void write(const void* data, size_t size) override {
    out.append(static_cast<const char*>(data), size);
  }
};

}  // namespace

VocAnnotation parse_voc_annotation(const std::string& xml, const std::string& name) {
  pugi::xml_document doc;
  const pugi::xml_parse_result r = doc.load_buffer(xml.data(), xml.size());
  TCV_CHECK(r, name, ": bad XML at line ", line_of(xml, r.offset), " (byte ", r.offset,
            "): ", r.description());
  const pugi::xml_node root = doc.child("annotation");
  TCV_CHECK(root, name, ": no <annotation> element at the root");
  VocAnnotation a;
  a.folder = trim(root.child_value("folder"));
  a.filename = trim(root.child_value("filename"));
  const pugi::xml_node size = root.child("size");
  TCV_CHECK(size, name, ": no <size> element");
  a.width = integer_of(size, "width", name, "<size>");
  a.height = integer_of(size, "height", name, "<size>");
  a.depth = size.child("depth") ? integer_of(size, "depth", name, "<size>") : 3;
  TCV_CHECK(a.width > 0 && a.height > 0, name, ": image size ", a.width, "x", a.height,
            " is not positive");
  a.segmented = flag_of(root, "segmented", name, "<annotation>");
  int64_t k = 0;
  for (const pugi::xml_node o : root.children("object")) {
    const std::string what = "object " + std::to_string(k++);
    VocObject obj;
    TCV_CHECK(o.child("name"), name, ": ", what, " has no <name>");
    obj.name = trim(o.child_value("name"));
    TCV_CHECK(!obj.name.empty(), name, ": ", what, " has an empty <name>");
    if (o.child("pose")) obj.pose = trim(o.child_value("pose"));
    obj.truncated = flag_of(o, "truncated", name, what + " (" + obj.name + ")");
    obj.difficult = flag_of(o, "difficult", name, what + " (" + obj.name + ")");
    const pugi::xml_node bb = o.child("bndbox");
    TCV_CHECK(bb, name, ": ", what, " (", obj.name, ") has no <bndbox>");
    const std::string bw = what + " (" + obj.name + ") <bndbox>";
    obj.xmin = number_of(bb, "xmin", name, bw);
    obj.ymin = number_of(bb, "ymin", name, bw);
    obj.xmax = number_of(bb, "xmax", name, bw);
    obj.ymax = number_of(bb, "ymax", name, bw);
    a.objects.push_back(std::move(obj));
  }
  return a;
}

std::string format_voc_annotation(const VocAnnotation& a) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("annotation");
  add_text(root, "folder", a.folder);
  add_text(root, "filename", a.filename);
  pugi::xml_node size = root.append_child("size");
  add_text(size, "width", std::to_string(a.width));
  add_text(size, "height", std::to_string(a.height));
  add_text(size, "depth", std::to_string(a.depth));
  add_text(root, "segmented", a.segmented ? "1" : "0");
  for (const VocObject& o : a.objects) {
    pugi::xml_node n = root.append_child("object");
    add_text(n, "name", o.name);
    add_text(n, "pose", o.pose);
    add_text(n, "truncated", o.truncated ? "1" : "0");
    add_text(n, "difficult", o.difficult ? "1" : "0");
    pugi::xml_node bb = n.append_child("bndbox");
    add_text(bb, "xmin", format_number(o.xmin));
    add_text(bb, "ymin", format_number(o.ymin));
    add_text(bb, "xmax", format_number(o.xmax));
    add_text(bb, "ymax", format_number(o.ymax));
  }
  StringWriter w;
  doc.save(w, "  ", pugi::format_indent | pugi::format_no_declaration);
  return w.out;
}

const std::vector<std::string>& voc_classes() {
  static const std::vector<std::string> names{
      "aeroplane", "bicycle",     "bird",  "boat",        "bottle", "bus",      "car",
      "cat",       "chair",       "cow",   "diningtable", "dog",    "horse",    "motorbike",
      "person",    "pottedplant", "sheep", "sofa",        "train",  "tvmonitor"};
  return names;
}

std::vector<std::string> read_class_names(const std::string& path) {
  std::istringstream in(read_maybe_gzip(path));
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty()) continue;
    TCV_CHECK(std::find(names.begin(), names.end(), line) == names.end(), path, ": class '", line,
              "' appears twice");
    names.push_back(line);
  }
  TCV_CHECK(!names.empty(), path, ": no class names in this file");
  return names;
}

DetDataset read_voc(const VocOptions& opts) {
  TCV_CHECK(!opts.roots.empty(), "[read_voc] no VOC roots given");
  std::vector<std::string> classes = opts.class_names;
  if (classes.empty()) {
    const fs::path list = fs::path(opts.roots[0]) / "classes.txt";
    classes = fs::exists(list) ? read_class_names(list.string()) : voc_classes();
  }
  std::map<std::string, int64_t> label_of;
  for (size_t k = 0; k < classes.size(); ++k) label_of[classes[k]] = static_cast<int64_t>(k) + 1;
  auto known = [&] {
    std::string s;
    for (const auto& c : classes) s += (s.empty() ? "" : ", ") + c;
    return s;
  };

  std::vector<DetRecord> records;
  int64_t skipped = 0;
  std::string first_skipped;
  std::string name;
  for (const std::string& root : opts.roots) {
    name += (name.empty() ? "" : "+") + root;
    const fs::path list = fs::path(root) / "ImageSets" / "Main" / (opts.split + ".txt");
    TCV_CHECK(fs::exists(list), list.string(), ": no such image list (split '", opts.split,
              "' of VOC root ", root, ")");
    std::istringstream in(read_maybe_gzip(list.string()));
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      const std::string id = trim(line);
      if (id.empty()) continue;
      TCV_CHECK(id.find_first_of(" \t") == std::string::npos, list.string(), ":", line_no,
                ": expected one image id per line, got '", id, "'");
      const std::string xml_path = (fs::path(root) / "Annotations" / (id + ".xml")).string();
      const std::string jpg_path = (fs::path(root) / "JPEGImages" / (id + ".jpg")).string();
      try {
        TCV_CHECK(path_exists(xml_path), xml_path, ": annotation file not found (listed in ",
                  list.string(), ":", line_no, ")");
        TCV_CHECK(path_exists(jpg_path), jpg_path, ": image file not found (listed in ",
                  list.string(), ":", line_no, ")");
        const VocAnnotation a = parse_voc_annotation(read_maybe_gzip(xml_path), xml_path);
        DetRecord r;
        r.image_path = jpg_path;
        r.image_id = static_cast<int64_t>(records.size());
        r.height = a.height;
        r.width = a.width;
        r.source = xml_path;
        for (size_t k = 0; k < a.objects.size(); ++k) {
          const VocObject& o = a.objects[k];
          const auto it = label_of.find(o.name);
          TCV_CHECK(it != label_of.end(), xml_path, ": object ", k, " has unknown class '", o.name,
                    "' (known: ", known(), ")");
          TCV_CHECK(o.xmin >= 1 && o.ymin >= 1 && o.xmin <= o.xmax && o.ymin <= o.ymax &&
                        o.xmax <= static_cast<double>(a.width) &&
                        o.ymax <= static_cast<double>(a.height),
                    xml_path, ": object ", k, " (", o.name, ") box (xmin ", o.xmin, ", ymin ",
                    o.ymin, ", xmax ", o.xmax, ", ymax ", o.ymax,
                    ") is outside the image or its corners are out of order (image ", a.width, "x",
                    a.height,
                    "; expected 1 <= xmin <= xmax <= width, 1 <= ymin <= ymax "
                    "<= height)");
          r.target.add({o.xmin - 1, o.ymin - 1, o.xmax, o.ymax}, it->second, o.difficult, false);
        }
        records.push_back(std::move(r));
      } catch (const Error& e) {
        if (opts.on_corrupt == OnCorrupt::error) throw;
        if (skipped++ == 0) first_skipped = e.what();
      }
    }
  }
  return DetDataset(std::move(records), std::move(classes), {}, opts.on_corrupt,
                    name + " (" + opts.split + ")", skipped, first_skipped, opts.limits);
}

}  // namespace tcv::data
