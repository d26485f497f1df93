#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

// The little XML that S3 needs: text escaped for the documents fencepost
// writes (the front door's errors, the listings it answers), and the
// listings a store answers read and checked: elements as the store wrote
// them, character data decoded, and whether a name can be written back as
// XML character data. Not a general XML parser.
namespace fencepost::s3 {

// `text` as XML character data or an attribute value: & < > " escaped, a
// CR as &#13; (which a reader's line-end normalisation keeps), the other
// C0 control characters but tab and newline dropped.
std::string EscapeXml(std::string_view text);

// One element as the store wrote it: <name ...>inner</name> or <name/>;
// `raw` is the whole of it.
struct XmlElement {
  std::string_view name;
  std::string_view inner;
  std::string_view raw;
};

// The next element of `text` from *at on (whitespace before it skipped),
// *at then past it. S3's listings never nest an element in one of its own
// name and escape every '<' of their text, so the first closing tag of the
// name closes it. False at the end of `text`, or with *malformed set when
// what follows is not an element.
bool NextElement(std::string_view text, std::size_t* at, XmlElement* element,
                 bool* malformed);
// Where the document's root element starts: past the XML declaration,
// comments and whitespace; npos when they do not end.
std::size_t SkipProlog(std::string_view text);
// Character data as the store wrote it, decoded: the five named entities
// and character references (as UTF-8). nullopt for anything else: a '<',
// an unknown or unterminated entity, a reference to no character.
std::optional<std::string> DecodeXmlText(std::string_view text);
// Whether XML 1.0 can carry `raw` as character data: UTF-8 without the
// characters it has no place for (the C0 controls but tab, LF and CR, and
// U+FFFE and U+FFFF).
bool XmlCarries(std::string_view raw);

}  // namespace fencepost::s3
