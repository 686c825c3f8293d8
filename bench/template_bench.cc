#include "bench/template_bench.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/machine_info.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "folio/chat/template.h"

namespace folio::bench {

const char kLlama3Template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";

namespace {

// A system message and `turns` alternating user / assistant messages of a
// few hundred bytes each, as a chat request carries them.
nlohmann::ordered_json Conversation(uint64_t turns) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"},
                      {"content",
                       "You are a helpful assistant. Answer concisely and cite the "
                       "documents you were given when you use them."}});
  for (uint64_t i = 0; i < turns; ++i) {
    const bool user = i % 2 == 0;
    std::string content = user ? "Question " + std::to_string(i / 2 + 1) +
                                     ": how does a paged KV cache map a token's position to the "
                                     "page that holds its keys and values? "
                               : " A block table maps each logical page of the sequence to a "
                                 "physical page; position p sits on logical page p / P at "
                                 "offset p % P, and the table names the physical page. ";
    content += user ? "Please keep it short." : "That is all the attention kernel needs.\n";
    messages.push_back({{"role", user ? "user" : "assistant"}, {"content", content}});
  }
  return {{"messages", messages},
          {"bos_token", "<|begin_of_text|>"},
          {"eos_token", "<|eot_id|>"},
          {"add_generation_prompt", true}};
}

}  // namespace

CLI::App* AddTemplateBenchCommand(CLI::App& bench, TemplateBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "template", "chat template render time for a multi-turn conversation, as JSON");
  cmd->add_option("--template", o.template_path,
                  "a Jinja file (default: a Llama-3-style template)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--turns", o.turns, "user/assistant messages after the system one")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--repeats", o.repeats, "timed samples")->check(CLI::Range(1, 1000));
  return cmd;
}

int RunTemplateBench(const TemplateBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench template: " << s.ToString() << "\n";
    return 1;
  };
  std::string source = kLlama3Template;
  if (!o.template_path.empty()) {
    std::ifstream in(o.template_path);
    if (!in) return fail(Status::IoError("cannot read " + o.template_path));
    std::stringstream text;
    text << in.rdbuf();
    source = text.str();
  }
  const nlohmann::ordered_json vars = Conversation(o.turns);

  TimingOptions topt;
  topt.repeats = o.repeats;
  Status error;
  const Timing parse = TimeCalls(
      [&] {
        Result<chat::Template> t = chat::Template::Parse(source);
        if (!t && error.ok()) error = t.error();
      },
      topt);
  if (!error.ok()) return fail(error);
  const chat::Template t = *chat::Template::Parse(source);
  Result<std::string> first = t.Render(vars);
  if (!first) return fail(first.error());
  const Timing render = TimeCalls(
      [&] {
        Result<std::string> r = t.Render(vars);
        if (!r && error.ok()) error = r.error();
      },
      topt);
  if (!error.ok()) return fail(error);

  const MachineInfo machine = ReadMachineInfo();
  nlohmann::json report = {
      {"benchmark", "template"},
      {"command", command},
      {"template", o.template_path.empty() ? "built-in Llama-3-style" : o.template_path},
      {"template_bytes", source.size()},
      {"messages", o.turns + 1},
      {"output_bytes", first->size()},
      {"parse_us", {{"median", parse.median_us}, {"p10", parse.p10_us}, {"p90", parse.p90_us}}},
      {"render_us",
       {{"median", render.median_us},
        {"p10", render.p10_us},
        {"p90", render.p90_us},
        {"min", render.min_us},
        {"samples", render.repeats},
        {"renders_per_sample", render.calls_per_sample}}},
      {"machine", {{"cpu_model", machine.cpu_model}, {"cores", machine.cores}}},
  };
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench
