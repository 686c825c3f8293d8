// folio.read_snapshot: a KV snapshot file (docs/spec/kv-snapshot.md) as
// Python values, its K/V pages as read-only NumPy arrays that share the
// snapshot's memory.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <memory>
#include <string>

#include "bindings.h"
#include "folio/format/kv_snapshot.h"

namespace nb = nanobind;

namespace folio::python {
namespace {

using Pages = nb::ndarray<nb::numpy, nb::ro>;

class Snapshot {
 public:
  explicit Snapshot(std::shared_ptr<const format::KvSnapshot> s) : s_(std::move(s)) {}
  const format::KvSnapshot& get() const { return *s_; }

  // Layer `layer`'s pool, [num_pages, page_size, num_kv_heads, head_dim];
  // bf16 comes out as uint16 bit patterns (NumPy has no bfloat16).
  Pages Pool(uint64_t layer, bool value) const {
    if (layer >= s_->num_layers) {
      throw nb::index_error(
          ("layer " + std::to_string(layer) + " of " + std::to_string(s_->num_layers)).c_str());
    }
    const std::vector<std::byte>& pool = value ? s_->values[layer] : s_->keys[layer];
    const size_t shape[4] = {s_->num_pages, s_->page_size, s_->num_kv_heads, s_->head_dim};
    nb::dlpack::dtype dtype;
    switch (s_->kv_dtype) {
      case format::ElementType::kF32:
        dtype = nb::dtype<float>();
        break;
      case format::ElementType::kF16:
        dtype = {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
        break;
      case format::ElementType::kI8:
        dtype = nb::dtype<int8_t>();
        break;
      default:
        dtype = nb::dtype<uint16_t>();
        break;  // bf16 bits
    }
    // The array keeps the snapshot alive.
    auto* keep = new std::shared_ptr<const format::KvSnapshot>(s_);
    nb::capsule owner(keep, [](void* p) noexcept {
      delete static_cast<std::shared_ptr<const format::KvSnapshot>*>(p);
    });
    return Pages(const_cast<std::byte*>(pool.data()), 4, shape, owner, nullptr, dtype);
  }

  // An i8 snapshot's scales of one layer and role, float32 [num_pages,
  // page_size, num_kv_heads], one per row: element (page, slot, head, f)
  // means code * scale[page, slot, head]. ValueError for a float snapshot,
  // which has none.
  Pages Scales(uint64_t layer, bool value) const {
    if (layer >= s_->num_layers) {
      throw nb::index_error(
          ("layer " + std::to_string(layer) + " of " + std::to_string(s_->num_layers)).c_str());
    }
    if (s_->key_scales.empty()) {
      throw nb::value_error((std::string("a ") +
                             std::string(format::ElementTypeName(s_->kv_dtype)) +
                             " snapshot has no scales")
                                .c_str());
    }
    const std::vector<float>& scales = value ? s_->value_scales[layer] : s_->key_scales[layer];
    const size_t shape[3] = {s_->num_pages, s_->page_size, s_->num_kv_heads};
    auto* keep = new std::shared_ptr<const format::KvSnapshot>(s_);
    nb::capsule owner(keep, [](void* p) noexcept {
      delete static_cast<std::shared_ptr<const format::KvSnapshot>*>(p);
    });
    return Pages(const_cast<float*>(scales.data()), 3, shape, owner, nullptr, nb::dtype<float>());
  }

 private:
  std::shared_ptr<const format::KvSnapshot> s_;
};

nb::object FromJson(const nlohmann::json& j) {
  return nb::module_::import_("json").attr("loads")(nb::str(j.dump().c_str()));
}

constexpr const char* kReadDoc = R"doc(
Reads and checks a folio KV snapshot file (docs/spec/kv-snapshot.md): the
CRC-32, the manifest, and every layer's Hurray block-paged descriptors and
index buffers. Raises ValueError for a malformed or damaged file,
FileNotFoundError if there is none.

The result's keys(layer) / values(layer) are read-only NumPy arrays
[num_pages, page_size, num_kv_heads, head_dim] (float32, float16, uint16
holding bfloat16 bits, or int8 codes); an i8 snapshot's key_scales(layer) /
value_scales(layer) are float32 [num_pages, page_size, num_kv_heads], one
per row, and an element means its code times its row's scale; sequences
lists each sequence's block_table (indices
into those pages), num_tokens and request (the engine's state, a dict).
)doc";

}  // namespace

void BindSnapshot(nb::module_& m) {
  nb::class_<Snapshot>(m, "KvSnapshot", "A KV snapshot read by folio.read_snapshot.")
      .def_prop_ro("model_id", [](const Snapshot& s) { return s.get().model_id; })
      .def_prop_ro(
          "kv_dtype",
          [](const Snapshot& s) { return std::string(format::ElementTypeName(s.get().kv_dtype)); })
      .def_prop_ro("page_size", [](const Snapshot& s) { return s.get().page_size; })
      .def_prop_ro("num_layers", [](const Snapshot& s) { return s.get().num_layers; })
      .def_prop_ro("num_kv_heads", [](const Snapshot& s) { return s.get().num_kv_heads; })
      .def_prop_ro("head_dim", [](const Snapshot& s) { return s.get().head_dim; })
      .def_prop_ro("num_pages", [](const Snapshot& s) { return s.get().num_pages; })
      .def_prop_ro("sequences",
                   [](const Snapshot& s) {
                     nb::list out;
                     for (const format::SnapshotSequence& q : s.get().sequences) {
                       nb::dict d;
                       d["block_table"] = q.block_table;
                       d["num_tokens"] = q.num_tokens;
                       d["request"] = FromJson(q.request);
                       out.append(d);
                     }
                     return out;
                   })
      .def(
          "keys", [](const Snapshot& s, uint64_t layer) { return s.Pool(layer, false); },
          nb::arg("layer"), "Layer `layer`'s key pages.")
      .def(
          "values", [](const Snapshot& s, uint64_t layer) { return s.Pool(layer, true); },
          nb::arg("layer"), "Layer `layer`'s value pages.")
      .def(
          "key_scales", [](const Snapshot& s, uint64_t layer) { return s.Scales(layer, false); },
          nb::arg("layer"),
          "An i8 snapshot's key scales of layer `layer`, [num_pages, page_size, heads].")
      .def(
          "value_scales", [](const Snapshot& s, uint64_t layer) { return s.Scales(layer, true); },
          nb::arg("layer"),
          "An i8 snapshot's value scales of layer `layer`, [num_pages, page_size, heads].")
      .def("__repr__", [](const Snapshot& s) {
        const format::KvSnapshot& k = s.get();
        return "<folio.KvSnapshot " + std::to_string(k.sequences.size()) + " sequences, " +
               std::to_string(k.num_pages) + " pages of " + std::to_string(k.page_size) + ", " +
               std::to_string(k.num_layers) + " layers, " +
               std::string(format::ElementTypeName(k.kv_dtype)) + ">";
      });

  m.def(
      "read_snapshot",
      [](const std::string& path) {
        if (!std::filesystem::exists(path)) {
          PyErr_SetString(PyExc_FileNotFoundError, ("no snapshot file " + path).c_str());
          throw nb::python_error();
        }
        Result<format::KvSnapshot> s = format::ReadSnapshotFile(path);
        ThrowIfError(s.status());
        return Snapshot(std::make_shared<const format::KvSnapshot>(std::move(*s)));
      },
      nb::arg("path"), kReadDoc);
}

}  // namespace folio::python
