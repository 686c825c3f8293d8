// What every benchmark report shares: number formatting, writing the JSON
// out, and the machine section.
#ifndef FOLIO_BENCH_REPORT_H_
#define FOLIO_BENCH_REPORT_H_

#include <array>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/machine_info.h"
#include "folio/core/status.h"

namespace folio::bench {

// v with `digits` decimals.
std::string Fixed(double v, int digits);

// Writes text to path (truncating); IoError naming the path on failure.
Status WriteTextFile(const std::string& path, const std::string& text);

// The report, indented, to stdout when path is empty, else to path.
Status EmitJson(const nlohmann::json& report, const std::string& path);

// The report's "machine" object: CPU, cores, LLC, dispatched SIMD target,
// load averages at the start and now, and the other processes' load (and
// steal) during the run.
nlohmann::json MachineJson(const MachineInfo& machine, const std::array<double, 3>& load_at_start,
                           const OtherLoad& run_load);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_REPORT_H_
