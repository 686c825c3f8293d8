// What a benchmark report says about the machine it ran on: CPU model,
// logical cores, last-level cache size and the load around the run, read
// from /proc and sysfs (Linux). Nothing here fails: an unreadable source
// gives a fallback value and says so in `llc_source`.
#ifndef FOLIO_BENCH_MACHINE_INFO_H_
#define FOLIO_BENCH_MACHINE_INFO_H_

#include <array>
#include <cstdint>
#include <string>

namespace folio::bench {

// Used when sysfs does not report an L3; a typical server LLC slice.
inline constexpr uint64_t kFallbackLlcBytes = 32ull << 20;

struct MachineInfo {
  std::string cpu_model;   // "model name" of /proc/cpuinfo, or "unknown"
  uint64_t cores = 0;      // std::thread::hardware_concurrency()
  uint64_t llc_bytes = 0;  // last-level (L3) cache size
  std::string llc_source;  // the sysfs file read, or "fallback"
};

MachineInfo ReadMachineInfo();

// Parses a sysfs cache size such as "266240K", "32M" or "1024" into bytes;
// 0 if malformed.
uint64_t ParseCacheSize(const std::string& text);

// The 1, 5 and 15 minute load averages of /proc/loadavg (zeros if
// unreadable): a report carries them so a reader can tell a run that shared
// its cores.
std::array<double, 3> ReadLoadAverage();

// CPU time spent machine-wide, by this process and stolen by the host, at
// one moment (/proc/stat, getrusage). Two snapshots tell how busy the other
// processes kept the cores in between: on a shared machine a row measured
// while someone else compiled is worth less, and the report says so.
struct CpuSnapshot {
  double wall_s = 0.0;   // steady clock
  double busy_s = 0.0;   // all cores: user + nice + system + irq + softirq
  double steal_s = 0.0;  // all cores: time the hypervisor ran something else
  double self_s = 0.0;   // this process: user + system
};

CpuSnapshot TakeCpuSnapshot();

struct OtherLoad {
  double other_cores = 0.0;  // average cores busy with other processes
  double steal_cores = 0.0;  // average cores stolen by the hypervisor
};

OtherLoad LoadBetween(const CpuSnapshot& before, const CpuSnapshot& after);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_MACHINE_INFO_H_
