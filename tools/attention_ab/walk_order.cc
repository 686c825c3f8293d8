// How fast two threads can walk a paged K/V pool in two orders, with no
// attention arithmetic: head-major (a head's 16-row block of every page,
// then the next head) or page-major (every head's block of a page, then the
// next page). Pools are [pages, 8 heads, 16 rows, 128] f32, each sequence's
// pages shuffled across the pool; every cache line is loaded once and the
// next block is prefetched line by line as the current one is read.
//
//   g++ -O2 -mavx512f -pthread tools/attention_ab/walk_order.cc -o walk_order
//   ./walk_order [PAGES_PER_SEQUENCE]   # default 1024: 8 sequences, 1 GiB of K+V
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr size_t kSeqs = 8, kHeads = 8;
constexpr size_t kBlockBytes = 16 * 128 * 4;  // one head's rows of one page

struct Pools {
  const char* k;
  const char* v;
  const std::vector<int>* table;  // [kSeqs, pages_per_seq]
  size_t pages_per_seq;
  size_t Offset(size_t seq, size_t page, size_t head) const {
    return (static_cast<size_t>((*table)[seq * pages_per_seq + page]) * kHeads + head) *
           kBlockBytes;
  }
};

// Reads the K and V block at `at`, prefetching the block at `next` (if any).
__m512 ReadBlock(const Pools& p, size_t at, const size_t* next, __m512 sum) {
  for (size_t b = 0; b < kBlockBytes; b += 64) {
    if (next) {
      _mm_prefetch(p.k + *next + b, _MM_HINT_T0);
      _mm_prefetch(p.v + *next + b, _MM_HINT_T0);
    }
    sum = _mm512_add_ps(sum, _mm512_load_ps(p.k + at + b));
    sum = _mm512_add_ps(sum, _mm512_load_ps(p.v + at + b));
  }
  return sum;
}

float Walk(const Pools& p, bool page_major, size_t seq_begin, size_t seq_end) {
  __m512 sum = _mm512_setzero_ps();
  const size_t n = p.pages_per_seq;
  for (size_t s = seq_begin; s < seq_end; ++s) {
    for (size_t outer = 0; outer < (page_major ? n : kHeads); ++outer) {
      for (size_t inner = 0; inner < (page_major ? kHeads : n); ++inner) {
        const size_t page = page_major ? outer : inner, head = page_major ? inner : outer;
        size_t next_page = page, next_head = head;
        if (page_major) {
          if (++next_head == kHeads) next_head = 0, ++next_page;
        } else {
          ++next_page;
        }
        const bool last = next_page == n;
        const size_t next = last ? 0 : p.Offset(s, next_page, next_head);
        sum = ReadBlock(p, p.Offset(s, page, head), last ? nullptr : &next, sum);
      }
    }
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return lanes[0];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t pages_per_seq = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  const size_t bytes = kSeqs * pages_per_seq * kHeads * kBlockBytes;
  const size_t huge = size_t{2} << 20, rounded = (bytes + huge - 1) / huge * huge;
  auto pool = [&] {
    auto* p = static_cast<char*>(std::aligned_alloc(huge, rounded));
    if (p == nullptr) std::exit(1);
    madvise(p, rounded, MADV_HUGEPAGE);
    std::memset(p, 1, bytes);
    return p;
  };
  char* k = pool();
  char* v = pool();
  std::vector<int> table(kSeqs * pages_per_seq);
  std::iota(table.begin(), table.end(), 0);
  std::mt19937 rng(1);
  std::shuffle(table.begin(), table.end(), rng);
  const Pools p{k, v, &table, pages_per_seq};
  for (int round = 0; round < 5; ++round) {
    for (const bool page_major : {false, true}) {
      const auto start = std::chrono::steady_clock::now();
      float other = 0;
      std::thread second([&] { other = Walk(p, page_major, kSeqs / 2, kSeqs); });
      const float mine = Walk(p, page_major, 0, kSeqs / 2);
      second.join();
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s: %.1f GB/s (checksum %g)\n", page_major ? "page-major" : "head-major",
                  2.0 * static_cast<double>(bytes) / s / 1e9, static_cast<double>(mine + other));
    }
  }
  std::free(k);
  std::free(v);
  return 0;
}
