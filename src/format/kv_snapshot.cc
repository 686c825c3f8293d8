#include "folio/format/kv_snapshot.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "folio/core/checked_math.h"
#include "folio/core/file_bytes.h"
#include "folio/format/block_paged_layout.h"
#include "folio/format/descriptor.h"
#include "folio/format/json_fields.h"
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

// The key or value descriptor of one layer.
Result<TensorDescriptor> Describe(const KvSnapshot& s, uint64_t layer, bool value) {
  FOLIO_ASSIGN_OR_RETURN(BlockPagedLayout layout,
                         BlockPagedLayout::Create(static_cast<uint32_t>(s.page_size), s.num_pages,
                                                  0, static_cast<uint32_t>(s.sequences.size()),
                                                  value ? KvRole::kValue : KvRole::kKey,
                                                  static_cast<uint32_t>(layer), IndexType::kU32));
  std::vector<BufferHandle> buffers(3);
  buffers[0].byte_size = s.num_pages * s.page_bytes();
  buffers[1].byte_size = 4 * FlatTable(s).size();
  buffers[2].byte_size = 4 * (s.sequences.size() + 1);
  return TensorDescriptor::Create(s.kv_dtype, {TotalTokens(s), s.num_kv_heads, s.head_dim}, 0,
                                  layout, std::move(buffers));
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
  return {{"format", "folio-kv-snapshot"},
          {"model_id", s.model_id},
          {"kv_dtype", std::string(ElementTypeName(s.kv_dtype))},
          {"page_size", s.page_size},
          {"num_layers", s.num_layers},
          {"num_kv_heads", s.num_kv_heads},
          {"head_dim", s.head_dim},
          {"num_pages", s.num_pages},
          {"layout", "token-major [num_pages, page_size, num_kv_heads, head_dim]"},
          {"sequences", seqs}};
}

Result<KvSnapshot> ParseManifest(const json& m) {
  if (!m.is_object()) return Status::InvalidArgument("manifest is not a JSON object");
  const JsonFields f(m, "manifest");
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
    FOLIO_ASSIGN_OR_RETURN(seq.num_tokens, JsonFields(q, where).U64(
                                               "num_tokens", seq.block_table.size() * s.page_size));
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
      kv_dtype != ElementType::kF16) {
    return Status::InvalidArgument("kv_dtype " + std::string(ElementTypeName(kv_dtype)) +
                                   " is not f32, bf16 or f16");
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
  // Everything at once: the pools dominate, and growing the vector would
  // copy them again at every doubling. A descriptor is under 256 bytes.
  const uint64_t per_tensor =
      4 + 256 + 3 * kAlign + s.num_pages * s.page_bytes() + 4 * (table.size() + seq_ptr.size());
  internal::Writer w;
  w.Reserve(kHeaderBytes + manifest.size() + 4 + 2 * s.num_layers * per_tensor + 4);
  w.PutBytes(std::as_bytes(std::span<const char>(kMagic)));
  w.Put<uint32_t>(kSnapshotVersion);
  w.Put<uint32_t>(0);
  w.Put<uint64_t>(manifest.size());
  w.PutBytes(std::as_bytes(std::span<const char>(manifest)));
  w.Put<uint32_t>(static_cast<uint32_t>(2 * s.num_layers));
  for (uint64_t l = 0; l < s.num_layers; ++l) {
    for (const bool value : {false, true}) {
      Result<TensorDescriptor> d = Describe(s, l, value);
      FOLIO_CHECK(d.ok(), d.status().ToString());
      const std::vector<std::byte> desc = d->ToBytes();
      w.Put<uint32_t>(static_cast<uint32_t>(desc.size()));
      w.PutBytes(desc);
      for (const std::span<const std::byte> buf :
           {std::span<const std::byte>(value ? s.values[l] : s.keys[l]), AsBytes(table),
            AsBytes(seq_ptr)}) {
        w.PutZeros(PaddingTo64(w.size()));
        w.PutBytes(buf);
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

  FOLIO_RETURN_IF_ERROR(r.Read("num_tensors", num_tensors));
  if (num_tensors != 2 * s.num_layers) {
    return Status::InvalidArgument("snapshot has " + Str(num_tensors) + " tensors for " +
                                   Str(s.num_layers) +
                                   " layers (want one key and one value "
                                   "per layer)");
  }
  // Everything the manifest implies, before sizing anything from it.
  const auto pool_bytes = CheckedMul(s.num_pages, s.page_bytes());
  if (!pool_bytes || *pool_bytes > r.remaining()) {
    return Status::InvalidArgument("manifest promises pools of " +
                                   (pool_bytes ? Str(*pool_bytes) : std::string("overflowing")) +
                                   " bytes; " + Str(r.remaining()) + " bytes remain");
  }
  const std::vector<uint32_t> table = FlatTable(s), seq_ptr = SeqPtr(s);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    const uint64_t layer = i / 2;
    const bool value = i % 2 == 1;
    const std::string what = "layer " + Str(layer) + (value ? " value" : " key") + " tensor";
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
      return Status::InvalidArgument(what +
                                     " descriptor disagrees with the manifest (dtype, "
                                     "shape, block-paged fields, layer, role or buffer sizes)");
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
    dst.emplace_back(buffers[0].begin(), buffers[0].end());
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
  summary["file_bytes"] = file_bytes;
  return summary;
}

}  // namespace folio::format
