#include "folio/chat/template.h"

#include "chat/ast.h"
#include "chat/interpreter.h"
#include "chat/parser.h"
#include "chat/value.h"
#include "folio/core/str_cat.h"

namespace folio::chat {
namespace {

using internal::Kind;
using internal::Value;

// A JSON value as Python's json.loads gives it: integers are ints (an
// unsigned past int64 becomes a float), objects keep their key order.
// Strings and keys are borrowed from the caller's JSON, which outlives the
// render.
template <typename Json>
Result<Value> FromJson(const Json& j, uint32_t depth) {
  if (depth >= internal::kMaxNesting) {
    return Status::ResourceExhausted(
        StrCat("the variables nest deeper than ", internal::kMaxNesting, " levels"));
  }
  switch (j.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Status::Unimplemented(
            StrCat("the integer ", u, " in the variables does not fit in 64 bits"));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case Json::value_t::string:
      return Value::Borrowed(j.template get_ref<const std::string&>());
    case Json::value_t::binary:
      return Status::InvalidArgument("binary JSON values are not supported");
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        FOLIO_ASSIGN_OR_RETURN(Value v, FromJson(e, depth + 1));
        items.push_back(std::move(v));
      }
      return *internal::MakeList(std::move(items));
    }
    case Json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        FOLIO_ASSIGN_OR_RETURN(Value v, FromJson(it.value(), depth + 1));
        items.emplace_back(Value::Borrowed(it.key()), std::move(v));
      }
      return *internal::MakeDict(std::move(items));
    }
  }
  return Value::None();
}

template <typename Json>
Result<std::string> RenderJson(const internal::Program& program, const TemplateLimits& limits,
                               const RenderOptions& options, const Json& variables) {
  if (!variables.is_object()) {
    return Status::InvalidArgument(
        StrCat("template variables must be a JSON object, not ", variables.type_name()));
  }
  // Only the names the template mentions can be read; the rest are skipped.
  std::vector<Value> vars(program.symbols.size());
  for (auto it = variables.begin(); it != variables.end(); ++it) {
    const auto sym = program.symbol_ids.find(it.key());
    if (sym == program.symbol_ids.end()) continue;
    FOLIO_ASSIGN_OR_RETURN(vars[static_cast<size_t>(sym->second)], FromJson(it.value(), 0));
  }
  return internal::RenderProgram(program, limits, options, std::move(vars));
}

}  // namespace

Result<Template> Template::Parse(std::string_view source, TemplateLimits limits) {
  FOLIO_ASSIGN_OR_RETURN(std::unique_ptr<internal::Program> program,
                         internal::ParseProgram(source, limits));
  return Template(std::shared_ptr<const internal::Program>(std::move(program)), limits);
}

Result<std::string> Template::Render(const nlohmann::json& variables,
                                     const RenderOptions& options) const {
  return RenderJson(*program_, limits_, options, variables);
}

Result<std::string> Template::Render(const nlohmann::ordered_json& variables,
                                     const RenderOptions& options) const {
  return RenderJson(*program_, limits_, options, variables);
}

}  // namespace folio::chat
