// Request bodies as ordered JSON, parsed in time linear in their size.
//
// nlohmann::ordered_json keeps an object's keys in the client's order (chat
// templates print messages and tool schemas as written), but its parser
// inserts each key with a linear search for a duplicate, so a body of n
// keys costs O(n^2): 90,000 keys in 1 MiB took 24 s of CPU. This parser
// builds the same ordered_json through nlohmann's SAX interface, appending
// each key and finding duplicates with a hash set, and bounds what a body
// may hold: a key given twice in one object, nesting past max_depth and
// more than max_keys keys in all are refused by name.
#ifndef FOLIO_SERVER_JSON_BODY_H_
#define FOLIO_SERVER_JSON_BODY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "folio/core/status.h"

namespace folio::server {

struct JsonBodyLimits {
  uint64_t max_depth = 128;     // nested objects and arrays
  uint64_t max_keys = 1 << 16;  // object keys in the whole body
};

// The body, or InvalidArgument: not JSON (with the byte offset), a
// duplicate key (named), too deep, too many keys.
Result<nlohmann::ordered_json> ParseJsonBody(std::string_view body,
                                             const JsonBodyLimits& limits = {});

}  // namespace folio::server

#endif  // FOLIO_SERVER_JSON_BODY_H_
