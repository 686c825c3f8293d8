// The K/V storage of the host backends (cpu, reference): for every storage
// slot and role one contiguous, 64-byte aligned host buffer in the layout
// of kv_storage.h, and beside it, for a quantized dtype, the row scales.
// Its views are host pointers, which the host kernels read directly.
#ifndef FOLIO_KV_HOST_KV_STORAGE_H_
#define FOLIO_KV_HOST_KV_STORAGE_H_

#include <memory>

#include "folio/core/status.h"
#include "folio/kv/kv_storage.h"

namespace folio::kv {

// A host storage of `shape`, every row poisoned (NaN; kv_storage.h).
// Errors: a zero field (InvalidArgument, naming it); the byte size of the
// pools overflowing (OutOfRange).
Result<std::unique_ptr<KvStorage>> MakeHostKvStorage(const KvStorageShape& shape);

}  // namespace folio::kv

#endif  // FOLIO_KV_HOST_KV_STORAGE_H_
