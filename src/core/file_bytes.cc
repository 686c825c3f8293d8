#include "folio/core/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace folio {

void FileBytes::Unmapper::operator()(void* addr) const { ::munmap(addr, size); }

Result<FileBytes> FileBytes::Map(const std::filesystem::path& path) {
  const std::string source = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const bool absent = errno == ENOENT;
    const std::string what = source + ": cannot open: " + std::strerror(errno);
    return absent ? Status::NotFound(what) : Status::IoError(what);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IoError(source + ": not a readable regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  FileBytes file;
  if (size > 0) {  // mmap rejects length 0
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const std::string what = std::strerror(errno);
      ::close(fd);
      return Status::IoError(source + ": cannot mmap " + std::to_string(size) + " bytes: " + what);
    }
    file.mapping_ = std::unique_ptr<void, Unmapper>(addr, Unmapper{size});
    file.bytes_ = {static_cast<const std::byte*>(addr), size};
  }
  ::close(fd);  // the mapping keeps the file open
  return file;
}

FileBytes FileBytes::Own(std::vector<std::byte> bytes) {
  FileBytes file;
  file.owned_ = std::move(bytes);
  file.bytes_ = file.owned_;
  return file;
}

}  // namespace folio
