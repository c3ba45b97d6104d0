// A small, strict XML parser for tests: checks that generated HTML (polyglot XHTML-compatible) and SVG
// reports are well-formed and lets tests look inside them. It covers only what the reports use: one root
// element, attributes, text, the five predefined entities plus numeric references, comments, an optional
// <?xml?> declaration and <!DOCTYPE>. Anything else (CDATA, processing instructions, internal DTD subsets)
// is rejected rather than half-supported, so a report that needs them fails loudly.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bertrain::testing {

struct XmlElement {
  std::string name;                                             // tag name as written
  std::vector<std::pair<std::string, std::string>> attributes;  // document order, entity-decoded
  std::string text;  // entity-decoded character data directly inside this element (not children's)
  std::vector<XmlElement> children;

  // The value of attribute `key`, or nullptr when absent.
  const std::string* attribute(const std::string& key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) return &v;
    }
    return nullptr;
  }

  // Every descendant element (depth first, document order, not including *this) whose name is `name`.
  std::vector<const XmlElement*> find_all(const std::string& tag) const {
    std::vector<const XmlElement*> found;
    collect(tag, found);
    return found;
  }

 private:
  void collect(const std::string& tag, std::vector<const XmlElement*>& found) const {
    for (const XmlElement& child : children) {
      if (child.name == tag) found.push_back(&child);
      child.collect(tag, found);
    }
  }
};

namespace detail {

inline bool is_xml_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
// Names follow the contract's ASCII subset of XML names: a digit, '-' or '.' may not come first.
inline bool is_name_start(char c) { return is_ascii_letter(c) || c == '_' || c == ':'; }
inline bool is_name_char(char c) { return is_name_start(c) || is_ascii_digit(c) || c == '-' || c == '.'; }

inline void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Recursive-descent parser over the whole document held in memory. Positions are byte offsets; they are
// turned into line and column only when an error is reported, so the happy path pays nothing for them.
class XmlParser {
 public:
  explicit XmlParser(const std::string& doc) : doc_(doc) {}

  XmlElement parse_document() {
    if (doc_.empty()) fail("empty document");
    skip_space();
    // "<?xml-stylesheet" is a processing instruction, not the declaration, so a space must follow.
    if (starts_with("<?xml") && pos_ + 5 < doc_.size() && is_xml_space(doc_[pos_ + 5])) skip_declaration();
    skip_space_and_comments();
    if (starts_with_ignoring_case("<!DOCTYPE")) skip_doctype();
    skip_space_and_comments();
    if (starts_with("<?") || starts_with("<!")) fail("unsupported declaration or processing instruction");
    if (at_end() || peek() != '<') fail("expected the root element");
    XmlElement root = parse_element();
    skip_space_and_comments();
    // Text or a second element here would make the report a fragment, not a document.
    if (!at_end()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < doc_.size(); ++i) {
      if (doc_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw std::runtime_error("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                             reason);
  }

  bool at_end() const { return pos_ >= doc_.size(); }
  char peek() const { return doc_[pos_]; }
  bool starts_with(const char* s) const { return doc_.compare(pos_, std::char_traits<char>::length(s), s) == 0; }
  bool starts_with_ignoring_case(const char* s) const {
    std::size_t i = 0;
    for (; s[i] != '\0'; ++i) {
      if (pos_ + i >= doc_.size()) return false;
      char c = doc_[pos_ + i];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (c != s[i]) return false;
    }
    return true;
  }
  void expect(char c, const char* what) {
    if (at_end() || peek() != c) fail(std::string("expected ") + what);
    ++pos_;
  }
  void skip_space() {
    while (!at_end() && is_xml_space(peek())) ++pos_;
  }
  void skip_space_and_comments() {
    for (skip_space(); starts_with("<!--"); skip_space()) skip_comment();
  }

  void skip_declaration() {
    std::size_t end = doc_.find("?>", pos_);
    if (end == std::string::npos) fail("unterminated <?xml declaration");
    pos_ = end + 2;
  }

  // Only the "<!DOCTYPE html>" form is needed; an internal subset ('[') would need a DTD parser.
  void skip_doctype() {
    pos_ += 9;
    if (at_end() || !is_xml_space(peek())) fail("expected whitespace after <!DOCTYPE");
    for (; !at_end() && peek() != '>'; ++pos_) {
      if (peek() == '[' || peek() == '<') fail("unsupported content in <!DOCTYPE");
    }
    if (at_end()) fail("unterminated <!DOCTYPE");
    ++pos_;
  }

  // XML forbids "--" inside a comment (so "--->" is an error too): the first "--" must close it.
  void skip_comment() {
    pos_ += 4;
    std::size_t dashes = doc_.find("--", pos_);
    if (dashes == std::string::npos) fail("unterminated comment");
    pos_ = dashes;
    if (dashes + 2 >= doc_.size() || doc_[dashes + 2] != '>') fail("\"--\" inside a comment");
    pos_ = dashes + 3;
  }

  std::string parse_name(const char* what) {
    std::size_t start = pos_;
    if (at_end() || !is_name_start(peek())) fail(std::string("invalid ") + what);
    while (!at_end() && is_name_char(peek())) ++pos_;
    return doc_.substr(start, pos_ - start);
  }

  // Decodes one reference starting at '&' and appends it to `out`.
  void parse_reference(std::string& out) {
    std::size_t semicolon = doc_.find(';', pos_);
    // References are short; a far-away ';' means this '&' was a stray one, not a long entity name.
    if (semicolon == std::string::npos || semicolon - pos_ > 12) fail("stray '&' (use &amp;)");
    std::string ref = doc_.substr(pos_ + 1, semicolon - pos_ - 1);
    for (char c : ref) {
      if (!is_name_char(c) && c != '#') fail("stray '&' (use &amp;)");
    }
    if (ref == "amp") out += '&';
    else if (ref == "lt") out += '<';
    else if (ref == "gt") out += '>';
    else if (ref == "quot") out += '"';
    else if (ref == "apos") out += '\'';
    else if (!ref.empty() && ref[0] == '#') {
      bool hex = ref.size() > 1 && ref[1] == 'x';
      std::string digits = ref.substr(hex ? 2 : 1);
      const char* allowed = hex ? "0123456789abcdefABCDEF" : "0123456789";
      // At most 8 digits keeps std::stoul in range; longer ones are past Unicode anyway.
      if (digits.empty() || digits.size() > 8 || digits.find_first_not_of(allowed) != std::string::npos)
        fail("malformed character reference &" + ref + ";");
      unsigned long cp = std::stoul(digits, nullptr, hex ? 16 : 10);
      // NUL, UTF-16 surrogates and values past Unicode are not characters XML can carry.
      if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        fail("invalid character reference &" + ref + ";");
      append_utf8(out, cp);
    } else {
      fail("unknown entity &" + ref + ";");
    }
    pos_ = semicolon + 1;
  }

  std::string parse_attribute_value() {
    if (at_end() || (peek() != '"' && peek() != '\'')) fail("attribute value must be quoted");
    char quote = doc_[pos_++];
    std::string value;
    while (true) {
      if (at_end()) fail("unterminated attribute value");
      char c = peek();
      if (c == quote) break;
      if (c == '<') fail("'<' in an attribute value (use &lt;)");
      if (c == '&') {
        parse_reference(value);
      } else {
        value += c;
        ++pos_;
      }
    }
    ++pos_;
    return value;
  }

  // Parses "<name attr='v' ...>content</name>" or "<name .../>" starting at '<'.
  XmlElement parse_element() {
    XmlElement element;
    ++pos_;
    element.name = parse_name("tag name");
    while (true) {
      bool had_space = !at_end() && is_xml_space(peek());
      skip_space();
      if (at_end()) fail("unterminated start tag <" + element.name + ">");
      if (starts_with("/>")) {
        pos_ += 2;
        return element;
      }
      if (peek() == '>') break;
      // Attributes must be separated by whitespace: <a x="1"y="2"> is not well-formed.
      if (!had_space) fail("expected whitespace before attribute");
      std::size_t attribute_start = pos_;
      std::string key = parse_name("attribute name");
      skip_space();
      if (at_end() || peek() != '=') fail("attribute " + key + " has no value");
      ++pos_;
      skip_space();
      std::string value = parse_attribute_value();
      if (element.attribute(key) != nullptr) {
        pos_ = attribute_start;
        fail("duplicated attribute " + key);
      }
      element.attributes.emplace_back(std::move(key), std::move(value));
    }
    ++pos_;  // the '>' closing the start tag
    parse_content(element);
    return element;
  }

  // Everything up to and including the matching end tag.
  void parse_content(XmlElement& element) {
    while (true) {
      if (at_end()) fail("unclosed tag <" + element.name + ">");
      if (starts_with("</")) {
        std::size_t tag_start = pos_;
        pos_ += 2;
        std::string name = parse_name("end tag name");
        skip_space();
        expect('>', "'>' to close the end tag");
        if (name != element.name) {
          pos_ = tag_start;
          fail("end tag </" + name + "> does not match <" + element.name + ">");
        }
        return;
      }
      if (starts_with("<!--")) {
        skip_comment();
      } else if (starts_with("<!") || starts_with("<?")) {
        fail("CDATA, processing instructions and declarations are not supported here");
      } else if (peek() == '<') {
        // "a < b" is a stray '<'; "<1x>" looks like a tag, so it is reported as an invalid tag name.
        if (pos_ + 1 >= doc_.size() || is_xml_space(doc_[pos_ + 1]) || doc_[pos_ + 1] == '<')
          fail("stray '<' (use &lt;)");
        element.children.push_back(parse_element());
      } else if (peek() == '&') {
        parse_reference(element.text);
      } else {
        element.text += doc_[pos_++];
      }
    }
  }

  const std::string& doc_;
  std::size_t pos_ = 0;
};

}  // namespace detail

// Parses a whole document and returns its root element; throws std::runtime_error
// ("line L, column C: reason") on anything that is not well-formed. See the file comment for the subset.
inline XmlElement parse_xml(const std::string& document) { return detail::XmlParser(document).parse_document(); }

// The readers of a parsed chart the report suites share.
// Attribute `key` of `e` as a number; throws naming the element when it has none.
inline double attr_number(const XmlElement& e, const std::string& key) {
  const std::string* value = e.attribute(key);
  if (value == nullptr) throw std::runtime_error("<" + e.name + "> has no attribute " + key);
  return std::stod(*value);
}

// Attribute `key` of `e`, "(absent)" when it has none.
inline std::string attr(const XmlElement& e, const std::string& key) {
  const std::string* value = e.attribute(key);
  return value ? *value : std::string("(absent)");
}

// Every <tag> under `root` whose class is `cls`.
inline std::vector<const XmlElement*> with_class(const XmlElement& root, const std::string& tag, const std::string& cls) {
  std::vector<const XmlElement*> found;
  for (const XmlElement* e : root.find_all(tag)) {
    if (attr(*e, "class") == cls) found.push_back(e);
  }
  return found;
}

// An element's own text and its descendants', joined: what a reader of the chart can see or hover.
inline std::string all_text(const XmlElement& root) {
  std::string text = root.text;
  for (const XmlElement& child : root.children) text += " " + all_text(child);
  return text;
}

}  // namespace bertrain::testing
