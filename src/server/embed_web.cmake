# Writes OUT, a C++ file holding the files of DIR named in FILES (a
# comma-separated list) as byte arrays, and folio::server::WebAsset(name) returning one.
# Run by a custom command at build time, so the page ships inside the
# binary and needs no files beside it.
string(REPLACE "," ";" FILES "${FILES}")
set(body "// Generated from src/server/web by embed_web.cmake; do not edit.\n")
string(APPEND body "#include <string_view>\n\nnamespace folio::server {\nnamespace {\n\n")
set(table "")
set(index 0)
foreach(name IN LISTS FILES)
  file(READ "${DIR}/${name}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(APPEND body "constexpr char kFile${index}[] = {${bytes} 0};\n")
  string(APPEND table "  if (name == \"${name}\") return std::string_view(kFile${index}, ${size});\n")
  math(EXPR index "${index} + 1")
endforeach()
string(APPEND body "\n}  // namespace\n\nstd::string_view WebAsset(std::string_view name) {\n")
string(APPEND body "${table}  return {};\n}\n\n}  // namespace folio::server\n")
file(WRITE "${OUT}" "${body}")
