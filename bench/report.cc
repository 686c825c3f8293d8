#include "bench/report.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench/memory_bandwidth.h"

namespace folio::bench {

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Status EmitJson(const nlohmann::json& report, const std::string& path) {
  const std::string text = report.dump(2) + "\n";
  if (path.empty()) {
    std::cout << text;
    return Status::Ok();
  }
  return WriteTextFile(path, text);
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

nlohmann::json MachineJson(const MachineInfo& machine, const std::array<double, 3>& load_at_start,
                           const OtherLoad& run_load) {
  return {{"cpu_model", machine.cpu_model},           {"cores", machine.cores},
          {"llc_bytes", machine.llc_bytes},           {"llc_source", machine.llc_source},
          {"simd_target", DispatchedSimdTarget()},    {"load_average_at_start", load_at_start},
          {"load_average_at_end", ReadLoadAverage()}, {"other_load_cores", run_load.other_cores},
          {"steal_cores", run_load.steal_cores}};
}

}  // namespace folio::bench
