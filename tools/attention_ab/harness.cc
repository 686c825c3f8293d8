// Side-by-side timing of up to four builds of the paged-attention kernel in
// one process (see ab.sh, which compiles each variant with its namespaces
// renamed so they link together). One decode-shaped call per variant per
// round, variants rotating which goes first; reports each variant's median
// and its per-round time relative to V0. Every variant's output is compared
// with V0's bit for bit first.
//
//   harness [-b BATCH] [-c CONTEXT] [-p PAGE_SIZE] [-t THREADS] [-d f32|bf16|i8]
//           [-r ROUNDS] [--huge | --huge-ab] [--in-order] [--short N]
//           [--target-ab TARGET | --dense-ab | --threads-ab | --dtype-ab DTYPE]
//           [--target TARGET] [-g QUERY_HEADS] [--head-dim D] [--prefill N]
//
// --prefill N gives each sequence N query rows (its last N positions, causal)
// instead of one: a prefill chunk's shape, whose many rows per K/V head take
// the kernel's shared-tile path.
//
// --huge-ab times V0 alone on two copies of the K/V pools, the first on
// 4 KiB pages and the second on transparent huge pages, reported as V0 and
// "V0 huge". --target-ab AVX2 (or SCALAR) times V0 dispatched to the CPU's
// best target and to the named one, reported as V0 and "V0 AVX2"; their
// outputs differ in the last bits (each target has its own lane-sum tree).
// --dense-ab times V0 on the paged pool and on the same rows laid out densely
// (one page per sequence, the bench's contiguous mode) in the same rounds;
// their outputs must be equal (contract 3). --threads-ab times V0 on the
// -t threads and on one thread, reported as V0 and "V0 1 thread": the
// per-round ratio is the speed-up, at most the thread count.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/gather.h"
#include "bench/timing.h"
#include "folio/attention/paged_attention.h"
#include "hwy/targets.h"

namespace folio::attention {
#ifndef FOLIO_AB_VARIANTS
#error "build with ab.sh"
#endif
#define FOLIO_AB_DECLARE(N)                                                                     \
  Status PagedAttention##N(const PagedAttentionParams&, std::span<const float>,                 \
                           const kv::PagedKvView&, const kv::PagedBatchView&, std::span<float>, \
                           ThreadPool*);
FOLIO_AB_DECLARE(V0)
FOLIO_AB_DECLARE(V1)
FOLIO_AB_DECLARE(V2)
FOLIO_AB_DECLARE(V3)
}  // namespace folio::attention

namespace {

using namespace folio;
using Kernel = Status (*)(const attention::PagedAttentionParams&, std::span<const float>,
                          const kv::PagedKvView&, const kv::PagedBatchView&, std::span<float>,
                          ThreadPool*);

double Median(std::vector<double> v) { return bench::Quantile(std::move(v), 0.5); }

}  // namespace

int main(int argc, char** argv) {
  uint64_t batch = 8, context = 16384, page = 16, q_heads = 32;
  size_t threads = 2;
  int rounds = 5;
  std::string dtype_name = "f32";
  bool huge = false, huge_ab = false, dense_ab = false, threads_ab = false, shuffle = true;
  uint64_t short_context = 0;  // 0: every sequence has `context` keys
  uint64_t head_dim = 128, prefill = 1;
  std::string target_ab;  // --target-ab NAME: V0 on the best target, V1 on NAME
  std::string target;     // --target NAME: every slot dispatched to NAME
  std::string dtype_ab;   // --dtype-ab NAME: V0 on -d's pools, V1 on NAME's
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "-b")
      batch = std::stoull(next());
    else if (a == "-c")
      context = std::stoull(next());
    else if (a == "-g")
      q_heads = std::stoull(next());
    else if (a == "-p")
      page = std::stoull(next());
    else if (a == "-t")
      threads = std::stoull(next());
    else if (a == "-d")
      dtype_name = next();
    else if (a == "-r")
      rounds = std::stoi(next());
    else if (a == "--huge")
      huge = true;
    else if (a == "--huge-ab")
      huge_ab = true;
    else if (a == "--dense-ab")
      dense_ab = true;
    else if (a == "--threads-ab")
      threads_ab = true;
    else if (a == "--in-order")
      shuffle = false;
    else if (a == "--short")
      short_context = std::stoull(next());
    else if (a == "--target-ab")
      target_ab = next();
    else if (a == "--target")
      target = next();
    else if (a == "--dtype-ab")
      dtype_ab = next();
    else if (a == "--head-dim")
      head_dim = std::stoull(next());
    else if (a == "--prefill")
      prefill = std::stoull(next());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const auto parse_dtype = [](const std::string& name) {
    if (name != "f32" && name != "bf16" && name != "i8") {
      std::fprintf(stderr, "-d and --dtype-ab take f32, bf16 or i8, not %s\n", name.c_str());
      std::exit(2);
    }
    return name == "f32" ? DType::kF32 : name == "bf16" ? DType::kBF16 : DType::kI8;
  };
  const DType dtype = parse_dtype(dtype_name);
  const DType second_dtype = dtype_ab.empty() ? dtype : parse_dtype(dtype_ab);
  // --target-ab: one version, dispatched to the CPU's best target (V0) and
  // to the named one (V1), e.g. AVX2 to see what a machine without
  // AVX-512 would run.
  int64_t pinned = 0, pinned_all = 0;
  for (const int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (!target_ab.empty() && target_ab == hwy::TargetName(t)) pinned = t;
    if (!target.empty() && target == hwy::TargetName(t)) pinned_all = t;
  }
  if (int{huge_ab} + int{dense_ab} + int{threads_ab} + int{!target_ab.empty()} +
          int{!dtype_ab.empty()} >
      1) {
    std::fprintf(stderr,
                 "--huge-ab, --dense-ab, --threads-ab, --target-ab and --dtype-ab each take both "
                 "slots; pick one\n");
    return 2;
  }
  if (dense_ab && dtype_name == "i8") {
    std::fprintf(stderr, "--dense-ab gathers rows without their scales: f32 or bf16 only\n");
    return 2;
  }
  if (!target.empty() && (pinned_all == 0 || !target_ab.empty())) {
    std::fprintf(stderr, "--target: %s is not a target this CPU and build have%s\n", target.c_str(),
                 target_ab.empty() ? "" : ", or --target-ab is given too");
    return 2;
  }
  if (!target_ab.empty() && pinned == 0) {
    std::fprintf(stderr, "--target-ab: %s is not a target this CPU and build have\n",
                 target_ab.c_str());
    return 2;
  }
  const bool one_version = huge_ab || dense_ab || threads_ab || pinned != 0 || !dtype_ab.empty();
  const int variants = one_version ? 2 : FOLIO_AB_VARIANTS;
  const uint64_t kv_heads = 8;
  if (head_dim == 0 || prefill == 0 || prefill > context || (prefill > 1 && short_context != 0)) {
    std::fprintf(stderr,
                 "--head-dim and --prefill take 1 or more, --prefill at most -c, and "
                 "not with --short\n");
    return 2;
  }
  if (q_heads == 0 || q_heads % kv_heads != 0) {
    std::fprintf(stderr, "-g takes a multiple of the 8 K/V heads\n");
    return 2;
  }
  const size_t esize = DTypeSize(dtype);
  const uint64_t pages_per_seq = (context + page - 1) / page, num_pages = pages_per_seq * batch;
  const uint64_t elements = num_pages * kv_heads * page * head_dim;
  const size_t bytes = elements * esize;

  // K/V pools, on huge pages when asked (the hint must precede the first touch).
  const auto allocate = [&](bool on_huge_pages, size_t size = 0) {
    if (size == 0) size = bytes;
    const size_t align = size_t{2} << 20, rounded = (size + align - 1) / align * align;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(align, rounded));
    if (p == nullptr) std::exit(3);
    if (on_huge_pages) madvise(p, rounded, MADV_HUGEPAGE);
    return p;
  };
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  // A pool pair of dtype dt; i8: codes in [-127, 127] and one scale per
  // row (its max |x| / 127).
  const auto fill = [&](DType dt, std::byte* pool, std::vector<float>& scales) {
    for (uint64_t i = 0; i < elements; ++i) {
      if (dt == DType::kI8) {
        pool[i] = static_cast<std::byte>(static_cast<int8_t>(std::lround(127 * uniform(rng))));
      } else {
        StoreElement(dt, pool, i, uniform(rng));
      }
    }
    if (dt == DType::kI8) {
      scales.resize(elements / head_dim);
      for (float& x : scales) x = (1.5f + uniform(rng)) / 127;
    }
  };
  const auto data_or_null = [](const std::vector<float>& v) {
    return v.empty() ? nullptr : v.data();
  };
  std::byte* keys = allocate(huge);
  std::byte* values = allocate(huge);
  std::vector<float> key_scales, value_scales;
  fill(dtype, keys, key_scales);
  fill(dtype, values, value_scales);
  const float* kscales = data_or_null(key_scales);
  const float* vscales = data_or_null(value_scales);
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  if (shuffle) std::shuffle(table.begin(), table.end(), rng);
  // A ragged batch with --short N: sequence 0 keeps `context` keys, the
  // others get N, and their table entries past their pages are dropped.
  std::vector<int32_t> lens(batch, static_cast<int32_t>(context)), indptr(batch + 1);
  uint64_t keys_read = context;
  for (uint64_t b = 1; b < batch; ++b) {
    if (short_context == 0 || short_context >= context) {
      keys_read += context;
      continue;
    }
    lens[b] = static_cast<int32_t>(short_context);
    keys_read += short_context;
    for (uint64_t j = (short_context + page - 1) / page; j < pages_per_seq; ++j) {
      table[b * pages_per_seq + j] = -1;
    }
  }
  const auto read_bytes = [&](int v) {
    return static_cast<double>(keys_read * kv_heads * head_dim *
                               DTypeSize(v == 1 ? second_dtype : dtype));
  };

  for (uint64_t b = 0; b <= batch; ++b) indptr[b] = static_cast<int32_t>(b * prefill);
  // The CSR batch: each sequence's live pages of its table row.
  std::vector<int32_t> page_indptr{0}, indices, last_page_len(batch);
  for (uint64_t b = 0; b < batch; ++b) {
    const auto n = static_cast<uint64_t>(lens[b]);
    for (uint64_t j = 0; j < (n + page - 1) / page; ++j) {
      indices.push_back(table[b * pages_per_seq + j]);
    }
    page_indptr.push_back(static_cast<int32_t>(indices.size()));
    last_page_len[b] = static_cast<int32_t>(n == 0 ? 0 : (n - 1) % page + 1);
  }
  const kv::PagedKvView view{keys, values,   dtype,   num_pages, kv_heads,
                             page, head_dim, kscales, vscales};
  const kv::PagedBatchView batch_view{page_indptr, indices, last_page_len, indptr};
  ThreadPool pool(threads);
  ThreadPool one_thread(1);  // --threads-ab's second slot

  // The second slot's pools: --huge-ab a copy on huge pages, --dense-ab the
  // same K/V rows gathered into the dense layout (one page of `context`
  // slots per sequence, as the bench's contiguous mode), --dtype-ab fresh
  // content of the other dtype.
  std::byte* second_keys = nullptr;
  std::byte* second_values = nullptr;
  std::vector<float> second_key_scales, second_value_scales;
  if (!dtype_ab.empty()) {
    second_keys = allocate(huge, elements * DTypeSize(second_dtype));
    second_values = allocate(huge, elements * DTypeSize(second_dtype));
    fill(second_dtype, second_keys, second_key_scales);
    fill(second_dtype, second_values, second_value_scales);
  }
  std::vector<int32_t> dense_table(batch);  // page b: sequence b's lens[b] keys
  std::iota(dense_table.begin(), dense_table.end(), 0);
  std::vector<int32_t> dense_indptr(batch + 1);  // one page a sequence
  std::iota(dense_indptr.begin(), dense_indptr.end(), 0);
  if (huge_ab || dense_ab) {
    second_keys = allocate(huge_ab || huge);
    second_values = allocate(huge_ab || huge);
  }
  if (huge_ab) {
    std::memcpy(second_keys, keys, bytes);
    std::memcpy(second_values, values, bytes);
  }
  if (dense_ab) bench::GatherToDense(view, batch_view, context, second_keys, second_values, &pool);
  const float* second_kscales = dtype_ab.empty() ? kscales : data_or_null(second_key_scales);
  const float* second_vscales = dtype_ab.empty() ? vscales : data_or_null(second_value_scales);
  const kv::PagedKvView second_view =
      dense_ab
          ? kv::PagedKvView{second_keys, second_values, dtype,   batch,  kv_heads,
                            context,     head_dim,      kscales, vscales}
          : kv::PagedKvView{second_keys, second_values, second_dtype,   num_pages,     kv_heads,
                            page,        head_dim,      second_kscales, second_vscales};
  const kv::PagedBatchView second_batch =
      dense_ab ? kv::PagedBatchView{dense_indptr, dense_table, lens, indptr} : batch_view;
  std::vector<float> q(batch * prefill * q_heads * head_dim), out(q.size()), want(q.size());
  for (float& x : q) x = uniform(rng);
  attention::PagedAttentionParams params;
  params.num_q_heads = q_heads;
  params.scale = 1 / std::sqrt(static_cast<double>(head_dim));
  const Kernel kernels[] = {
    attention::PagedAttentionV0,
#if FOLIO_AB_VARIANTS > 1
    attention::PagedAttentionV1,
#endif
#if FOLIO_AB_VARIANTS > 2
    attention::PagedAttentionV2,
#endif
#if FOLIO_AB_VARIANTS > 3
    attention::PagedAttentionV3,
#endif
  };

  const auto run = [&](int v, std::vector<float>& dst) {
    if (pinned != 0) hwy::SetSupportedTargetsForTest(v == 0 ? 0 : pinned);
    if (pinned_all != 0) hwy::SetSupportedTargetsForTest(pinned_all);
    const bool second = v == 1 && (huge_ab || dense_ab || !dtype_ab.empty());
    const Status s = kernels[one_version ? 0 : v](params, q, second ? second_view : view,
                                                  second ? second_batch : batch_view, dst,
                                                  v == 1 && threads_ab ? &one_thread : &pool);
    if (!s.ok()) {
      std::fprintf(stderr, "V%d: %s\n", v, s.ToString().c_str());
      std::exit(3);
    }
  };
  run(0, want);
  // "V1", or with --huge-ab / --dense-ab / --threads-ab / --target-ab
  // "V0 huge" / "V0 dense" / "V0 1 thread" / "V0 AVX2".
  const auto label = [&](int v) {
    if (!one_version || v == 0) return "V" + std::to_string(v);
    return "V0 " + (huge_ab            ? std::string("huge")
                    : dense_ab         ? std::string("dense")
                    : threads_ab       ? std::string("1 thread")
                    : dtype_ab.empty() ? target_ab
                                       : dtype_ab);
  };
  for (int v = 1; v < variants; ++v) {
    run(v, out);
    std::printf(
        "%s output %s V0's\n", label(v).c_str(),
        std::memcmp(out.data(), want.data(), out.size() * 4) == 0 ? "equals" : "differs from");
  }
  // Calls per sample: at least ~0.1 GB of K+V read (by every query row).
  const int calls = std::max(1, static_cast<int>(1e8 / static_cast<double>(2 * bytes * prefill)));
  std::vector<std::vector<double>> us(static_cast<size_t>(variants));
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < variants; ++k) {
      const int v = (k + r) % variants;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) run(v, out);
      us[static_cast<size_t>(v)].push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          calls);
    }
  }
  for (int v = 0; v < variants; ++v) {
    const auto& t = us[static_cast<size_t>(v)];
    std::vector<double> ratio;
    for (size_t r = 0; r < t.size(); ++r) ratio.push_back(t[r] / us[0][r]);
    const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
    const auto [rlo, rhi] = std::minmax_element(ratio.begin(), ratio.end());
    const double median = Median(t);
    const std::string ragged =
        short_context > 0 && short_context < context ? "/" + std::to_string(short_context) : "";
    std::printf(
        "%s %s b%llu c%llu%s p%llu t%zu%s: median %.0f us [%.0f..%.0f], %.1f GB/s; "
        "time / V0 per round: median %.3f [%.3f..%.3f]\n",
        label(v).c_str(), (v == 1 && !dtype_ab.empty() ? dtype_ab : dtype_name).c_str(),
        static_cast<unsigned long long>(batch), static_cast<unsigned long long>(context),
        ragged.c_str(), static_cast<unsigned long long>(page),
        v == 1 && threads_ab ? size_t{1} : threads, huge ? " huge" : "", median, *lo, *hi,
        2.0 * read_bytes(v) / median / 1e3, Median(ratio), *rlo, *rhi);
  }
  for (std::byte* p : {keys, values, second_keys, second_values}) std::free(p);
  return 0;
}
