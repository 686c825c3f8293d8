// --quick shrinks a benchmark. Each listed option takes its quick value
// unless the command line gave it, so `--quick --num-seqs 16` runs 16
// (comparing a field with its default instead would override an explicit
// value that happens to equal the default).
#ifndef FOLIO_BENCH_QUICK_DEFAULTS_H_
#define FOLIO_BENCH_QUICK_DEFAULTS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace folio::bench {

struct QuickDefault {
  std::string option;           // e.g. "--num-seqs"
  std::function<void()> apply;  // sets the option's field to its quick value
};

// Runs after `cmd` is parsed; quick must outlive the parse.
inline void SetQuickDefaults(CLI::App* cmd, const bool* quick, std::vector<QuickDefault> defaults) {
  cmd->callback([cmd, quick, defaults = std::move(defaults)] {
    if (!*quick) return;
    for (const QuickDefault& d : defaults) {
      if (cmd->count(d.option) == 0) d.apply();
    }
  });
}

}  // namespace folio::bench

#endif  // FOLIO_BENCH_QUICK_DEFAULTS_H_
