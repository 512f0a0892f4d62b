// Reading S3's XML answers: they are flat lists of simple elements
// (ListObjectsV2, ListMultipartUploads, ListParts, Error), so a scan for
// elements by name is enough; no attributes or namespaces are needed.
#ifndef LOUPE_TOOLS_COLLECTOR_S3_XML_H_
#define LOUPE_TOOLS_COLLECTOR_S3_XML_H_

#include <string>
#include <string_view>
#include <vector>

namespace loupe::collector {

// The contents of every <name>...</name> directly or deeper in `xml`, in
// order (elements of that name must not nest).
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view name);
// The text of the first <name> element, entities decoded; empty if none.
std::string XmlText(std::string_view xml, std::string_view name);
// `text` with &, <, >, " and ' escaped, for request bodies.
std::string XmlEscape(std::string_view text);

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_S3_XML_H_
