// folio's Hurray tensor descriptors from Python: BlockPagedLayout,
// RowMajorLayout, StridedLayout, the three quantization schemes, element
// types, BufferHandle and TensorDescriptor, shaped like Hurray's own Python
// surface (docs/spec/hurray-descriptor.md).
//
// Every object wraps the C++ value type and is immutable; every check is the
// format module's own, and every Status it returns becomes
// folio.InvalidDescriptorError (a ValueError). What the binding adds is only
// the conversion of Python values into the C++ types, and it refuses (never
// wraps or truncates) an integer outside the field's range.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "folio/core/str_cat.h"
#include "folio/format/block_paged_layout.h"
#include "folio/format/descriptor.h"
#include "folio/format/element_type.h"
#include "folio/format/quantization.h"
#include "format_convert.h"

namespace nb = nanobind;

namespace folio::python {
namespace {

using format::BlockPagedLayout;
using format::BufferHandle;
using format::DeviceTag;
using format::ElementType;
using format::IndexType;
using format::Layout;
using format::MemoryClass;
using format::PerBlockAffine;
using format::PerChannelAffine;
using format::PerTensorAffine;
using format::QuantizationScheme;
using format::RowMajorLayout;
using format::StridedLayout;
using format::SyncMode;
using format::TensorDescriptor;

// ------------------------------------------------------------ schemes and layouts

QuantizationScheme ToScheme(nb::handle h, std::string_view field) {
  if (nb::isinstance<PerTensorAffine>(h)) return nb::cast<PerTensorAffine>(h);
  if (nb::isinstance<PerChannelAffine>(h)) return nb::cast<PerChannelAffine>(h);
  if (nb::isinstance<PerBlockAffine>(h)) return nb::cast<PerBlockAffine>(h);
  RaiseTypeError(StrCat(field,
                        " must be a PerTensorAffine, PerChannelAffine or PerBlockAffine, "
                        "got ",
                        TypeName(h)));
}

Layout ToLayout(nb::handle h, std::string_view field) {
  if (nb::isinstance<RowMajorLayout>(h)) return nb::cast<RowMajorLayout>(h);
  if (nb::isinstance<StridedLayout>(h)) return nb::cast<StridedLayout>(h);
  if (nb::isinstance<BlockPagedLayout>(h)) return nb::cast<BlockPagedLayout>(h);
  RaiseTypeError(StrCat(field,
                        " must be a RowMajorLayout, StridedLayout or BlockPagedLayout, "
                        "got ",
                        TypeName(h)));
}

std::string FloatRepr(float v) { return Repr(nb::float_(static_cast<double>(v))); }
std::string OptionalRepr(std::optional<uint32_t> v) { return v ? StrCat(*v) : std::string("None"); }

std::string SchemeRepr(const PerTensorAffine& q) {
  return StrCat("PerTensorAffine(scale=", FloatRepr(q.scale()), ", zero_point=", q.zero_point(),
                ")");
}
std::string SchemeRepr(const PerChannelAffine& q) {
  if (q.symmetric()) {
    return StrCat("PerChannelAffine.symmetric(axis=", q.axis(),
                  ", scale_buffer_index=", q.scale_buffer_index(), ")");
  }
  return StrCat("PerChannelAffine.asymmetric(axis=", q.axis(),
                ", scale_buffer_index=", q.scale_buffer_index(),
                ", zero_point_buffer_index=", *q.zero_point_buffer_index(), ")");
}
std::string SchemeRepr(const PerBlockAffine& q) {
  const std::string common = StrCat("axis=", q.axis(), ", block_size=", q.block_size(),
                                    ", scale_buffer_index=", q.scale_buffer_index());
  const std::string type = StrCat("scale_type=", Quote(ElementTypeLongName(q.scale_type())));
  if (q.symmetric()) return StrCat("PerBlockAffine.symmetric(", common, ", ", type, ")");
  return StrCat("PerBlockAffine.asymmetric(", common,
                ", zero_point_buffer_index=", *q.zero_point_buffer_index(), ", ", type, ")");
}

std::string LayoutRepr(const RowMajorLayout&) { return "RowMajorLayout()"; }
std::string LayoutRepr(const StridedLayout& l) {
  std::string s = "StridedLayout(strides=[";
  for (size_t i = 0; i < l.strides.size(); ++i) s += StrCat(i > 0 ? ", " : "", l.strides[i]);
  return s + "])";
}
std::string LayoutRepr(const BlockPagedLayout& l) {
  return StrCat("BlockPagedLayout(page_size=", l.page_size(), ", num_pages=", l.num_pages(),
                ", paged_axis=", l.paged_axis(), ", num_seqs=", l.num_seqs(),
                ", kv_role=", Quote(format::KvRoleName(l.kv_role())),
                ", layer_index=", OptionalRepr(l.layer_index()), ", block_table_index_type=",
                Quote(format::IndexTypeName(l.block_table_index_type())), ")");
}

std::string BufferRepr(const BufferHandle& b) {
  return StrCat("BufferHandle(byte_size=", b.byte_size, ", alignment=", b.alignment,
                ", device=", Quote(NameOf<DeviceTag>(kDevices, b.device)),
                ", sync_mode=", Quote(NameOf<SyncMode>(kSyncModes, b.sync_mode)),
                ", memory_class=", Quote(NameOf<MemoryClass>(kMemoryClasses, b.memory_class)), ")");
}

std::string DescriptorRepr(const TensorDescriptor& d) {
  std::string buffers = "[";
  for (size_t i = 0; i < d.buffers().size(); ++i) {
    buffers += StrCat(i > 0 ? ", " : "", BufferRepr(d.buffers()[i]));
  }
  buffers += "]";
  const std::string layout = std::visit([](const auto& l) { return LayoutRepr(l); }, d.layout());
  const std::string quantization =
      d.quantization() ? std::visit([](const auto& q) { return SchemeRepr(q); }, *d.quantization())
                       : std::string("None");
  return StrCat("TensorDescriptor(dtype=", Quote(ElementTypeLongName(d.dtype())),
                ", shape=", ShapeRepr(d.shape()), ", byte_offset=", d.byte_offset(),
                ", layout=", layout, ", buffers=", buffers, ", quantization=", quantization, ")");
}

// Calls fn(seq_ptr, block_table) with both converted to the layout's index
// type, so a Python list or any NumPy integer array is accepted and a value
// that does not fit the declared type is refused, not wrapped.
template <typename Fn>
auto WithIndexBuffers(const BlockPagedLayout& layout, nb::handle seq_ptr, nb::handle block_table,
                      Fn fn) {
  if (layout.block_table_index_type() == IndexType::kU32) {
    const std::vector<uint32_t> s = ToInts<uint32_t>(seq_ptr, "seq_ptr");
    const std::vector<uint32_t> b = ToInts<uint32_t>(block_table, "block_table");
    return fn(std::span<const uint32_t>(s), std::span<const uint32_t>(b));
  }
  const std::vector<uint64_t> s = ToInts<uint64_t>(seq_ptr, "seq_ptr");
  const std::vector<uint64_t> b = ToInts<uint64_t>(block_table, "block_table");
  return fn(std::span<const uint64_t>(s), std::span<const uint64_t>(b));
}

// Registers __eq__ (False, not an error, against another type), __hash__
// (objects are immutable) and __repr__.
template <typename T, typename ReprFn>
void DefValueMethods(nb::class_<T>& cls, ReprFn repr) {
  cls.def("__eq__", [](const T& a,
                       nb::handle b) { return nb::isinstance<T>(b) && a == nb::cast<const T&>(b); })
      .def("__hash__", [repr](const T& a) { return nb::hash(nb::str(repr(a).c_str())); })
      .def("__repr__", repr);
}

// ------------------------------------------------------------ bindings

void BindElementTypes(nb::module_& m) {
  nb::enum_<ElementType> cls(m, "ElementType",
                             "Element types folio reads and writes; the values are Hurray's "
                             "wire tags. Each member is also a module attribute (folio.float32).");
  for (const auto& [name, type] : kElementTypes) {
    const std::string n(name);
    cls.value(n.c_str(), type);
  }
  for (const auto& [name, type] : kElementTypes) {
    const std::string n(name);
    m.attr(n.c_str()) = cls.attr(n.c_str());
  }
}

void BindQuantization(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<PerTensorAffine> per_tensor(
      m, "PerTensorAffine",
      "One scale and zero point for the whole tensor, inline in the descriptor: "
      "x = scale * (q - zero_point). PerTensorAffine.symmetric(scale) is shorthand for "
      "PerTensorAffine(scale, 0): a per-tensor scheme has no symmetric flag on the wire "
      "(its flags are 0). scale must be finite and non-zero; a descriptor also needs the "
      "zero point inside its storage type's range (i8 [-128, 127], u8 [0, 255]).");
  per_tensor
      .def(
          "__init__",
          [](PerTensorAffine* self, float scale, nb::handle zero_point) {
            new (self) PerTensorAffine(
                Unwrap(PerTensorAffine::Create(scale, ToInt<int32_t>(zero_point, "zero_point"))));
          },
          "scale"_a, "zero_point"_a,
          nb::sig("def __init__(self, scale: float, zero_point: int) -> None"))
      .def_static(
          "symmetric", [](float scale) { return Unwrap(PerTensorAffine::Symmetric(scale)); },
          "scale"_a)
      .def_prop_ro_static("tag", [](nb::handle) { return PerTensorAffine::tag(); })
      .def_prop_ro_static("name", [](nb::handle) { return PerTensorAffine::name(); })
      .def_prop_ro("scale", &PerTensorAffine::scale)
      .def_prop_ro("zero_point", &PerTensorAffine::zero_point)
      .def_prop_ro("is_symmetric", &PerTensorAffine::symmetric);
  DefValueMethods(per_tensor, [](const PerTensorAffine& q) { return SchemeRepr(q); });

  nb::class_<PerChannelAffine> per_channel(
      m, "PerChannelAffine",
      "One f32 scale (and, asymmetric, one zero point) per index along `axis`, in the buffers "
      "named by index. Build with PerChannelAffine.symmetric(axis, scale_buffer_index) or "
      ".asymmetric(axis, scale_buffer_index, zero_point_buffer_index).");
  per_channel
      .def_static(
          "symmetric",
          [](nb::handle axis, nb::handle scale_buffer_index) {
            return Unwrap(PerChannelAffine::Symmetric(
                ToInt<uint32_t>(axis, "axis"),
                ToInt<uint32_t>(scale_buffer_index, "scale_buffer_index")));
          },
          "axis"_a, "scale_buffer_index"_a,
          nb::sig("@staticmethod\n"
                  "def symmetric(axis: int, scale_buffer_index: int) -> PerChannelAffine"))
      .def_static(
          "asymmetric",
          [](nb::handle axis, nb::handle scale_buffer_index, nb::handle zero_point_buffer_index) {
            return Unwrap(PerChannelAffine::Asymmetric(
                ToInt<uint32_t>(axis, "axis"),
                ToInt<uint32_t>(scale_buffer_index, "scale_buffer_index"),
                ToInt<uint32_t>(zero_point_buffer_index, "zero_point_buffer_index")));
          },
          "axis"_a, "scale_buffer_index"_a, "zero_point_buffer_index"_a,
          nb::sig("@staticmethod\n"
                  "def asymmetric(axis: int, scale_buffer_index: int, "
                  "zero_point_buffer_index: int) -> PerChannelAffine"))
      .def_prop_ro_static("tag", [](nb::handle) { return PerChannelAffine::tag(); })
      .def_prop_ro_static("name", [](nb::handle) { return PerChannelAffine::name(); })
      .def_prop_ro("axis", &PerChannelAffine::axis)
      .def_prop_ro("scale_buffer_index", &PerChannelAffine::scale_buffer_index)
      .def_prop_ro("zero_point_buffer_index", &PerChannelAffine::zero_point_buffer_index)
      .def_prop_ro("scale_type", &PerChannelAffine::scale_type)
      .def_prop_ro("is_symmetric", &PerChannelAffine::symmetric);
  DefValueMethods(per_channel, [](const PerChannelAffine& q) { return SchemeRepr(q); });

  nb::class_<PerBlockAffine> per_block(
      m, "PerBlockAffine",
      "One scale (float16, bfloat16 or float32) per `block_size` run along `axis` (a power of "
      "two >= 2), in the buffers named by index. Build with PerBlockAffine.symmetric(axis, "
      "block_size, scale_buffer_index, scale_type) or .asymmetric(axis, block_size, "
      "scale_buffer_index, zero_point_buffer_index, scale_type).");
  per_block
      .def_static(
          "symmetric",
          [](nb::handle axis, nb::handle block_size, nb::handle scale_buffer_index,
             nb::handle scale_type) {
            return Unwrap(PerBlockAffine::Symmetric(
                ToInt<uint32_t>(axis, "axis"), ToInt<uint32_t>(block_size, "block_size"),
                ToInt<uint32_t>(scale_buffer_index, "scale_buffer_index"),
                ToElementType(scale_type, "scale_type")));
          },
          "axis"_a, "block_size"_a, "scale_buffer_index"_a, "scale_type"_a,
          nb::sig("@staticmethod\n"
                  "def symmetric(axis: int, block_size: int, scale_buffer_index: int, "
                  "scale_type: ElementType | str) -> PerBlockAffine"))
      .def_static(
          "asymmetric",
          [](nb::handle axis, nb::handle block_size, nb::handle scale_buffer_index,
             nb::handle zero_point_buffer_index, nb::handle scale_type) {
            return Unwrap(PerBlockAffine::Asymmetric(
                ToInt<uint32_t>(axis, "axis"), ToInt<uint32_t>(block_size, "block_size"),
                ToInt<uint32_t>(scale_buffer_index, "scale_buffer_index"),
                ToInt<uint32_t>(zero_point_buffer_index, "zero_point_buffer_index"),
                ToElementType(scale_type, "scale_type")));
          },
          "axis"_a, "block_size"_a, "scale_buffer_index"_a, "zero_point_buffer_index"_a,
          "scale_type"_a,
          nb::sig("@staticmethod\n"
                  "def asymmetric(axis: int, block_size: int, scale_buffer_index: int, "
                  "zero_point_buffer_index: int, scale_type: ElementType | str) -> "
                  "PerBlockAffine"))
      .def_prop_ro_static("tag", [](nb::handle) { return PerBlockAffine::tag(); })
      .def_prop_ro_static("name", [](nb::handle) { return PerBlockAffine::name(); })
      .def_prop_ro("axis", &PerBlockAffine::axis)
      .def_prop_ro("block_size", &PerBlockAffine::block_size)
      .def_prop_ro("scale_buffer_index", &PerBlockAffine::scale_buffer_index)
      .def_prop_ro("zero_point_buffer_index", &PerBlockAffine::zero_point_buffer_index)
      .def_prop_ro("scale_type", &PerBlockAffine::scale_type)
      .def_prop_ro("is_symmetric", &PerBlockAffine::symmetric);
  DefValueMethods(per_block, [](const PerBlockAffine& q) { return SchemeRepr(q); });
}

constexpr const char* kBlockPagedDoc = R"doc(
The block-paged layout (Hurray layout tag 0x0A): a paged KV cache.

BlockPagedLayout(page_size, num_pages, paged_axis, num_seqs, kv_role="key",
                 layer_index=None, block_table_index_type="uint32")

The tensor's shape is [total_tokens, num_heads, head_dim] and its buffers are
0 page_pool [num_pages, page_size, num_heads, head_dim], 1 block_table (every
sequence's physical page ids, concatenated) and 2 seq_ptr (num_seqs + 1 CSR
offsets into block_table), both of block_table_index_type ("uint32" or
"uint64"); kv_role is "key", "value" or "fused"; paged_axis must be 0.

Immutable. Every refusal raises folio.InvalidDescriptorError (a ValueError)
naming the field and value.
)doc";

void BindLayouts(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<RowMajorLayout> row_major(m, "RowMajorLayout",
                                       "The row-major layout (tag 0x01); it has no fields.");
  row_major.def(nb::init<>())
      .def_prop_ro_static("tag", [](nb::handle) { return RowMajorLayout::tag(); })
      .def_prop_ro_static("name", [](nb::handle) { return RowMajorLayout::name(); });
  DefValueMethods(row_major, [](const RowMajorLayout& l) { return LayoutRepr(l); });

  nb::class_<StridedLayout> strided(
      m, "StridedLayout",
      "The strided layout (tag 0x03): one signed stride per dimension, in elements (zero and "
      "negative strides allowed).");
  strided
      .def(
          "__init__",
          [](StridedLayout* self, nb::handle strides) {
            new (self) StridedLayout{ToInts<int64_t>(strides, "strides")};
          },
          "strides"_a, nb::sig("def __init__(self, strides: Sequence[int]) -> None"))
      .def_prop_ro_static("tag", [](nb::handle) { return StridedLayout::tag(); })
      .def_prop_ro_static("name", [](nb::handle) { return StridedLayout::name(); })
      .def_prop_ro("strides", [](const StridedLayout& l) { return l.strides; });
  DefValueMethods(strided, [](const StridedLayout& l) { return LayoutRepr(l); });

  nb::class_<BlockPagedLayout> paged(m, "BlockPagedLayout", kBlockPagedDoc);
  paged
      .def(
          "__init__",
          [](BlockPagedLayout* self, nb::handle page_size, nb::handle num_pages,
             nb::handle paged_axis, nb::handle num_seqs, std::string_view kv_role,
             nb::handle layer_index, std::string_view index_type) {
            const auto role = format::ParseKvRole(kv_role);
            if (!role.ok()) RaiseDescriptorError(role.error().message());
            const auto type = format::ParseIndexType(index_type);
            if (!type.ok()) RaiseDescriptorError(type.error().message());
            std::optional<uint32_t> layer;
            if (!layer_index.is_none()) layer = ToInt<uint32_t>(layer_index, "layer_index");
            new (self) BlockPagedLayout(Unwrap(BlockPagedLayout::Create(
                ToInt<uint32_t>(page_size, "page_size"), ToInt<uint64_t>(num_pages, "num_pages"),
                ToInt<uint32_t>(paged_axis, "paged_axis"), ToInt<uint32_t>(num_seqs, "num_seqs"),
                *role, layer, *type)));
          },
          "page_size"_a, "num_pages"_a, "paged_axis"_a, "num_seqs"_a, "kv_role"_a = "key",
          "layer_index"_a = nb::none(), "block_table_index_type"_a = "uint32",
          nb::sig("def __init__(self, page_size: int, num_pages: int, paged_axis: int, "
                  "num_seqs: int, kv_role: str = 'key', layer_index: int | None = None, "
                  "block_table_index_type: str = 'uint32') -> None"))
      .def_prop_ro_static("tag", [](nb::handle) { return BlockPagedLayout::tag(); })
      .def_prop_ro_static("name", [](nb::handle) { return BlockPagedLayout::name(); })
      .def_prop_ro_static(
          "buffer_count", [](nb::handle) { return BlockPagedLayout::buffer_count(); },
          "Buffers of the layout itself: page_pool, block_table, seq_ptr.")
      .def_static(
          "buffer_count_with",
          [](nb::handle scheme) {
            return BlockPagedLayout::BufferCountWith(ToScheme(scheme, "scheme"));
          },
          "scheme"_a,
          nb::sig("@staticmethod\n"
                  "def buffer_count_with(scheme: PerTensorAffine | PerChannelAffine | "
                  "PerBlockAffine) -> int"),
          "Buffers with a quantization scheme: 3 per-tensor, 4 symmetric per-channel or "
          "per-block (+ scales), 5 asymmetric (+ zero points).")
      .def_prop_ro("page_size", &BlockPagedLayout::page_size)
      .def_prop_ro("num_pages", &BlockPagedLayout::num_pages)
      .def_prop_ro("paged_axis", &BlockPagedLayout::paged_axis)
      .def_prop_ro("num_seqs", &BlockPagedLayout::num_seqs)
      .def_prop_ro("kv_role",
                   [](const BlockPagedLayout& l) { return format::KvRoleName(l.kv_role()); })
      .def_prop_ro("layer_index", &BlockPagedLayout::layer_index, "None when not layer-scoped.")
      .def_prop_ro("block_table_index_type",
                   [](const BlockPagedLayout& l) {
                     return format::IndexTypeName(l.block_table_index_type());
                   })
      .def(
          "validate_against_shape",
          [](const BlockPagedLayout& l, nb::handle shape) {
            ThrowIfFormatError(l.ValidateAgainstShape(ToShape(shape, "shape")));
          },
          "shape"_a,
          nb::sig("def validate_against_shape(self, shape: Sequence[int | None]) -> None"),
          "Checks shape is [total_tokens, num_heads, head_dim] (None = dynamic, allowed for "
          "total_tokens only) and that the pool's element count fits in u64.")
      .def(
          "pool_elements",
          [](const BlockPagedLayout& l, nb::handle shape) {
            return Unwrap(l.PoolElements(ToShape(shape, "shape")));
          },
          "shape"_a, nb::sig("def pool_elements(self, shape: Sequence[int | None]) -> int"),
          "num_pages * page_size * num_heads * head_dim for a valid shape.")
      .def(
          "validate_index_buffers",
          [](const BlockPagedLayout& l, nb::handle seq_ptr, nb::handle block_table) {
            ThrowIfFormatError(WithIndexBuffers(l, seq_ptr, block_table, [&](auto s, auto b) {
              return l.ValidateIndexBuffers(s, b);
            }));
          },
          "seq_ptr"_a, "block_table"_a,
          nb::sig("def validate_index_buffers(self, seq_ptr: Sequence[int] | numpy.ndarray, "
                  "block_table: Sequence[int] | numpy.ndarray) -> None"),
          "Checks every invariant of the index buffers (lists or 1-D NumPy integer arrays, "
          "converted to block_table_index_type): num_seqs + 1 seq_ptr entries, seq_ptr[0] == 0, "
          "non-decreasing, seq_ptr[-1] == len(block_table), every page id < num_pages.")
      .def(
          "validate_quantization_compatibility",
          [](const BlockPagedLayout& l, nb::handle scheme) {
            ThrowIfFormatError(l.ValidateQuantizationCompatibility(ToScheme(scheme, "scheme")));
          },
          "scheme"_a,
          nb::sig("def validate_quantization_compatibility(self, scheme: PerTensorAffine | "
                  "PerChannelAffine | PerBlockAffine) -> None"),
          "Per-tensor always; per-channel on axis 1 or 2 only; per-block on axis 0 with "
          "block_size == page_size only. TypeError for anything but a scheme object.")
      .def(
          "element_offset",
          [](const BlockPagedLayout& l, nb::handle shape, nb::handle seq_ptr,
             nb::handle block_table, nb::handle seq, nb::handle token, nb::handle head,
             nb::handle dim) {
            const std::vector<uint64_t> s = ToShape(shape, "shape");
            const format::PagedElement e{
                ToInt<uint64_t>(seq, "seq"), ToInt<uint64_t>(token, "token"),
                ToInt<uint64_t>(head, "head"), ToInt<uint64_t>(dim, "dim")};
            return Unwrap(WithIndexBuffers(l, seq_ptr, block_table, [&](auto sp, auto bt) {
              return l.ElementOffset(s, sp, bt, e);
            }));
          },
          "shape"_a, "seq_ptr"_a, "block_table"_a, "seq"_a, "token"_a, "head"_a, "dim"_a,
          nb::sig("def element_offset(self, shape: Sequence[int | None], "
                  "seq_ptr: Sequence[int] | numpy.ndarray, "
                  "block_table: Sequence[int] | numpy.ndarray, seq: int, token: int, head: int, "
                  "dim: int) -> int"),
          "The page_pool element index of (seq, token, head, dim): ((block_table[seq_ptr[seq] + "
          "token // page_size] * page_size + token % page_size) * num_heads + head) * head_dim "
          "+ dim. Every value it reads is checked; a position out of range raises.");
  DefValueMethods(paged, [](const BlockPagedLayout& l) { return LayoutRepr(l); });
}

void BindBufferHandle(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<BufferHandle> cls(
      m, "BufferHandle",
      "One entry of a descriptor's buffer table: byte_size, alignment (a power of two, >= 64 "
      "when byte_size > 0; checked by TensorDescriptor), device ('cpu', 'cuda', 'rocm', "
      "'metal', 'vulkan', 'webgpu', 'hexagon', 'level_zero', 'opencl'), sync_mode "
      "('producer_synced', 'event', 'consumer_stream') and memory_class ('standard', "
      "'host_pinned', 'unified', 'peer').");
  cls.def(
         "__init__",
         [](BufferHandle* self, nb::handle byte_size, nb::handle alignment, std::string_view device,
            std::string_view sync_mode, std::string_view memory_class) {
           new (self) BufferHandle{
               ToInt<uint64_t>(byte_size, "byte_size"), ToInt<uint32_t>(alignment, "alignment"),
               ParseName<DeviceTag>(kDevices, device, "device"),
               ParseName<SyncMode>(kSyncModes, sync_mode, "sync_mode"),
               ParseName<MemoryClass>(kMemoryClasses, memory_class, "memory_class")};
         },
         "byte_size"_a, "alignment"_a = 64, "device"_a = "cpu", "sync_mode"_a = "producer_synced",
         "memory_class"_a = "standard",
         nb::sig("def __init__(self, byte_size: int, alignment: int = 64, device: str = 'cpu', "
                 "sync_mode: str = 'producer_synced', memory_class: str = 'standard') -> None"))
      .def_ro("byte_size", &BufferHandle::byte_size)
      .def_ro("alignment", &BufferHandle::alignment)
      .def_prop_ro("device",
                   [](const BufferHandle& b) { return NameOf<DeviceTag>(kDevices, b.device); })
      .def_prop_ro("sync_mode",
                   [](const BufferHandle& b) { return NameOf<SyncMode>(kSyncModes, b.sync_mode); })
      .def_prop_ro("memory_class", [](const BufferHandle& b) {
        return NameOf<MemoryClass>(kMemoryClasses, b.memory_class);
      });
  DefValueMethods(cls, [](const BufferHandle& b) { return BufferRepr(b); });
}

// A BufferHandle, or a plain integer byte size (a standard CPU buffer with
// alignment 64).
std::vector<BufferHandle> ToBuffers(nb::handle h) {
  if (!PySequence_Check(h.ptr()) || nb::isinstance<nb::str>(h)) {
    RaiseTypeError(
        StrCat("buffers must be a list of BufferHandle or byte sizes, got ", TypeName(h)));
  }
  std::vector<BufferHandle> out;
  for (nb::handle item : nb::cast<nb::sequence>(h)) {
    if (nb::isinstance<BufferHandle>(item)) {
      out.push_back(nb::cast<BufferHandle>(item));
    } else {
      out.push_back(BufferHandle{ToInt<uint64_t>(item, StrCat("buffers[", out.size(), "]"))});
    }
  }
  return out;
}

constexpr const char* kDescriptorDoc = R"doc(
A Hurray tensor descriptor: element type, shape, layout, buffer table and
optional quantization scheme (docs/spec/hurray-descriptor.md). It describes
the buffers; it does not hold their bytes.

TensorDescriptor(dtype, shape, byte_offset, layout, buffers, quantization=None)
runs every check of the format (TensorDescriptor::Create), as does
TensorDescriptor.from_bytes(data), so every object is valid, to_bytes() cannot
fail, and from_bytes(x).to_bytes() == x for every x from_bytes accepts.

dtype is a folio.ElementType or its name; shape a list of ints (None for a
dynamic dimension); buffers a list of BufferHandle or plain byte sizes.
Immutable. Refusals raise folio.InvalidDescriptorError (a ValueError),
including valid Hurray features folio does not implement.
)doc";

void BindDescriptor(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<TensorDescriptor> cls(m, "TensorDescriptor", kDescriptorDoc);
  cls.def(
         "__init__",
         [](TensorDescriptor* self, nb::handle dtype, nb::handle shape, nb::handle byte_offset,
            nb::handle layout, nb::handle buffers, nb::handle quantization) {
           std::optional<QuantizationScheme> scheme;
           if (!quantization.is_none()) scheme = ToScheme(quantization, "quantization");
           new (self) TensorDescriptor(Unwrap(TensorDescriptor::Create(
               ToElementType(dtype, "dtype"), ToShape(shape, "shape"),
               ToInt<uint64_t>(byte_offset, "byte_offset"), ToLayout(layout, "layout"),
               ToBuffers(buffers), std::move(scheme))));
         },
         "dtype"_a, "shape"_a, "byte_offset"_a, "layout"_a, "buffers"_a,
         "quantization"_a = nb::none(),
         nb::sig("def __init__(self, dtype: ElementType | str, shape: Sequence[int | None], "
                 "byte_offset: int, layout: RowMajorLayout | StridedLayout | BlockPagedLayout, "
                 "buffers: Sequence[BufferHandle | int], quantization: PerTensorAffine | "
                 "PerChannelAffine | PerBlockAffine | None = None) -> None"))
      .def_static(
          "from_bytes",
          [](nb::handle data) {
            Py_buffer view;
            if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
              PyErr_Clear();
              RaiseTypeError(
                  StrCat("from_bytes needs bytes, bytearray or a contiguous "
                         "memoryview, got ",
                         TypeName(data)));
            }
            // Decoding copies what it keeps, so the view is released before
            // any error is raised.
            Result<TensorDescriptor> d = TensorDescriptor::FromBytes(
                {static_cast<const std::byte*>(view.buf), static_cast<size_t>(view.len)});
            PyBuffer_Release(&view);
            return Unwrap(std::move(d));
          },
          "data"_a,
          nb::sig("@staticmethod\n"
                  "def from_bytes(data: bytes | bytearray | memoryview) -> TensorDescriptor"))
      .def("to_bytes",
           [](const TensorDescriptor& d) {
             const std::vector<std::byte> b = d.ToBytes();
             return nb::bytes(b.data(), b.size());
           })
      .def("__bytes__",
           [](const TensorDescriptor& d) {
             const std::vector<std::byte> b = d.ToBytes();
             return nb::bytes(b.data(), b.size());
           })
      .def_prop_ro("encoded_size", &TensorDescriptor::encoded_size)
      .def_prop_ro("dtype", &TensorDescriptor::dtype)
      .def_prop_ro(
          "shape", [](const TensorDescriptor& d) { return ShapeToPython(d.shape()); },
          "A list of ints; None marks a dynamic dimension.")
      .def_prop_ro("rank", &TensorDescriptor::rank)
      .def_prop_ro("byte_offset", &TensorDescriptor::byte_offset)
      .def_prop_ro("layout", [](const TensorDescriptor& d) { return d.layout(); })
      .def_prop_ro("buffers",
                   [](const TensorDescriptor& d) {
                     return std::vector<BufferHandle>(d.buffers().begin(), d.buffers().end());
                   })
      .def_prop_ro("quantization", [](const TensorDescriptor& d) { return d.quantization(); });
  cls.def("__eq__",
          [](const TensorDescriptor& a, nb::handle b) {
            return nb::isinstance<TensorDescriptor>(b) && a == nb::cast<const TensorDescriptor&>(b);
          })
      .def("__hash__",
           [](const TensorDescriptor& d) {
             const std::vector<std::byte> b = d.ToBytes();
             return nb::hash(nb::bytes(b.data(), b.size()));
           })
      .def("__repr__", &DescriptorRepr);
}

}  // namespace

void BindFormat(nb::module_& m) {
  RegisterDescriptorError(m);
  BindElementTypes(m);
  BindQuantization(m);
  BindLayouts(m);
  BindBufferHandle(m);
  BindDescriptor(m);
}

}  // namespace folio::python
