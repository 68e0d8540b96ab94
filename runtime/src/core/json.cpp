#include "core/json.hpp"

#include <charconv>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

namespace tenax::json {

ParseError::ParseError(const std::string& what, std::size_t offset)
    : Error(what + " at byte " + std::to_string(offset)), offset_(offset) {}

namespace {

using Library = nlohmann::json;

// The text as nlohmann reads it, one byte at a time; every step is published through `read`, so that the SAX events,
// which carry no positions, can tell where in the text they are.
class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* at, const char** read) : at_(at), read_(read) {}
  reference operator*() const { return *at_; }
  TrackedIterator& operator++() {
    *read_ = ++at_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(const TrackedIterator& a, const TrackedIterator& b) { return a.at_ == b.at_; }

 private:
  const char* at_;
  const char** read_;
};

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1, column 8: " preamble (the
// offset is appended by ParseError instead), and cut short: it quotes the token it stopped in, which for an
// unterminated string is the rest of the file.
std::string library_message(const nlohmann::detail::exception& error) {
  constexpr std::size_t kLimit = 200;
  std::string_view what = error.what();
  if (const auto id_end = what.find("] "); what.starts_with("[json.exception.") && id_end != std::string_view::npos)
    what.remove_prefix(id_end + 2);
  if (what.starts_with("parse error"))
    if (const auto colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
  return what.size() > kLimit ? std::string(what.substr(0, kLimit)) + "..." : std::string(what);
}

// Objects with more members than this check duplicate keys with a set instead of a scan (no quadratic time).
constexpr std::size_t kLinearKeyCheck = 16;

// A number beyond the range of a double, [begin, end) in the text, which nlohmann refuses and cannot read past.
struct NumberOverflow {
  std::size_t begin, end;
};
// Each such number costs one more reading of the text (Value::parse); a text with more is refused.
constexpr std::size_t kMaxOverflows = 16;

using Overflows = std::vector<std::pair<std::size_t, std::string>>;  // offset, literal

}  // namespace

// nlohmann's SAX events turned into a Value tree, with what nlohmann does not check: duplicate keys (it would keep
// the last one), the nesting limit, and the value offsets and number literals that Value keeps.
class TreeBuilder : public nlohmann::json_sax<Library> {
 public:
  TreeBuilder(std::string_view text, const char* const* read, int max_depth, const Overflows& overflows)
      : text_(text), read_(read), max_depth_(max_depth), overflows_(overflows) {}

  Value take() { return std::move(root_); }

  bool null() override {
    add(Value::Kind::Null);
    return true;
  }
  bool boolean(bool value) override {
    add(Value::Kind::Bool).bool_ = value;
    return true;
  }
  // Integers come as numbers, formatted back exactly; nlohmann hands over larger ones as floats with their literal.
  // "-0" is the only integer literal that its value does not give back.
  bool number_integer(number_integer_t value) override {
    Value& v = add(Value::Kind::Number);
    v.text_ = value == 0 && v.offset_ < text_.size() && text_[v.offset_] == '-' ? "-0" : std::to_string(value);
    return true;
  }
  bool number_unsigned(number_unsigned_t value) override {
    Value& v = add(Value::Kind::Number);
    v.text_ = std::to_string(value);
    for (const auto& [offset, literal] : overflows_)
      if (offset == v.offset_) v.text_ = literal;  // the "0" that stands in for a number beyond a double
    return true;
  }
  // The literal as written, from the text: nlohmann's copy has the locale's decimal point.
  bool number_float(number_float_t, const string_t& literal) override {
    Value& v = add(Value::Kind::Number);
    v.text_ = text_.substr(v.offset_, literal.size());
    return true;
  }
  bool string(string_t& value) override {
    add(Value::Kind::String).text_ = std::move(value);
    return true;
  }
  // Only the binary formats (CBOR, MessagePack, ...) produce these, never JSON text.
  bool binary(binary_t&) override { return false; }

  bool start_object(std::size_t) override {
    open(Value::Kind::Object);
    return true;
  }
  bool key(string_t& key) override {
    Frame& frame = open_.back();
    const std::size_t offset = start();
    if (is_duplicate(frame, key)) throw ParseError("duplicate key '" + key + "'", offset);
    key_ = std::move(key);
    consumed();
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    open(Value::Kind::Array);
    return true;
  }
  bool end_array() override { return close(); }

  // nlohmann's position counts the bytes read, the one it stopped at included: 1-based, where tenax counts from 0.
  // For a number out of range (406), after the number: the position is one past its last byte.
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) override {
    if (error.id == 406) throw NumberOverflow{start(), std::min(position, text_.size())};
    throw ParseError(library_message(error), std::min(position > 0 ? position - 1 : 0, text_.size()));
  }

 private:
  struct Frame {
    Value* value;
    std::set<std::string> keys;  // filled only for large objects
  };

  // Where the value of the current event starts. Between two events the text holds only whitespace, ',' and ':' (a
  // number's event comes after nlohmann has read the byte after it, which is one of those or a closing bracket, also
  // an event), so the value starts at the first other byte after what the previous event had read.
  std::size_t start() const {
    std::size_t at = last_read_;
    while (at < text_.size() && (text_[at] == ' ' || text_[at] == '\t' || text_[at] == '\n' || text_[at] == '\r' ||
                                 text_[at] == ',' || text_[at] == ':'))
      ++at;
    return at;
  }
  void consumed() { last_read_ = static_cast<std::size_t>(*read_ - text_.data()); }

  // A new value in the innermost open container (or the document itself), named by its key or index.
  Value& add(Value::Kind kind) {
    Value v;
    v.kind_ = kind;
    v.offset_ = start();
    consumed();
    if (open_.empty()) {
      root_ = std::move(v);
      return root_;
    }
    // Only the innermost container grows, so the pointers to the open ones (each its parent's last child) stay valid.
    Value& parent = *open_.back().value;
    if (parent.kind_ == Value::Kind::Object) {
      v.member_ = true;
      v.key_ = std::move(key_);
    } else {
      v.index_ = static_cast<std::int64_t>(parent.children_.size());
    }
    parent.children_.push_back(std::move(v));
    return parent.children_.back();
  }

  void open(Value::Kind kind) {
    if (open_.size() >= static_cast<std::size_t>(std::max(max_depth_, 0)))
      throw ParseError("nesting deeper than " + std::to_string(max_depth_) + " levels", start());
    open_.push_back(Frame{&add(kind), {}});
  }

  bool close() {
    open_.pop_back();
    consumed();
    return true;
  }

  static bool is_duplicate(Frame& frame, const std::string& key) {
    const std::vector<Value>& members = frame.value->children_;
    if (members.size() < kLinearKeyCheck) {
      for (const Value& m : members)
        if (m.key_ == key) return true;
      return false;
    }
    if (frame.keys.empty())
      for (const Value& m : members)
        frame.keys.insert(m.key_);
    return !frame.keys.insert(key).second;
  }

  std::string_view text_;
  const char* const* read_;  // one past the last byte nlohmann has read
  int max_depth_;
  const Overflows& overflows_;
  std::size_t last_read_ = 0;  // *read_ at the end of the previous event
  Value root_;
  std::vector<Frame> open_;  // the containers not closed yet, outermost first
  std::string key_;          // the key of the member whose value comes next
};

Value Value::parse(std::string_view text, int max_depth) {
  // nlohmann skips a UTF-8 byte-order mark; RFC 8259 text has none, and a file that starts with one was not written
  // by tenax.
  if (text.starts_with("\xEF\xBB\xBF")) throw ParseError("byte-order mark before the JSON value", 0);
  // nlohmann refuses a number beyond the range of a double (1e400) and cannot read on after it, where Value keeps it
  // (number() refuses it, the writer and number_text() keep its literal, and a caller may treat it as absent). Each
  // one is replaced, in a copy of the text, by a "0" padded with spaces to its length, and the text read again; the
  // builder puts the literal back.
  std::string copy;
  Overflows overflows;
  while (true) {
    const std::string_view current = overflows.empty() ? text : std::string_view(copy);
    const char* read = current.data();
    TreeBuilder builder(current, &read, max_depth, overflows);
    try {
      // strict: nothing but whitespace after the value; no comments. Every error reaches TreeBuilder::parse_error,
      // which throws, or is thrown by the builder itself.
      const bool parsed = Library::sax_parse(TrackedIterator(current.data(), &read),
                                             TrackedIterator(current.data() + current.size(), &read), &builder,
                                             nlohmann::json::input_format_t::json, /*strict=*/true,
                                             /*ignore_comments=*/false);
      if (!parsed) throw ParseError("not a JSON value", static_cast<std::size_t>(read - current.data()));
      return builder.take();
    } catch (const NumberOverflow& number) {
      if (overflows.size() == kMaxOverflows)
        throw ParseError("more than " + std::to_string(kMaxOverflows) + " numbers beyond the range of a double",
                         number.begin);
      if (copy.empty()) copy.assign(text);
      const std::size_t length = number.end - number.begin;
      overflows.emplace_back(number.begin, copy.substr(number.begin, length));
      copy.replace(number.begin, length, "0" + std::string(length - 1, ' '));
    }
  }
}

std::string Value::describe() const {
  std::string name = member_       ? "member '" + key_ + "'"
                     : index_ >= 0 ? "element " + std::to_string(index_)
                                   : "the JSON value";
  return name + " (byte " + std::to_string(offset_) + ")";
}

void Value::wrong(const std::string& expected) const {
  std::string found;
  switch (kind_) {
    case Kind::Null:
      found = "null";
      break;
    case Kind::Bool:
      found = bool_ ? "true" : "false";
      break;
    case Kind::Number:
      found = "the number " + text_;
      break;
    case Kind::String:
      found = "the string " + quote(text_.size() > 40 ? text_.substr(0, 40) + "..." : text_);
      break;
    case Kind::Array:
      found = "an array";
      break;
    case Kind::Object:
      found = "an object";
      break;
  }
  throw Error(describe() + ": expected " + expected + ", found " + found);
}

bool Value::boolean() const {
  if (kind_ != Kind::Bool) wrong("true or false");
  return bool_;
}

const std::string& Value::string() const {
  if (kind_ != Kind::String) wrong("a string");
  return text_;
}

const std::vector<Value>& Value::array() const {
  if (kind_ != Kind::Array) wrong("an array");
  return children_;
}

const std::vector<Value>& Value::members() const {
  if (kind_ != Kind::Object) wrong("an object");
  return children_;
}

std::uint64_t Value::u64() const {
  std::uint64_t v = 0;
  if (kind_ != Kind::Number) wrong("an unsigned 64-bit integer");
  auto [end, error] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (error != std::errc() || end != text_.data() + text_.size()) wrong("an unsigned 64-bit integer");
  return v;
}

std::int64_t Value::i64() const {
  std::int64_t v = 0;
  if (kind_ != Kind::Number) wrong("a 64-bit integer");
  auto [end, error] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (error != std::errc() || end != text_.data() + text_.size()) wrong("a 64-bit integer");
  return v;
}

double Value::number() const {
  if (kind_ != Kind::Number) wrong("a number");
  double v = 0;
  auto [end, error] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (error == std::errc::result_out_of_range) {
    // Too small for a double is zero (of the literal's sign); too large has no value to give.
    const auto e = text_.find_first_of("eE");
    if (e != std::string::npos && text_[e + 1] == '-') return text_[0] == '-' ? -0.0 : 0.0;
    wrong("a number within the range of a double");
  }
  if (error != std::errc() || end != text_.data() + text_.size()) wrong("a number");
  return v;
}

const std::string& Value::number_text() const {
  if (kind_ != Kind::Number) wrong("a number");
  return text_;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::Object) return nullptr;
  for (const Value& m : children_)
    if (m.key_ == key) return &m;
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  if (kind_ != Kind::Object) wrong("an object holding '" + std::string(key) + "'");
  if (const Value* m = find(key)) return *m;
  throw Error(describe() + ": missing member '" + std::string(key) + "'");
}

const Value* Value::present(std::string_view key) const {
  if (kind_ != Kind::Object) wrong("an object holding '" + std::string(key) + "'");
  const Value* m = find(key);
  return m != nullptr && !m->is_null() ? m : nullptr;
}

double Value::number_or(std::string_view key, double fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->number() : fallback;
}

std::int64_t Value::i64_or(std::string_view key, std::int64_t fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->i64() : fallback;
}

std::string Value::string_or(std::string_view key, std::string_view fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->string() : std::string(fallback);
}

bool Value::bool_or(std::string_view key, bool fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->boolean() : fallback;
}

void append_string(std::string& out, std::string_view text) {
  // Not ensure_ascii: UTF-8 stays as it is (U+FFFD too, as its three bytes).
  out += Library(Library::string_t(text)).dump(-1, ' ', /*ensure_ascii=*/false, Library::error_handler_t::replace);
}

std::string quote(std::string_view text) {
  std::string out;
  append_string(out, text);
  return out;
}

// Hand-written rather than nlohmann's serializer, which writes 1.0 as "1.0" and -0.0 as "-0.0" and whose Grisu2
// digits are not always the shortest; std::to_chars without a precision gives the shortest form that reads back as
// the same double.
std::string number(double value) {
  if (!std::isfinite(value)) return "null";
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, error == std::errc() ? end : buffer);
}

// Not through nlohmann's serializer: that would need a copy of the tree in its types and would write numbers from
// their binary value, where Value keeps the literal (exact, whatever its size).
void append(std::string& out, const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Null:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += value.boolean() ? "true" : "false";
      return;
    case Value::Kind::Number:
      out += value.number_text();
      return;
    case Value::Kind::String:
      append_string(out, value.string());
      return;
    case Value::Kind::Array: {
      out += '[';
      bool first = true;
      for (const Value& element : value.array()) {
        if (!first) out += ',';
        first = false;
        append(out, element);
      }
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      out += '{';
      bool first = true;
      for (const Value& member : value.members()) {
        if (!first) out += ',';
        first = false;
        append_string(out, member.key());
        out += ':';
        append(out, member);
      }
      out += '}';
      return;
    }
  }
}

std::string write(const Value& value) {
  std::string out;
  append(out, value);
  return out;
}

ObjectWriter& ObjectWriter::add(std::string_view key, std::string_view value) {
  std::string quoted;
  append_string(quoted, value);
  return add_raw(key, quoted);
}

ObjectWriter& ObjectWriter::add_raw(std::string_view key, std::string_view json) {
  if (body_.size() > 1) body_ += ',';
  append_string(body_, key);
  body_ += ':';
  body_ += json;
  return *this;
}

}  // namespace tenax::json
