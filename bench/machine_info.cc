#include "bench/machine_info.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace folio::bench {

uint64_t ParseCacheSize(const std::string& text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0 || i > 15) return 0;
  uint64_t unit = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'K':
        unit = 1ull << 10;
        ++i;
        break;
      case 'M':
        unit = 1ull << 20;
        ++i;
        break;
      case 'G':
        unit = 1ull << 30;
        ++i;
        break;
      default:
        break;
    }
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
  return i == text.size() ? value * unit : 0;
}

MachineInfo ReadMachineInfo() {
  MachineInfo info;
  info.cpu_model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      const size_t start = line.find_first_not_of(' ', colon + 1);
      if (start != std::string::npos) info.cpu_model = line.substr(start);
    }
    break;
  }
  info.cores = std::thread::hardware_concurrency();

  // index3 is the L3 on x86 Linux; check `level` rather than trust the index.
  for (int index = 3; index >= 0; --index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level");
    int level = 0;
    if (!(level_file >> level) || level != 3) continue;
    std::ifstream size_file(dir + "/size");
    std::string size_text;
    if (std::getline(size_file, size_text)) {
      const uint64_t bytes = ParseCacheSize(size_text);
      if (bytes != 0) {
        info.llc_bytes = bytes;
        info.llc_source = dir + "/size";
        return info;
      }
    }
  }
  info.llc_bytes = kFallbackLlcBytes;
  info.llc_source = "fallback";
  return info;
}

std::array<double, 3> ReadLoadAverage() {
  std::array<double, 3> load{0.0, 0.0, 0.0};
  std::ifstream in("/proc/loadavg");
  if (!(in >> load[0] >> load[1] >> load[2])) return {0.0, 0.0, 0.0};
  return load;
}

CpuSnapshot TakeCpuSnapshot() {
  CpuSnapshot snap;
  snap.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::ifstream in("/proc/stat");
  std::string cpu;
  // cpu user nice system idle iowait irq softirq steal ...
  uint64_t f[8] = {};
  if (in >> cpu >> f[0] >> f[1] >> f[2] >> f[3] >> f[4] >> f[5] >> f[6] >> f[7] && cpu == "cpu") {
    const double tick = 1.0 / static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
    snap.busy_s = static_cast<double>(f[0] + f[1] + f[2] + f[5] + f[6]) * tick;
    snap.steal_s = static_cast<double>(f[7]) * tick;
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    auto seconds = [](const timeval& tv) {
      return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
    };
    snap.self_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  return snap;
}

OtherLoad LoadBetween(const CpuSnapshot& before, const CpuSnapshot& after) {
  const double wall = after.wall_s - before.wall_s;
  if (!(wall > 0.0)) return {};
  const double others = (after.busy_s - before.busy_s) - (after.self_s - before.self_s);
  // /proc/stat counts in clock ticks, so a short interval can come out a
  // tick below zero.
  return {std::max(0.0, others / wall), std::max(0.0, (after.steal_s - before.steal_s) / wall)};
}

}  // namespace folio::bench
