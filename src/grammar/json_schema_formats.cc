// String formats as GBNF: the text between a JSON string's quotes. Each
// grammar accepts only valid values (an exact grammar, or a documented
// subset where the exact language is impractical), so a model cannot
// produce an instance a validator rejects.
#include <string>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace folio::grammar::json_schema_internal {

const std::vector<LibraryRule>& FormatRules() {
  static const std::vector<LibraryRule> rules = {
      // RFC 3339 full-date with the days of each month, 29 February only in
      // leap years (proleptic Gregorian). Year 0000 is left out: some
      // validators (Python's datetime) cannot represent it.
      {"date",
       "date-year \"-\" ( date-month31 \"-\" ( date-day30 | \"31\" ) | date-month30 \"-\" "
       "date-day30 | \"02-\" date-day28 ) | date-leap-year \"-02-29\"",
       {"date-year", "date-month31", "date-month30", "date-day30", "date-day28", "date-leap-year"}},
      {"date-year",
       "[0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\"",
       {}},
      {"date-leap-year",
       "[0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | "
       "[13579] [26] ) \"00\"",
       {}},
      {"date-month31", "\"0\" [13578] | \"1\" [02]", {}},
      {"date-month30", "\"0\" [469] | \"11\"", {}},
      {"date-day28", "\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]", {}},
      {"date-day30", "date-day28 | \"29\" | \"30\"", {"date-day28"}},
      // RFC 3339 full-time; "T" and "Z" upper case, no leap second (60).
      {"time", "time-partial time-offset", {"time-partial", "time-offset"}},
      {"time-partial",
       "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )?",
       {}},
      {"time-offset", "\"Z\" | [+\\-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9]", {}},
      {"date-time", "date \"T\" time", {"date", "time"}},
      {"uuid",
       "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
       "[0-9a-fA-F]{12}",
       {}},
      {"ipv4", "ipv4-octet \".\" ipv4-octet \".\" ipv4-octet \".\" ipv4-octet", {"ipv4-octet"}},
      // 0..255 without leading zeros.
      {"ipv4-octet",
       "[0-9] | [1-9] [0-9] | \"1\" [0-9] [0-9] | \"2\" [0-4] [0-9] | \"25\" [0-5]",
       {}},
      // RFC 4291 text form (RFC 3986's IPv6address): "::" stands for at
      // least one group; no zone id.
      {"ipv6",
       "ipv6-h16c{6} ipv6-ls32 | \"::\" ipv6-h16c{5} ipv6-ls32 | ipv6-h16? \"::\" ipv6-h16c{4} "
       "ipv6-ls32 | ( ipv6-h16c{0,1} ipv6-h16 )? \"::\" ipv6-h16c{3} ipv6-ls32 | ( "
       "ipv6-h16c{0,2} ipv6-h16 )? \"::\" ipv6-h16c{2} ipv6-ls32 | ( ipv6-h16c{0,3} ipv6-h16 )? "
       "\"::\" ipv6-h16c ipv6-ls32 | ( ipv6-h16c{0,4} ipv6-h16 )? \"::\" ipv6-ls32 | ( "
       "ipv6-h16c{0,5} ipv6-h16 )? \"::\" ipv6-h16 | ( ipv6-h16c{0,6} ipv6-h16 )? \"::\"",
       {"ipv6-h16", "ipv6-h16c", "ipv6-ls32"}},
      {"ipv6-h16", "[0-9a-fA-F]{1,4}", {}},
      {"ipv6-h16c", "ipv6-h16 \":\"", {"ipv6-h16"}},
      {"ipv6-ls32", "ipv6-h16 \":\" ipv6-h16 | ipv4", {"ipv6-h16", "ipv4"}},
      // RFC 1123 host names, at most 253 characters: up to three labels of
      // at most 63 characters, or four to eight of at most 30. The last
      // label starts with a letter (some validators refuse a numeric
      // top-level label).
      {"hostname",
       "( hostname-label63 \".\" ){0,2} hostname-tld63 | ( hostname-label30 \".\" ){3,7} "
       "hostname-tld30",
       {"hostname-label63", "hostname-tld63", "hostname-label30", "hostname-tld30"}},
      {"hostname-label63", "[a-zA-Z0-9] ( [a-zA-Z0-9\\-]{0,61} [a-zA-Z0-9] )?", {}},
      {"hostname-tld63", "[a-zA-Z] ( [a-zA-Z0-9\\-]{0,61} [a-zA-Z0-9] )?", {}},
      {"hostname-label30", "[a-zA-Z0-9] ( [a-zA-Z0-9\\-]{0,28} [a-zA-Z0-9] )?", {}},
      {"hostname-tld30", "[a-zA-Z] ( [a-zA-Z0-9\\-]{0,28} [a-zA-Z0-9] )?", {}},
      // A practical subset of RFC 5321 addresses: a dot-atom local part
      // (no quoted local parts, no comments) and a host name domain (no
      // address literals).
      {"email", "email-atext+ ( \".\" email-atext+ )* \"@\" hostname", {"email-atext", "hostname"}},
      {"email-atext", "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\-]", {}},
      // RFC 3986 absolute URIs (scheme required), without IPvFuture hosts.
      {"uri",
       "uri-scheme \":\" uri-hier? ( \"?\" uri-query )? ( \"#\" uri-query )?",
       {"uri-scheme", "uri-hier", "uri-query"}},
      {"uri-scheme", "[a-zA-Z] [a-zA-Z0-9+.\\-]*", {}},
      {"uri-hier",
       "\"//\" uri-authority uri-path | \"/\" ( uri-pchar+ uri-path )? | uri-pchar+ uri-path",
       {"uri-authority", "uri-path", "uri-pchar"}},
      {"uri-authority",
       "( ( uri-unreserved | uri-pct | uri-sub | \":\" )* \"@\" )? uri-host ( \":\" [0-9]* )?",
       {"uri-unreserved", "uri-pct", "uri-sub", "uri-host"}},
      {"uri-host",
       "\"[\" ipv6 \"]\" | ( uri-unreserved | uri-pct | uri-sub )*",
       {"ipv6", "uri-unreserved", "uri-pct", "uri-sub"}},
      {"uri-path", "( \"/\" uri-pchar* )*", {"uri-pchar"}},
      {"uri-pchar",
       "uri-unreserved | uri-pct | uri-sub | [:@]",
       {"uri-unreserved", "uri-pct", "uri-sub"}},
      {"uri-query", "( uri-pchar | [/?] )*", {"uri-pchar"}},
      {"uri-unreserved", "[a-zA-Z0-9._~\\-]", {}},
      {"uri-pct", "\"%\" [0-9a-fA-F]{2}", {}},
      {"uri-sub", "[!$&'()*+,;=]", {}},
  };
  return rules;
}

Result<std::string> FormatRuleName(std::string_view format) {
  static const char* const kFormats[] = {"date-time", "date", "time", "email",   "uuid",
                                         "uri",       "ipv4", "ipv6", "hostname"};
  for (const char* f : kFormats) {
    if (format == f) return std::string(f);
  }
  return Status::Unimplemented("unsupported format \"" + std::string(format) +
                               "\" (supported: date-time, date, time, email, uuid, uri, ipv4, "
                               "ipv6, hostname)");
}

bool IsStandardFormat(std::string_view format) {
  static const char* const kStandard[] = {
      // 2020-12 (and drafts 4 to 2019-09).
      "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
      "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
      "json-pointer", "relative-json-pointer", "regex",
      // Draft 3's names.
      "utc-millisec", "color", "style", "phone", "ip-address", "host-name"};
  for (const char* f : kStandard) {
    if (format == f) return true;
  }
  return false;
}

std::optional<uint64_t> FormatFixedLength(std::string_view format) {
  if (format == "date") return 10;
  if (format == "uuid") return 36;
  return std::nullopt;
}

}  // namespace folio::grammar::json_schema_internal
