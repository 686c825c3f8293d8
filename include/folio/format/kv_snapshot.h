// KV snapshots: a batch of sequences' K/V pages, their block tables and the
// state needed to continue them, as one file that another engine process
// validates before it reads a byte of the pages (docs/spec/kv-snapshot.md).
//
// The container is folio's own; each layer's keys and values inside it are
// Hurray block-paged tensors (layout 0x0A, descriptor.h), so the pages can
// be read by any Hurray reader:
//
//   magic "FOLIOKVS" | version u32 = 1 | flags u32 = 0
//   manifest_length u64 | manifest (UTF-8 JSON)
//   num_tensors u32
//   per tensor: descriptor_length u32 | descriptor |
//               per buffer: zeros to the next 64-byte file offset | bytes
//   crc32 u32 (zlib's CRC-32 of every byte before it)
//
// Pages are token-major, [num_pages, page_size, num_kv_heads, head_dim] in
// the KV dtype, numbered densely from 0 in order of first use; a page shared
// by several sequences is stored once and named by each block table. Slots
// past a sequence's last token are zero.
//
// f32 / bf16 / f16: num_tensors = 2 * num_layers (layer 0 key, layer 0
// value, layer 1 key, ...), each [total_tokens, num_kv_heads, head_dim].
//
// i8: folio keeps one f32 scale per row (layer, role, page, slot, K/V
// head), but a Hurray block-paged tensor's per-block scales are one per
// page slot, shared by every head of the slot. So each (layer, role, head)
// is its own tensor, [total_tokens, 1, head_dim] i8, quantized symmetric
// PerBlockAffine (axis 0, block_size = page_size, f32 scales in buffer 3)
// whose scale buffer holds that head's row scales, slot by slot.
// num_tensors = 2 * num_layers * num_kv_heads, in the order layer 0 key
// heads 0..H-1, layer 0 value heads 0..H-1, layer 1 key heads ... Hurray's
// block_size must be a power of two >= 2, so i8 snapshots need such a page
// size. f8e4m3 has no encoding: Hurray quantizes i8 / u8 storage only.
//
// This module knows pages and tables, not engines: each sequence carries its
// request state as an opaque JSON object that the engine writes and reads
// (engine.h, ExportSnapshot / ImportSnapshot).
#ifndef FOLIO_FORMAT_KV_SNAPSHOT_H_
#define FOLIO_FORMAT_KV_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/format/element_type.h"

namespace folio::format {

inline constexpr uint32_t kSnapshotVersion = 1;

struct SnapshotSequence {
  std::vector<uint32_t> block_table;  // snapshot page ids, logical order
  uint64_t num_tokens = 0;            // positions with K/V in those pages
  nlohmann::json request;             // the engine's state (an object)
};

struct KvSnapshot {
  std::string model_id;
  ElementType kv_dtype = ElementType::kF32;  // f32, bf16, f16 or i8
  uint64_t page_size = 0;
  uint64_t num_layers = 0;
  uint64_t num_kv_heads = 0;
  uint64_t head_dim = 0;
  uint64_t num_pages = 0;
  std::vector<SnapshotSequence> sequences;
  // [num_layers] pools of num_pages * page_bytes(), token-major.
  std::vector<std::vector<std::byte>> keys, values;
  // i8 only: [num_layers] of [num_pages, page_size, num_kv_heads] f32
  // scales, one per row in the pools' token-major order (page p, slot t,
  // head h at (p * page_size + t) * num_kv_heads + h); element x of that row
  // is code(x) * scale. A slot past its page's last token has scale 1 (its
  // codes are zeros). Empty for float dtypes.
  std::vector<std::vector<float>> key_scales, value_scales;

  bool quantized() const { return kv_dtype == ElementType::kI8; }

  uint64_t page_bytes() const {
    return page_size * num_kv_heads * head_dim * ElementTypeBytes(kv_dtype);
  }
  // Every field against the others: dimensions in bounds, dtype f32 / bf16
  // / f16 / i8, pools of the right size, every page used by some table and
  // every table entry < num_pages, num_tokens within its pages (and their
  // last page non-empty), requests JSON objects. i8 also: page_size a power
  // of two >= 2, scales of the right size, every one finite and > 0; float
  // dtypes: no scales. InvalidArgument naming the field otherwise.
  Status Validate() const;
};

// The file's bytes. The snapshot must Validate (checked by the caller;
// Encode CHECKs it).
std::vector<std::byte> EncodeSnapshot(const KvSnapshot& snapshot);

// Parses untrusted bytes: the checksum first, then every length, count and
// offset bounded by what remains before anything is sized from it, the
// manifest's schema and limits, each tensor's descriptor (dtype, shape,
// block-paged fields, layer and role, quantization, buffer sizes) and its
// index buffers against the manifest. Errors: InvalidArgument (malformed, naming the field and byte
// offset), Corruption (checksum), Unimplemented (another version).
Result<KvSnapshot> DecodeSnapshot(std::span<const std::byte> bytes);

// Writes to a temporary file next to `path` and renames it over `path`, so
// a failed write leaves no partial file. IoError naming the path.
Status WriteSnapshotFile(const KvSnapshot& snapshot, const std::filesystem::path& path);
Result<KvSnapshot> ReadSnapshotFile(const std::filesystem::path& path);

// A summary for people and tools (`folio kv inspect --json`): the manifest
// with each sequence's page count, page references (and how many are
// shared) and byte counts (i8: scale_bytes too, as stored). No pages.
nlohmann::json SnapshotSummary(const KvSnapshot& snapshot, uint64_t file_bytes);

}  // namespace folio::format

#endif  // FOLIO_FORMAT_KV_SNAPSHOT_H_
