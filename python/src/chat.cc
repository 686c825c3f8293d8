// folio._folio.render_chat_template: a chat template's source rendered with
// template variables by folio's Jinja engine (folio/chat/template.h), for
// folio.apply_chat_template when it is given a template rather than a model.
// folio._folio.ChatOutputReader: LLM.chat's reply reader (chat_prompt.h).
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bindings.h"
#include "chat_prompt.h"
#include "folio/chat/template.h"

namespace folio::python {
namespace nb = nanobind;

namespace {

std::string RenderChatTemplate(const std::string& source, const std::string& variables_json,
                               std::optional<int64_t> strftime_now) {
  const nlohmann::ordered_json vars =
      nlohmann::ordered_json::parse(variables_json, nullptr, /*allow_exceptions=*/false);
  if (!vars.is_object()) {
    ThrowIfError(Status::InvalidArgument("template variables must be a JSON object"));
  }
  Result<chat::Template> t = chat::Template::Parse(source);
  ThrowIfError(t.status());
  chat::RenderOptions options;
  options.now_epoch_seconds = strftime_now;
  std::string text;
  {
    nb::gil_scoped_release release;
    Result<std::string> r = t->Render(vars, options);
    nb::gil_scoped_acquire acquire;
    ThrowIfError(r.status());
    text = std::move(*r);
  }
  return text;
}

nb::str Utf8(const std::string& s) {
  return nb::steal<nb::str>(
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

// (content, reasoning or None, [(id, name, arguments)] or None without tools).
nb::tuple ReadChatOutput(const ChatOutputReader& reader, const std::string& text,
                         uint64_t call_id_seed) {
  ChatOutputReader::Message m = reader.Read(text, call_id_seed);
  nb::object reasoning = nb::none();
  if (m.reasoning) reasoning = Utf8(*m.reasoning);
  nb::object calls = nb::none();
  if (reader.reads_tool_calls()) {
    nb::list list;
    for (const serving::ToolCall& c : m.calls) {
      list.append(nb::make_tuple(Utf8(c.id), Utf8(c.name), Utf8(c.arguments)));
    }
    calls = list;
  }
  return nb::make_tuple(Utf8(m.content), reasoning, calls);
}

}  // namespace

void BindChat(nb::module_& m) {
  nb::class_<ChatOutputReader>(
      m, "ChatOutputReader",
      "How a chat reply's text becomes its message (folio serve's reader): tool calls in the "
      "chat template's format, <think> reasoning.")
      .def("read", &ReadChatOutput, nb::arg("text"), nb::arg("call_id_seed"),
           "(content, reasoning_content or None, [(id, name, arguments JSON)] or None when "
           "the request had no tools).")
      .def_prop_ro("harmony", &ChatOutputReader::harmony,
                   "Whether the reply is harmony messages (gpt-oss), read from its special "
                   "tokens: its text must keep them (skip_special_tokens false).");
  m.def("render_chat_template", &RenderChatTemplate, nb::arg("source"), nb::arg("variables_json"),
        nb::arg("strftime_now") = nb::none(),
        "Renders a Jinja chat template with the variables (a JSON object), as jinja2 does "
        "under Hugging Face's apply_chat_template. ValueError for a template that does not "
        "parse or that raises (the message starts 'chat template raised: '); "
        "NotImplementedError for a construct folio does not support.");
}

}  // namespace folio::python
