// Writes the seed corpus for fuzz_descriptor: small valid Hurray
// descriptors of every layout, element type and quantization scheme folio
// accepts, from the same generator as the property tests.
//
// Usage: descriptor_seeds OUT_DIR [COUNT]   (default 64 descriptors)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "random_descriptor.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR [COUNT]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out = argv[1];
  const long count = argc == 3 ? std::strtol(argv[2], nullptr, 10) : 64;
  std::filesystem::create_directories(out);
  folio::format::testing::RandomDescriptors gen(0xdeca1);
  for (long i = 0; i < count; ++i) {
    const auto bytes = gen.Next().ToBytes();
    std::ofstream f(out / ("descriptor-" + std::to_string(i) + ".hrry"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::fprintf(stderr, "descriptor_seeds: cannot write to %s\n", out.c_str());
      return 1;
    }
  }
  return 0;
}
