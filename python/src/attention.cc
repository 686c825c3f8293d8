// folio.paged_attention: folio's paged-attention kernel over NumPy arrays.
//
// The NumPy conventions (query [B, H_q, L, D], pages [P, H_kv, page_size, D],
// a -1 padded block table) are the kernel's head-major query layout and the
// engine's pool layout, so C-contiguous query and page arrays are read in
// place. Only the small metadata arrays may be copied (when they are not
// int32), a float16 or float64 query is converted to float32, and the output
// is allocated here. Every check — the binding's and the kernel's own
// ValidatePagedAttention — runs before any K/V byte is read.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bindings.h"
#include "folio/attention/paged_attention.h"
#include "folio/core/dtype.h"
#include "folio/core/str_cat.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/paged_view.h"

namespace nb = nanobind;

namespace folio::python {
namespace {

// Any dtype, C-contiguous, in CPU memory; nanobind copies a non-contiguous
// array into a contiguous one on the way in (and only then). The query is
// taken this way too, not as a float32 array, so that nanobind cannot
// silently convert an integer or bool query: the binding checks its dtype.
using AnyArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy, float>;

[[noreturn]] void RaiseValueError(const std::string& message) {
  throw nb::value_error(message.c_str());
}
[[noreturn]] void RaiseTypeError(const std::string& message) {
  throw nb::type_error(message.c_str());
}

template <typename Array>
std::string ShapeOf(const Array& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    s += StrCat(i > 0 ? ", " : "", a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

template <typename Array>
void RequireNdim(const Array& a, size_t ndim, const char* name, const char* axes) {
  if (a.ndim() != ndim) {
    RaiseValueError(StrCat(name, " must be ", ndim, "-D ", axes, ", got shape ", ShapeOf(a)));
  }
}

std::string DTypeString(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  const char* kind = nullptr;
  switch (static_cast<Code>(t.code)) {
    case Code::Int:
      kind = "int";
      break;
    case Code::UInt:
      kind = "uint";
      break;
    case Code::Float:
      kind = "float";
      break;
    case Code::Bfloat:
      kind = "bfloat";
      break;
    case Code::Complex:
      kind = "complex";
      break;
    case Code::Bool:
      kind = "bool";
      break;
    default:
      return StrCat("dtype code ", int{t.code}, " of ", int{t.bits}, " bits");
  }
  return StrCat(kind, int{t.bits});
}

// The K/V element type. NumPy has no bfloat16, so bf16 pages arrive as
// their uint16 bit patterns; float16 is NumPy's own half type.
DType KvDType(const AnyArray& pages) {
  using Code = nb::dlpack::dtype_code;
  const nb::dlpack::dtype t = pages.dtype();
  if (t == nb::dtype<float>()) return DType::kF32;
  if (t == nb::dtype<uint16_t>()) return DType::kBF16;
  if (t.lanes == 1 && t.bits == 16 && t.code == static_cast<uint8_t>(Code::Float)) {
    return DType::kF16;
  }
  if (t.lanes == 1 && t.bits == 16 && t.code == static_cast<uint8_t>(Code::Bfloat)) {
    return DType::kBF16;
  }
  if (t == nb::dtype<int8_t>()) return DType::kI8;
  if (t == nb::dtype<uint8_t>()) return DType::kF8E4M3;
  RaiseTypeError(
      StrCat("key_pages must be float32, float16, uint16 holding bfloat16 bits, int8 codes or "
             "uint8 holding FP8 E4M3 bits; got ",
             DTypeString(t)));
}

// The query must be a float array: float32 is read in place, float16 and
// float64 are converted to float32 (QueryAsF32). An integer or bool query is
// refused rather than converted: it is almost surely a mistake, and uint16
// would be ambiguous (uint16 pages mean bfloat16 bits).
void CheckQueryDType(const AnyArray& query) {
  using Code = nb::dlpack::dtype_code;
  const nb::dlpack::dtype t = query.dtype();
  const bool is_float = t.lanes == 1 && t.code == static_cast<uint8_t>(Code::Float) &&
                        (t.bits == 16 || t.bits == 32 || t.bits == 64);
  if (!is_float) {
    RaiseTypeError(
        StrCat("query must be float32 (float16 and float64 are converted); got ", DTypeString(t)));
  }
}

std::span<const float> QueryAsF32(const AnyArray& query, std::vector<float>& storage) {
  const auto* bytes = static_cast<const std::byte*>(query.data());
  const size_t n = query.size();
  switch (query.dtype().bits) {
    case 32:
      return {static_cast<const float*>(query.data()), n};
    case 16:
      storage.resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + i * sizeof(h), sizeof(h));
        storage[i] = F16BitsToF32(h);  // exact
      }
      return storage;
    default:  // 64, as CheckQueryDType allows
      storage.resize(n);
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, bytes + i * sizeof(d), sizeof(d));
        storage[i] = static_cast<float>(d);  // round to nearest, as NumPy's astype
      }
      return storage;
  }
}

// The threads a call runs on: 0 means every core, and a request above the
// core count is clamped to it. More threads than cores cannot make the
// kernel faster, the result bits do not depend on the count, and an
// unbounded request would start (or try to reserve) that many threads.
size_t ThreadsFor(int64_t num_threads) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (num_threads == 0) return cores;
  return std::min(static_cast<size_t>(num_threads), cores);
}

// Copies n integers of type T into int32, refusing (not wrapping) a value
// outside int32's range.
template <typename T>
void CopyToInt32(const AnyArray& a, const char* name, std::vector<int32_t>& out) {
  const auto* bytes = static_cast<const std::byte*>(a.data());
  out.resize(a.size());
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    if (!std::in_range<int32_t>(v)) {
      RaiseValueError(StrCat(name, " element ", i, " is ", +v, ", outside int32"));
    }
    out[i] = static_cast<int32_t>(v);
  }
}

// An integer array as int32 values: int32 is read in place, any other
// integer dtype is copied into `storage` with a range check.
std::span<const int32_t> AsInt32(const AnyArray& a, const char* name,
                                 std::vector<int32_t>& storage) {
  using Code = nb::dlpack::dtype_code;
  const nb::dlpack::dtype t = a.dtype();
  if (t == nb::dtype<int32_t>()) return {static_cast<const int32_t*>(a.data()), a.size()};
  const bool is_signed = t.code == static_cast<uint8_t>(Code::Int);
  const bool is_unsigned = t.code == static_cast<uint8_t>(Code::UInt);
  if (t.lanes == 1 && (is_signed || is_unsigned)) {
    switch (t.bits) {
      case 8:
        is_signed ? CopyToInt32<int8_t>(a, name, storage) : CopyToInt32<uint8_t>(a, name, storage);
        return storage;
      case 16:
        is_signed ? CopyToInt32<int16_t>(a, name, storage)
                  : CopyToInt32<uint16_t>(a, name, storage);
        return storage;
      case 32:
        CopyToInt32<uint32_t>(a, name, storage);  // int32 was handled above
        return storage;
      case 64:
        is_signed ? CopyToInt32<int64_t>(a, name, storage)
                  : CopyToInt32<uint64_t>(a, name, storage);
        return storage;
      default:
        break;
    }
  }
  RaiseTypeError(StrCat(name, " must be an integer array (int32 preferred); got ", DTypeString(t)));
}

// A quantized pool's scales, float32 [num_pages, num_kv_heads, page_size]
// (one per row, the pages' shape without head_dim), copied; refused for
// float pages.
std::vector<float> PageScales(const std::optional<AnyArray>& scales, const char* name,
                              DType kv_dtype, const AnyArray& pages) {
  if (!IsQuantized(kv_dtype)) {
    if (scales) {
      RaiseValueError(
          StrCat(name, " is only for int8 or FP8 (uint8) pages; these are ", DTypeName(kv_dtype)));
    }
    return {};
  }
  if (!scales) {
    RaiseValueError(StrCat(DTypeName(kv_dtype), " pages need ", name,
                           ": float32 [num_pages, num_kv_heads, page_size], code x scale = value"));
  }
  if (scales->dtype() != nb::dtype<float>()) {
    RaiseTypeError(StrCat(name, " must be float32; got ", DTypeString(scales->dtype())));
  }
  if (scales->ndim() != 3 || scales->shape(0) != pages.shape(0) ||
      scales->shape(1) != pages.shape(1) || scales->shape(2) != pages.shape(2)) {
    RaiseValueError(StrCat(name, " must be [num_pages, num_kv_heads, page_size] = [",
                           pages.shape(0), ", ", pages.shape(1), ", ", pages.shape(2), "]; got ",
                           ShapeOf(*scales)));
  }
  const auto* data = static_cast<const float*>(scales->data());
  return std::vector<float>(data, data + scales->size());
}

OutArray PagedAttentionBinding(const AnyArray& query, const AnyArray& key_pages,
                               const AnyArray& value_pages, const AnyArray& block_table,
                               const AnyArray& context_lens, int64_t page_size,
                               std::optional<double> scale, std::optional<std::string> mask,
                               int64_t num_threads, std::optional<AnyArray> key_scales,
                               std::optional<AnyArray> value_scales) {
  // Checked first: nothing below may allocate for an unreasonable request.
  if (num_threads < 0) {
    RaiseValueError(StrCat("num_threads must be >= 0 (0 = every core), got ", num_threads));
  }
  const size_t threads = ThreadsFor(num_threads);
  bool causal = false;
  if (mask) {
    if (*mask != "causal") {
      RaiseValueError(StrCat("mask must be None or 'causal', got ", Quote(*mask)));
    }
    causal = true;
  }
  RequireNdim(query, 4, "query", "[batch, num_q_heads, num_rows, head_dim]");
  CheckQueryDType(query);
  RequireNdim(key_pages, 4, "key_pages", "[num_pages, num_kv_heads, page_size, head_dim]");
  RequireNdim(value_pages, 4, "value_pages", "[num_pages, num_kv_heads, page_size, head_dim]");
  RequireNdim(block_table, 2, "block_table", "[batch, max_pages]");
  RequireNdim(context_lens, 1, "context_lens", "[batch]");
  for (size_t i = 0; i < 4; ++i) {
    if (key_pages.shape(i) != value_pages.shape(i)) {
      RaiseValueError(StrCat("key_pages ", ShapeOf(key_pages), " and value_pages ",
                             ShapeOf(value_pages), " differ in shape"));
    }
  }
  const DType kv_dtype = KvDType(key_pages);
  if (value_pages.dtype() != key_pages.dtype()) {
    RaiseTypeError(StrCat("value_pages is ", DTypeString(value_pages.dtype()), " but key_pages is ",
                          DTypeString(key_pages.dtype())));
  }
  const std::vector<float> kscales = PageScales(key_scales, "key_scales", kv_dtype, key_pages);
  const std::vector<float> vscales = PageScales(value_scales, "value_scales", kv_dtype, key_pages);
  if (page_size < 1) RaiseValueError(StrCat("page_size must be >= 1, got ", page_size));
  if (static_cast<uint64_t>(page_size) != key_pages.shape(2)) {
    RaiseValueError(StrCat("page_size ", page_size, " does not match key_pages axis 2 (",
                           key_pages.shape(2), ") of shape ", ShapeOf(key_pages)));
  }
  const uint64_t batch = query.shape(0);
  const uint64_t num_q_heads = query.shape(1);
  const uint64_t num_rows = query.shape(2);
  const uint64_t head_dim = query.shape(3);
  if (key_pages.shape(3) != head_dim) {
    RaiseValueError(StrCat("query head_dim ", head_dim, " does not match the pages' head_dim ",
                           key_pages.shape(3)));
  }
  if (block_table.shape(0) != batch) {
    RaiseValueError(
        StrCat("block_table has ", block_table.shape(0), " rows; query has batch ", batch));
  }
  if (context_lens.shape(0) != batch) {
    RaiseValueError(
        StrCat("context_lens has ", context_lens.shape(0), " entries; query has batch ", batch));
  }
  // The kernel accepts scale 0 (uniform weights); a caller passing 0 or a
  // negative scale has almost surely made a mistake, so the binding refuses.
  if (scale && !(std::isfinite(*scale) && *scale > 0)) {
    RaiseValueError(StrCat("scale must be finite and > 0, got ", *scale));
  }
  const double scale_value =
      scale ? *scale : (head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  if (batch * num_rows > static_cast<uint64_t>(INT32_MAX)) {
    RaiseValueError(StrCat("batch * num_rows = ", batch * num_rows, " exceeds int32"));
  }

  std::vector<int32_t> table_storage, context_storage;
  const std::span<const int32_t> table = AsInt32(block_table, "block_table", table_storage);
  const std::span<const int32_t> contexts = AsInt32(context_lens, "context_lens", context_storage);
  // Head-major queries: every sequence owns num_rows rows, the last
  // num_rows positions of its context.
  std::vector<int32_t> query_indptr(batch + 1);
  for (uint64_t b = 0; b <= batch; ++b) query_indptr[b] = static_cast<int32_t>(b * num_rows);

  // The padded table to the kernel's CSR form: each row's live pages, its
  // padding checked here (the kernel never sees it).
  std::vector<int32_t> page_indptr{0}, indices, last_page_len(batch);
  const uint64_t max_pages = block_table.shape(1), slots = key_pages.shape(2);
  for (uint64_t b = 0; b < batch; ++b) {
    const int32_t n = contexts[b];
    if (n < 0) RaiseValueError(StrCat("sequence ", b, ": context length ", n, " is negative"));
    const uint64_t pages = (static_cast<uint64_t>(n) + slots - 1) / slots;
    if (pages > max_pages) {
      RaiseValueError(StrCat("sequence ", b, ": context ", n, " needs ", pages,
                             " pages; the table row has ", max_pages));
    }
    const int32_t* row = table.data() + b * max_pages;
    indices.insert(indices.end(), row, row + pages);
    for (uint64_t i = pages; i < max_pages; ++i) {
      if (row[i] != -1) {
        RaiseValueError(StrCat("sequence ", b, ": block_table entry ", i,
                               " past the live pages must be -1 (got ", row[i], ")"));
      }
    }
    page_indptr.push_back(static_cast<int32_t>(indices.size()));
    last_page_len[b] =
        n == 0 ? 0 : static_cast<int32_t>((static_cast<uint64_t>(n) - 1) % slots + 1);
  }
  if (indices.size() > static_cast<uint64_t>(INT32_MAX)) {
    RaiseValueError(StrCat("the batch's ", indices.size(), " pages exceed int32"));
  }
  kv::PagedKvView kv{static_cast<const std::byte*>(key_pages.data()),
                     static_cast<const std::byte*>(value_pages.data()),
                     kv_dtype,
                     key_pages.shape(0),
                     key_pages.shape(1),
                     key_pages.shape(2),
                     head_dim};
  if (IsQuantized(kv_dtype)) {
    kv.key_scales = kscales.data();
    kv.value_scales = vscales.data();
  }
  const kv::PagedBatchView view{page_indptr, indices, last_page_len, query_indptr};
  attention::PagedAttentionParams params;
  params.num_q_heads = num_q_heads;
  params.scale = scale_value;
  params.causal = causal;
  params.layout = attention::QueryLayout::kHeadMajor;

  std::vector<float> query_storage;
  const std::span<const float> query_f32 = QueryAsF32(query, query_storage);

  const size_t out_size = query.size();
  auto* out = new float[out_size]();
  nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  Status status;
  {
    // The arrays stay referenced by this call's arguments while the GIL is
    // released; the output is not visible to Python yet.
    nb::gil_scoped_release release;
    std::unique_ptr<ThreadPool> pool;
    if (threads > 1) {
      Result<std::unique_ptr<ThreadPool>> created = ThreadPool::Create(threads);
      if (created.ok()) {
        pool = std::move(*created);
      } else {
        status = created.error();
      }
    }
    if (status.ok()) {
      status = attention::PagedAttention(params, query_f32, kv, view, {out, out_size}, pool.get());
    }
  }
  ThrowIfError(status);
  return OutArray(out, {batch, num_q_heads, num_rows, head_dim}, owner);
}

constexpr const char* kPagedAttentionDoc = R"doc(
Attention over a paged K/V cache, computed by folio's C++ kernel.

    out = softmax(scale * Q K^T + mask) V   per (sequence, query head, row)

Arguments (NumPy arrays, C-contiguous ones are read without copying):
  query         float32 [batch, num_q_heads, L, head_dim]; float16 and
                float64 are converted to float32; any other dtype (an
                integer, bool or uint16 array) is a TypeError.
  key_pages,
  value_pages   [num_pages, num_kv_heads, page_size, head_dim], both of one
                dtype: float32, float16, uint16 holding bfloat16 bit
                patterns (NumPy has no bfloat16, so uint16 always means
                bf16 here), int8 codes, or uint8 holding FP8 E4M3 bits
                (likewise: uint8 always means E4M3).
  block_table   integer [batch, max_pages]; row b lists the physical pages
                of sequence b in logical order, then -1 padding.
  context_lens  integer [batch]; sequence b has n = context_lens[b] keys,
                logical key j in page block_table[b, j // page_size], slot
                j % page_size.
  page_size     must equal the pages' axis 2.
  scale         default head_dim ** -0.5; must be finite and > 0.
  mask          None (every row sees all n keys) or "causal" (query row i
                is logical position n - L + i and sees keys 0 .. n - L + i).
  key_scales,
  value_scales  keyword only; required with int8 / uint8 (E4M3) pages and
                refused otherwise: float32 [num_pages, num_kv_heads,
                page_size], one per row, so element (page, head, slot, f)
                means code x scale[page, head, slot] (the engine's
                --kv-dtype i8 / f8e4m3 layout).
  num_threads   keyword only; 1 (default) runs on the calling thread, 0 on
                every core; a value above the machine's core count
                (std::thread::hardware_concurrency) is clamped to it.
                The result bits never depend on it.

GQA: num_q_heads must be a multiple of num_kv_heads; query head h reads
K/V head h // (num_q_heads // num_kv_heads). Returns float32
[batch, num_q_heads, L, head_dim]. A sequence with n = 0 outputs zeros.
NaN or +inf scores (from a NaN query or key, an infinite key) make the rows
that see them NaN, as IEEE arithmetic does; nothing non-finite is hidden.

The L query rows are the last L tokens of their sequence's context, so a
context 0 < n < L is an error with or without the causal mask.

Raises ValueError, before any K/V element is read, on: shape mismatches, a
negative context, a context that needs more pages than max_pages, a live
page id outside [0, num_pages) (-1 included), a page repeated within one
row, padding other than -1, page_size < 1, 0 < n < L, num_q_heads not a
multiple of num_kv_heads, a non-finite or non-positive scale, a negative
num_threads. Two rows may name the same page (a shared prefix). TypeError
on an unsupported dtype (query, pages or metadata).

A row's result bits depend only on its own query and its sequence's K/V
content: never on the batch, page placement, or num_threads. The GIL is
released while the kernel runs.
)doc";

}  // namespace

void BindAttention(nb::module_& m) {
  using namespace nb::literals;
  m.def("paged_attention", &PagedAttentionBinding, "query"_a, "key_pages"_a, "value_pages"_a,
        "block_table"_a, "context_lens"_a, "page_size"_a, "scale"_a = nb::none(),
        "mask"_a = nb::none(), nb::kw_only(), "num_threads"_a = 1, "key_scales"_a = nb::none(),
        "value_scales"_a = nb::none(), kPagedAttentionDoc);
}

}  // namespace folio::python
