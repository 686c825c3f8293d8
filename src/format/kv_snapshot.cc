#include "folio/format/kv_snapshot.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "folio/core/checked_math.h"
#include "folio/core/file_bytes.h"
#include "folio/core/json_reader.h"
#include "folio/format/block_paged_layout.h"
#include "folio/format/descriptor.h"
#include "wire.h"

namespace folio::format {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'F', 'O', 'L', 'I', 'O', 'K', 'V', 'S'};
constexpr uint64_t kHeaderBytes = 24;  // magic, version, flags, manifest_length
constexpr uint64_t kAlign = 64;
// Bounds on manifest fields, far above any real model, so that no product
// of them can overflow before the exact size checks.
constexpr uint64_t kMaxLayers = 1 << 12;
constexpr uint64_t kMaxHeads = 1 << 12;
constexpr uint64_t kMaxHeadDim = 1 << 14;
constexpr uint64_t kMaxPageSize = 1 << 20;
constexpr uint64_t kMaxPages = std::numeric_limits<int32_t>::max();
constexpr uint64_t kMaxSequences = 1 << 20;

std::string Str(uint64_t v) { return std::to_string(v); }

// A scale as it reads back exactly (std::to_string shows 6 decimals).
std::string FloatStr(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

const char* RoleName(bool value) { return value ? "value" : "key"; }

// i8 snapshots quantize per block of page_size tokens, and Hurray's
// per-block block_size must be a power of two >= 2 (quantization.h).
Status CheckQuantizedPageSize(uint64_t page_size) {
  if (page_size < 2 || !std::has_single_bit(page_size)) {
    return Status::InvalidArgument(
        "kv_dtype i8 needs a page_size that is a power of two >= 2 "
        "(Hurray's per-block block_size, which must equal the page "
        "size); page_size is " +
        Str(page_size));
  }
  return Status::Ok();
}

// Tensors per layer and role: one (all heads) for float dtypes, one per
// K/V head for i8, whose scales are per row (page, slot and head).
uint64_t TensorsPerRole(const KvSnapshot& s) { return s.quantized() ? s.num_kv_heads : 1; }

// An f32 in the file's byte order (little-endian).
uint32_t LoadU32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

uint32_t Crc32(std::span<const std::byte> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {  // zlib takes uInt lengths
    const auto n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

// Zero bytes up to the next 64-byte offset (file-relative: the writer
// starts at offset 0).
uint64_t PaddingTo64(uint64_t offset) { return CeilDiv(offset, kAlign) * kAlign - offset; }

std::vector<uint32_t> SeqPtr(const KvSnapshot& s) {
  std::vector<uint32_t> ptr{0};
  for (const SnapshotSequence& q : s.sequences) {
    ptr.push_back(ptr.back() + static_cast<uint32_t>(q.block_table.size()));
  }
  return ptr;
}

std::vector<uint32_t> FlatTable(const KvSnapshot& s) {
  std::vector<uint32_t> t;
  for (const SnapshotSequence& q : s.sequences) {
    t.insert(t.end(), q.block_table.begin(), q.block_table.end());
  }
  return t;
}

uint64_t TotalTokens(const KvSnapshot& s) {
  uint64_t n = 0;
  for (const SnapshotSequence& q : s.sequences) n += q.num_tokens;
  return n;
}

// The key or value descriptor of one layer: all its heads for float
// dtypes; for i8 one head's (which head is the tensor's position in the
// file), [total_tokens, 1, head_dim] with a symmetric per-block scale in
// every page slot (its row's). The manifest's page_size must pass
// CheckQuantizedPageSize for i8.
Result<TensorDescriptor> Describe(const KvSnapshot& s, uint64_t layer, bool value) {
  FOLIO_ASSIGN_OR_RETURN(BlockPagedLayout layout,
                         BlockPagedLayout::Create(static_cast<uint32_t>(s.page_size), s.num_pages,
                                                  0, static_cast<uint32_t>(s.sequences.size()),
                                                  value ? KvRole::kValue : KvRole::kKey,
                                                  static_cast<uint32_t>(layer), IndexType::kU32));
  const uint64_t heads = s.quantized() ? 1 : s.num_kv_heads;
  std::vector<BufferHandle> buffers(s.quantized() ? 4 : 3);
  buffers[0].byte_size =
      s.num_pages * s.page_size * heads * s.head_dim * ElementTypeBytes(s.kv_dtype);
  buffers[1].byte_size = 4 * FlatTable(s).size();
  buffers[2].byte_size = 4 * (s.sequences.size() + 1);
  std::optional<QuantizationScheme> quantization;
  if (s.quantized()) {
    FOLIO_ASSIGN_OR_RETURN(
        PerBlockAffine scheme,
        PerBlockAffine::Symmetric(0, static_cast<uint32_t>(s.page_size), 3, ElementType::kF32));
    quantization = scheme;
    buffers[3].byte_size = s.num_pages * s.page_size * sizeof(float);
  }
  return TensorDescriptor::Create(s.kv_dtype, {TotalTokens(s), heads, s.head_dim}, 0, layout,
                                  std::move(buffers), std::move(quantization));
}

std::string QuantizationText(const std::optional<QuantizationScheme>& q) {
  if (!q) return "none";
  if (const auto* b = std::get_if<PerBlockAffine>(&*q)) {
    return std::string(PerBlockAffine::name()) + " (axis " + Str(b->axis()) + ", block_size " +
           Str(b->block_size()) + ", scale buffer " + Str(b->scale_buffer_index()) +
           ", scale type " + std::string(ElementTypeName(b->scale_type())) +
           (b->symmetric() ? ", symmetric)" : ", asymmetric)");
  }
  return std::string(SchemeName(*q));
}

// The first field in which a tensor's (valid) descriptor differs from the
// one the manifest implies, for the error message.
std::string Difference(const TensorDescriptor& got, const TensorDescriptor& want) {
  if (got.dtype() != want.dtype()) {
    return "element type " + std::string(ElementTypeName(got.dtype())) + ", want " +
           std::string(ElementTypeName(want.dtype()));
  }
  if (!std::ranges::equal(got.shape(), want.shape())) return "shape";
  if (got.quantization() != want.quantization()) {
    return "quantization " + QuantizationText(got.quantization()) + ", want " +
           QuantizationText(want.quantization());
  }
  if (!(got.layout() == want.layout())) {
    return "block-paged fields (page size, page count, sequence count, layer or role)";
  }
  return "buffer table";
}

std::span<const std::byte> AsBytes(const std::vector<uint32_t>& v) {
  return std::as_bytes(std::span<const uint32_t>(v));
}

json Manifest(const KvSnapshot& s) {
  json seqs = json::array();
  for (const SnapshotSequence& q : s.sequences) {
    seqs.push_back(
        {{"block_table", q.block_table}, {"num_tokens", q.num_tokens}, {"request", q.request}});
  }
  const char* layout =
      s.quantized()
          ? "one tensor per layer, role and K/V head (layer 0 key heads 0..H-1, layer 0 value "
            "heads 0..H-1, layer 1 key ...), each pool [num_pages, page_size, 1, head_dim] i8 "
            "with per_block_affine f32 scales [num_pages, page_size], one per row"
          : "token-major [num_pages, page_size, num_kv_heads, head_dim]";
  return {{"format", "folio-kv-snapshot"},
          {"model_id", s.model_id},
          {"kv_dtype", std::string(ElementTypeName(s.kv_dtype))},
          {"page_size", s.page_size},
          {"num_layers", s.num_layers},
          {"num_kv_heads", s.num_kv_heads},
          {"head_dim", s.head_dim},
          {"num_pages", s.num_pages},
          {"layout", layout},
          {"sequences", seqs}};
}

Result<KvSnapshot> ParseManifest(const json& m) {
  if (!m.is_object()) return Status::InvalidArgument("manifest is not a JSON object");
  const JsonReader f(m, JsonErrorStyle::kFile, "manifest");
  FOLIO_ASSIGN_OR_RETURN(std::string format, f.String("format"));
  if (format != "folio-kv-snapshot") {
    return Status::InvalidArgument("manifest format is \"" + format +
                                   "\", not \"folio-kv-snapshot\"");
  }
  KvSnapshot s;
  FOLIO_ASSIGN_OR_RETURN(s.model_id, f.String("model_id"));
  FOLIO_ASSIGN_OR_RETURN(std::string dtype, f.String("kv_dtype"));
  FOLIO_ASSIGN_OR_RETURN(s.kv_dtype, ParseElementType(dtype));
  FOLIO_ASSIGN_OR_RETURN(s.page_size, f.U64("page_size", kMaxPageSize));
  FOLIO_ASSIGN_OR_RETURN(s.num_layers, f.U64("num_layers", kMaxLayers));
  FOLIO_ASSIGN_OR_RETURN(s.num_kv_heads, f.U64("num_kv_heads", kMaxHeads));
  FOLIO_ASSIGN_OR_RETURN(s.head_dim, f.U64("head_dim", kMaxHeadDim));
  FOLIO_ASSIGN_OR_RETURN(s.num_pages, f.U64("num_pages", kMaxPages));
  const auto seqs = m.find("sequences");
  if (seqs == m.end() || !seqs->is_array() || seqs->size() > kMaxSequences) {
    return Status::InvalidArgument(
        "manifest field sequences is missing, not an array or has "
        "more than " +
        Str(kMaxSequences) + " entries");
  }
  for (size_t i = 0; i < seqs->size(); ++i) {
    const json& q = (*seqs)[i];
    const std::string where = "sequence " + Str(i);
    if (!q.is_object()) return Status::InvalidArgument(where + " is not an object");
    SnapshotSequence seq;
    const auto table = q.find("block_table");
    if (table == q.end() || !table->is_array()) {
      return Status::InvalidArgument(where + ": block_table is missing or not an array");
    }
    for (const json& page : *table) {
      if (!page.is_number_unsigned() || page.get<uint64_t>() >= s.num_pages) {
        return Status::InvalidArgument(where + ": block_table entry " + page.dump() +
                                       " is not a page id below num_pages " + Str(s.num_pages));
      }
      seq.block_table.push_back(page.get<uint32_t>());
    }
    FOLIO_ASSIGN_OR_RETURN(seq.num_tokens,
                           JsonReader(q, JsonErrorStyle::kFile, where)
                               .U64("num_tokens", seq.block_table.size() * s.page_size));
    const auto request = q.find("request");
    if (request == q.end() || !request->is_object()) {
      return Status::InvalidArgument(where + ": request is missing or not an object");
    }
    seq.request = *request;
    s.sequences.push_back(std::move(seq));
  }
  return s;
}

}  // namespace

Status KvSnapshot::Validate() const {
  if (kv_dtype != ElementType::kF32 && kv_dtype != ElementType::kBF16 &&
      kv_dtype != ElementType::kF16 && kv_dtype != ElementType::kI8) {
    return Status::InvalidArgument("kv_dtype " + std::string(ElementTypeName(kv_dtype)) +
                                   " is not f32, bf16, f16 or i8");
  }
  if (page_size == 0 || page_size > kMaxPageSize || num_layers == 0 || num_layers > kMaxLayers ||
      num_kv_heads == 0 || num_kv_heads > kMaxHeads || head_dim == 0 || head_dim > kMaxHeadDim ||
      num_pages > kMaxPages || sequences.size() > kMaxSequences) {
    return Status::InvalidArgument(
        "snapshot dimensions out of bounds: page_size " + Str(page_size) + ", num_layers " +
        Str(num_layers) + ", num_kv_heads " + Str(num_kv_heads) + ", head_dim " + Str(head_dim) +
        ", num_pages " + Str(num_pages) + ", sequences " + Str(sequences.size()));
  }
  const auto pool = CheckedMul(num_pages, page_bytes());
  if (!pool) return Status::InvalidArgument("snapshot pool size overflows");
  if (keys.size() != num_layers || values.size() != num_layers) {
    return Status::InvalidArgument("snapshot has " + Str(keys.size()) + " key and " +
                                   Str(values.size()) + " value pools for " + Str(num_layers) +
                                   " layers");
  }
  for (uint64_t l = 0; l < num_layers; ++l) {
    if (keys[l].size() != *pool || values[l].size() != *pool) {
      return Status::InvalidArgument("layer " + Str(l) + " pools are not " + Str(*pool) + " bytes");
    }
  }
  if (!quantized()) {
    if (!key_scales.empty() || !value_scales.empty()) {
      return Status::InvalidArgument("kv_dtype " + std::string(ElementTypeName(kv_dtype)) +
                                     " snapshot carries key_scales / value_scales (only i8 has "
                                     "them)");
    }
  } else {
    FOLIO_RETURN_IF_ERROR(CheckQuantizedPageSize(page_size));
    if (key_scales.size() != num_layers || value_scales.size() != num_layers) {
      return Status::InvalidArgument("snapshot has " + Str(key_scales.size()) + " key and " +
                                     Str(value_scales.size()) + " value scale lists for " +
                                     Str(num_layers) + " layers");
    }
    const uint64_t per_layer = num_pages * page_size * num_kv_heads;
    for (uint64_t l = 0; l < num_layers; ++l) {
      for (const bool value : {false, true}) {
        const std::vector<float>& scales = value ? value_scales[l] : key_scales[l];
        if (scales.size() != per_layer) {
          return Status::InvalidArgument(
              "layer " + Str(l) + " " + RoleName(value) + " scales: " + Str(scales.size()) +
              ", not num_pages * page_size * num_kv_heads = " + Str(per_layer));
        }
        for (uint64_t i = 0; i < per_layer; ++i) {
          if (!std::isfinite(scales[i]) || !(scales[i] > 0.0f)) {
            const uint64_t row = i / num_kv_heads;
            return Status::InvalidArgument(
                "layer " + Str(l) + " " + RoleName(value) + " scale of page " +
                Str(row / page_size) + " slot " + Str(row % page_size) + " head " +
                Str(i % num_kv_heads) + " is " + FloatStr(scales[i]) + ", not a finite number > 0");
          }
        }
      }
    }
  }
  std::vector<bool> used(num_pages, false);
  uint64_t entries = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SnapshotSequence& q = sequences[i];
    const uint64_t pages = q.block_table.size();
    entries += pages;
    if (q.num_tokens > pages * page_size ||
        (pages > 0 && q.num_tokens <= (pages - 1) * page_size)) {
      return Status::InvalidArgument("sequence " + Str(i) + ": " + Str(q.num_tokens) +
                                     " tokens do not fill exactly its " + Str(pages) +
                                     " pages of " + Str(page_size));
    }
    for (const uint32_t p : q.block_table) {
      if (p >= num_pages) {
        return Status::InvalidArgument("sequence " + Str(i) + " names page " + Str(p) + " of " +
                                       Str(num_pages));
      }
      used[p] = true;
    }
    if (!q.request.is_object()) {
      return Status::InvalidArgument("sequence " + Str(i) + ": request is not a JSON object");
    }
  }
  if (entries > std::numeric_limits<uint32_t>::max()) {
    return Status::InvalidArgument("block tables exceed u32 entries");
  }
  for (uint64_t p = 0; p < num_pages; ++p) {
    if (!used[p]) return Status::InvalidArgument("page " + Str(p) + " is used by no sequence");
  }
  return Status::Ok();
}

std::vector<std::byte> EncodeSnapshot(const KvSnapshot& s) {
  const Status valid = s.Validate();
  FOLIO_CHECK(valid.ok(), valid.ToString());
  const std::string manifest = Manifest(s).dump();
  const std::vector<uint32_t> table = FlatTable(s), seq_ptr = SeqPtr(s);
  const uint64_t heads = TensorsPerRole(s);
  const uint64_t num_tensors = 2 * s.num_layers * heads;
  // Everything at once: the pools dominate, and growing the vector would
  // copy them again at every doubling. Every tensor's descriptor has the
  // same size.
  Result<TensorDescriptor> first = Describe(s, 0, false);
  FOLIO_CHECK(first.ok(), first.status().ToString());
  uint64_t per_tensor = 4 + first->encoded_size();
  for (const BufferHandle& h : first->buffers()) per_tensor += kAlign + h.byte_size;
  internal::Writer w;
  w.Reserve(kHeaderBytes + manifest.size() + 4 + num_tensors * per_tensor + 4);
  w.PutBytes(std::as_bytes(std::span<const char>(kMagic)));
  w.Put<uint32_t>(kSnapshotVersion);
  w.Put<uint32_t>(0);
  w.Put<uint64_t>(manifest.size());
  w.PutBytes(std::as_bytes(std::span<const char>(manifest)));
  w.Put<uint32_t>(static_cast<uint32_t>(num_tensors));
  const uint64_t rows = s.num_pages * s.page_size, dim = s.head_dim;
  for (uint64_t l = 0; l < s.num_layers; ++l) {
    for (const bool value : {false, true}) {
      const std::vector<std::byte>& pool = value ? s.values[l] : s.keys[l];
      for (uint64_t h = 0; h < heads; ++h) {
        Result<TensorDescriptor> d = Describe(s, l, value);
        FOLIO_CHECK(d.ok(), d.status().ToString());
        const std::vector<std::byte> desc = d->ToBytes();
        w.Put<uint32_t>(static_cast<uint32_t>(desc.size()));
        w.PutBytes(desc);
        w.PutZeros(PaddingTo64(w.size()));
        if (!s.quantized()) {
          w.PutBytes(pool);
        } else {
          // Head h's rows of the token-major pool, slot by slot.
          for (uint64_t row = 0; row < rows; ++row) {
            w.PutBytes(std::span(pool).subspan((row * s.num_kv_heads + h) * dim, dim));
          }
        }
        for (const std::span<const std::byte> buf : {AsBytes(table), AsBytes(seq_ptr)}) {
          w.PutZeros(PaddingTo64(w.size()));
          w.PutBytes(buf);
        }
        if (s.quantized()) {
          // Head h's row scales, slot by slot.
          const std::vector<float>& scales = value ? s.value_scales[l] : s.key_scales[l];
          w.PutZeros(PaddingTo64(w.size()));
          for (uint64_t row = 0; row < rows; ++row) {
            w.Put<uint32_t>(std::bit_cast<uint32_t>(scales[row * s.num_kv_heads + h]));
          }
        }
      }
    }
  }
  w.Put<uint32_t>(Crc32(w.bytes()));
  return std::move(w.bytes());
}

Result<KvSnapshot> DecodeSnapshot(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderBytes + 4) {
    return Status::InvalidArgument("snapshot of " + Str(bytes.size()) +
                                   " bytes is shorter than its header and checksum");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Status::InvalidArgument("not a folio KV snapshot (magic is not \"FOLIOKVS\")");
  }
  const auto body = bytes.first(bytes.size() - 4);
  uint32_t crc = 0;
  FOLIO_RETURN_IF_ERROR(internal::Reader(bytes.last(4), "snapshot").Read("checksum", crc));
  if (const uint32_t computed = Crc32(body); computed != crc) {
    return Status::Corruption("snapshot checksum mismatch: stored " + Str(crc) + ", computed " +
                              Str(computed));
  }
  internal::Reader r(body, "snapshot");
  std::span<const std::byte> unused;
  FOLIO_RETURN_IF_ERROR(r.Take("magic", sizeof kMagic, unused));
  uint32_t version = 0, flags = 0, num_tensors = 0;
  uint64_t manifest_length = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("version", version));
  if (version != kSnapshotVersion) {
    return Status::Unimplemented("snapshot version " + Str(version) + "; this folio reads " +
                                 Str(kSnapshotVersion));
  }
  FOLIO_RETURN_IF_ERROR(r.Read("flags", flags));
  if (flags != 0) return Status::InvalidArgument("snapshot flags " + Str(flags) + " are not 0");
  FOLIO_RETURN_IF_ERROR(r.Read("manifest_length", manifest_length));
  std::span<const std::byte> manifest_bytes;
  FOLIO_RETURN_IF_ERROR(r.Take("manifest", manifest_length, manifest_bytes));
  const json manifest =
      json::parse(reinterpret_cast<const char*>(manifest_bytes.data()),
                  reinterpret_cast<const char*>(manifest_bytes.data()) + manifest_bytes.size(),
                  nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded()) return Status::InvalidArgument("manifest is not valid JSON");
  FOLIO_ASSIGN_OR_RETURN(KvSnapshot s, ParseManifest(manifest));
  if (s.quantized()) {
    Status page_size = CheckQuantizedPageSize(s.page_size);
    if (!page_size.ok()) return page_size.WithContext("manifest");
  }

  FOLIO_RETURN_IF_ERROR(r.Read("num_tensors", num_tensors));
  const uint64_t heads = TensorsPerRole(s);
  if (num_tensors != 2 * s.num_layers * heads) {
    return Status::InvalidArgument(
        "snapshot has " + Str(num_tensors) + " tensors for " + Str(s.num_layers) +
        (s.quantized() ? " layers of " + Str(s.num_kv_heads) +
                             " K/V heads (want one key and one value tensor per layer and K/V "
                             "head for kv_dtype i8)"
                       : " layers (want one key and one value per layer)"));
  }
  // Everything the manifest implies, before sizing anything from it.
  const auto pool_bytes = CheckedMul(s.num_pages, s.page_bytes());
  if (!pool_bytes || *pool_bytes > r.remaining()) {
    return Status::InvalidArgument("manifest promises pools of " +
                                   (pool_bytes ? Str(*pool_bytes) : std::string("overflowing")) +
                                   " bytes; " + Str(r.remaining()) + " bytes remain");
  }
  const std::vector<uint32_t> table = FlatTable(s), seq_ptr = SeqPtr(s);
  const uint64_t rows = s.num_pages * s.page_size, dim = s.head_dim;
  for (uint64_t i = 0; i < num_tensors; ++i) {
    const uint64_t layer = i / (2 * heads);
    const bool value = (i / heads) % 2 == 1;
    const uint64_t head = i % heads;
    const std::string what = "layer " + Str(layer) + " " + RoleName(value) +
                             (s.quantized() ? " head " + Str(head) : std::string()) + " tensor";
    uint32_t desc_length = 0;
    std::span<const std::byte> desc_bytes;
    FOLIO_RETURN_IF_ERROR(r.Read("descriptor_length", desc_length));
    FOLIO_RETURN_IF_ERROR(r.Take("descriptor", desc_length, desc_bytes));
    Result<TensorDescriptor> desc = TensorDescriptor::FromBytes(desc_bytes);
    if (!desc.ok()) return desc.status().WithContext(what);
    // The descriptor must say exactly what the manifest implies.
    Result<TensorDescriptor> want = Describe(s, layer, value);
    if (!want.ok()) return want.status().WithContext("manifest");
    if (!(*desc == *want)) {
      return Status::InvalidArgument(
          what + " descriptor disagrees with the manifest: " + Difference(*desc, *want));
    }
    std::vector<std::span<const std::byte>> buffers;
    for (const BufferHandle& h : desc->buffers()) {
      FOLIO_RETURN_IF_ERROR(r.ReadReserved("buffer padding", PaddingTo64(r.pos())));
      std::span<const std::byte> b;
      FOLIO_RETURN_IF_ERROR(r.Take("buffer", h.byte_size, b));
      buffers.push_back(b);
    }
    auto same = [](std::span<const std::byte> a, std::span<const std::byte> b) {
      return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
    };
    if (!same(buffers[1], AsBytes(table)) || !same(buffers[2], AsBytes(seq_ptr))) {
      return Status::InvalidArgument(what +
                                     " block_table or seq_ptr differs from the "
                                     "manifest's");
    }
    auto& dst = value ? s.values : s.keys;
    if (!s.quantized()) {
      dst.emplace_back(buffers[0].begin(), buffers[0].end());
      continue;
    }
    // i8: head `head`'s rows and their scales back into the token-major
    // pool and scale list.
    auto& scales = value ? s.value_scales : s.key_scales;
    if (head == 0) {
      dst.emplace_back(*pool_bytes);
      scales.emplace_back(rows * s.num_kv_heads);
    }
    std::byte* pool = dst.back().data();
    float* row_scales = scales.back().data();
    for (uint64_t row = 0; row < rows; ++row) {
      std::memcpy(pool + (row * s.num_kv_heads + head) * dim, buffers[0].data() + row * dim, dim);
      row_scales[row * s.num_kv_heads + head] =
          std::bit_cast<float>(LoadU32(buffers[3].data() + 4 * row));
    }
  }
  if (r.remaining() != 0) {
    return Status::InvalidArgument(Str(r.remaining()) + " unexpected bytes before the checksum");
  }
  FOLIO_RETURN_IF_ERROR(s.Validate());
  return s;
}

Status WriteSnapshotFile(const KvSnapshot& snapshot, const std::filesystem::path& path) {
  FOLIO_RETURN_IF_ERROR(snapshot.Validate());
  const std::vector<std::byte> bytes = EncodeSnapshot(snapshot);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return Status::IoError("cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::IoError("cannot rename " + tmp.string() + " to " + path.string());
  }
  return Status::Ok();
}

Result<KvSnapshot> ReadSnapshotFile(const std::filesystem::path& path) {
  FOLIO_ASSIGN_OR_RETURN(FileBytes file, FileBytes::Map(path));
  Result<KvSnapshot> s = DecodeSnapshot(file.bytes());
  if (!s.ok()) return s.status().WithContext(path.string());
  return s;
}

json SnapshotSummary(const KvSnapshot& s, uint64_t file_bytes) {
  // The manifest, plus what can be counted from it.
  json summary = Manifest(s);
  uint64_t refs = 0;
  for (json& q : summary["sequences"]) {
    q["pages"] = q["block_table"].size();
    refs += q["block_table"].size();
  }
  summary["page_references"] = refs;
  summary["shared_page_references"] = refs - s.num_pages;
  summary["kv_bytes"] = 2 * s.num_layers * s.num_pages * s.page_bytes();
  if (s.quantized()) {
    // As stored: one f32 per page slot and K/V head.
    summary["scale_bytes"] =
        2 * s.num_layers * s.num_kv_heads * s.num_pages * s.page_size * sizeof(float);
  }
  summary["file_bytes"] = file_bytes;
  return summary;
}

}  // namespace folio::format
