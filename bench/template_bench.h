// `folio bench template`: the cost of rendering a chat template
// (folio::chat::Template::Render) for a 12-turn conversation with a
// Llama-3-style template (<|start_header_id|> ... <|eot_id|>), or the
// template in --template. Prints JSON: parse time, and microseconds per
// render (median, p10, p90 over samples of many renders each).
#ifndef FOLIO_BENCH_TEMPLATE_BENCH_H_
#define FOLIO_BENCH_TEMPLATE_BENCH_H_

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace folio::bench {

struct TemplateBenchOptions {
  std::string template_path;  // "" = the built-in Llama-3-style template
  std::string json_output;    // "" = stdout
  uint64_t turns = 12;        // messages after the system message
  uint64_t repeats = 15;      // samples
};

// The built-in template: Meta's Llama-3-Instruct chat template.
extern const char kLlama3Template[];

CLI::App* AddTemplateBenchCommand(CLI::App& bench, TemplateBenchOptions& options);
int RunTemplateBench(const TemplateBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_TEMPLATE_BENCH_H_
