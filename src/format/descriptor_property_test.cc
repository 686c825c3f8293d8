// Properties over many random descriptors: valid ones round-trip exactly,
// and no mutation of a valid encoding crashes the decoder or decodes into
// something that re-encodes differently.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "folio/format/descriptor.h"
#include "random_descriptor.h"
#include "test_bytes.h"

namespace folio::format {
namespace {

using testing::Bytes;
using testing::RandomDescriptors;

constexpr int kDescriptors = 5000;
constexpr int kMutants = 50000;

TEST(DescriptorProperty, RandomValidDescriptorsRoundTrip) {
  RandomDescriptors gen(0x5eed);
  std::set<uint8_t> layouts;
  int quantized = 0;
  for (int i = 0; i < kDescriptors; ++i) {
    const TensorDescriptor d = gen.Next();
    const Bytes bytes = d.ToBytes();
    ASSERT_EQ(bytes.size(), d.encoded_size());
    auto back = TensorDescriptor::FromBytes(bytes);
    ASSERT_TRUE(back.ok()) << "descriptor " << i << ": " << back.error().ToString();
    ASSERT_EQ(*back, d) << "descriptor " << i;
    ASSERT_EQ(back->ToBytes(), bytes) << "descriptor " << i;
    layouts.insert(LayoutTag(d.layout()));
    quantized += d.quantization().has_value() ? 1 : 0;
  }
  // The generator reaches every layout, and quantization often enough.
  EXPECT_EQ(layouts, (std::set<uint8_t>{0x01, 0x03, 0x0A}));
  EXPECT_GT(quantized, kDescriptors / 5);
}

// One random edit of the kind that breaks parsers: a flipped bit, a byte
// set to a boundary value, a field overwritten with a boundary integer,
// bytes inserted or removed.
void Mutate(RandomDescriptors& gen, Bytes& b) {
  static constexpr uint64_t kBoundaries[] = {0,
                                             1,
                                             2,
                                             3,
                                             4,
                                             7,
                                             8,
                                             63,
                                             64,
                                             0x7F,
                                             0x80,
                                             0xFF,
                                             0xFFFF,
                                             0xFFFFFFFF,
                                             0x7FFFFFFFFFFFFFFF,
                                             0xFFFFFFFFFFFFFFFF};
  const uint64_t n = b.size();
  switch (gen.Below(6)) {
    case 0:
      if (n) b[gen.Below(n)] ^= std::byte{static_cast<uint8_t>(1u << gen.Below(8))};
      break;
    case 1:
      if (n) b[gen.Below(n)] = static_cast<std::byte>(gen.Below(256));
      break;
    case 2: {
      if (n == 0) break;
      const uint64_t v = kBoundaries[gen.Below(std::size(kBoundaries))];
      const uint64_t width = uint64_t{1} << gen.Below(4);  // 1, 2, 4, 8
      const uint64_t at = gen.Below(n);
      for (uint64_t i = 0; i < width && at + i < n; ++i) {
        b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
      }
      break;
    }
    case 3:
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(gen.Below(n + 1)), gen.Below(17),
               static_cast<std::byte>(gen.Below(256)));
      break;
    case 4:
      if (n) {
        const uint64_t at = gen.Below(n);
        const uint64_t len = std::min<uint64_t>(1 + gen.Below(16), n - at);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(at + len));
      }
      break;
    default:
      b.resize(gen.Below(n + 1));
      break;
  }
}

TEST(DescriptorProperty, MutationsAreRefusedOrReencodeIdentically) {
  RandomDescriptors gen(0xf00d);
  int accepted = 0;
  for (int i = 0; i < kMutants; ++i) {
    Bytes b = gen.Next().ToBytes();
    const uint64_t edits = 1 + gen.Below(3);
    for (uint64_t e = 0; e < edits; ++e) Mutate(gen, b);
    // Half the time keep descriptor_length consistent, so mutations reach
    // past the length check.
    if (b.size() >= 10 && gen.OneIn(2)) b = testing::Finish(std::move(b));
    auto d = TensorDescriptor::FromBytes(b);
    if (!d.ok()) {
      ASSERT_FALSE(d.error().message().empty());
      continue;
    }
    ++accepted;
    ASSERT_EQ(d->ToBytes(), b) << "mutant " << i;
  }
  // Some mutants stay valid (a changed dimension, alignment or layer);
  // the property is exercised on both sides.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kMutants);
}

// Every element of every valid random batch resolves inside the pool, to
// the index the spec's formula gives.
TEST(BlockPagedProperty, ElementOffsetMatchesTheFormulaAndStaysInThePool) {
  RandomDescriptors gen(0xab);
  for (int iter = 0; iter < 300; ++iter) {
    const auto page_size = static_cast<uint32_t>(1 + gen.Below(5));
    const uint64_t num_pages = 1 + gen.Below(6);
    const auto num_seqs = static_cast<uint32_t>(gen.Below(4));
    const uint64_t heads = 1 + gen.Below(3), head_dim = 1 + gen.Below(4);
    auto l = BlockPagedLayout::Create(page_size, num_pages, 0, num_seqs);
    ASSERT_TRUE(l.ok());
    std::vector<uint32_t> seq_ptr{0}, table;
    for (uint32_t s = 0; s < num_seqs; ++s) {
      const uint64_t pages = gen.Below(4);
      for (uint64_t p = 0; p < pages; ++p) {
        table.push_back(static_cast<uint32_t>(gen.Below(num_pages)));
      }
      seq_ptr.push_back(static_cast<uint32_t>(table.size()));
    }
    ASSERT_TRUE(l->ValidateIndexBuffers(seq_ptr, table).ok());
    const std::vector<uint64_t> shape{table.size() * page_size, heads, head_dim};
    const uint64_t pool = num_pages * page_size * heads * head_dim;
    for (uint32_t s = 0; s < num_seqs; ++s) {
      const uint64_t tokens = (seq_ptr[s + 1] - seq_ptr[s]) * page_size;
      for (uint64_t t = 0; t <= tokens; ++t) {
        for (uint64_t h = 0; h < heads; ++h) {
          for (uint64_t dim = 0; dim < head_dim; ++dim) {
            auto r = l->ElementOffset(shape, seq_ptr, table, {s, t, h, dim});
            if (t == tokens) {
              ASSERT_EQ(r.status().code(), StatusCode::kOutOfRange);
              continue;
            }
            ASSERT_TRUE(r.ok()) << r.error().ToString();
            const uint64_t phys = table[seq_ptr[s] + t / page_size];
            EXPECT_EQ(*r, ((phys * page_size + t % page_size) * heads + h) * head_dim + dim);
            EXPECT_LT(*r, pool);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace folio::format
