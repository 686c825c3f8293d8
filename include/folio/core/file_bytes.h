// A file's bytes, memory-mapped read-only, or an owned buffer standing in
// for one. Readers of model files (safetensors, GGUF) keep one and hand out
// spans into it; moving it keeps those spans valid.
//
// A mapped file must not shrink while mapped: reading a page past a new end
// raises SIGBUS (replacing the file by rename, as folio's writers do, is
// safe).
#ifndef FOLIO_CORE_FILE_BYTES_H_
#define FOLIO_CORE_FILE_BYTES_H_

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "folio/core/status.h"

namespace folio {

class FileBytes {
 public:
  // Maps `path` read-only (an empty file gives an empty span). NotFound if
  // it does not exist; IoError if it is not a readable regular file or the
  // mapping fails. Messages name the path.
  static Result<FileBytes> Map(const std::filesystem::path& path);
  static FileBytes Own(std::vector<std::byte> bytes);

  FileBytes() = default;  // empty
  FileBytes(FileBytes&&) noexcept = default;
  FileBytes& operator=(FileBytes&&) noexcept = default;

  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  struct Unmapper {
    size_t size;
    void operator()(void* addr) const;
  };
  std::unique_ptr<void, Unmapper> mapping_{nullptr, Unmapper{0}};
  std::vector<std::byte> owned_;
  std::span<const std::byte> bytes_;
};

}  // namespace folio

#endif  // FOLIO_CORE_FILE_BYTES_H_
