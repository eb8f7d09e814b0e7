#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace strata {
namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& path, LoadMode mode) : path_(path), mode_(mode) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) fail("cannot stat '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("'{}' is not a regular file", path);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    static const uint8_t empty = 0;
    data_ = &empty;
    return;
  }
  if (mode == LoadMode::mmap) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (p == MAP_FAILED) fail("cannot mmap '{}' ({} bytes): {}", path, size_, std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
    // Weights are read front to back, layer after layer: let the kernel read ahead.
    ::madvise(p, size_, MADV_WILLNEED);
    return;
  }
  // LoadMode::ram: a 2 MiB-aligned buffer backed by transparent huge pages where the kernel
  // allows, so streaming weights takes fewer TLB misses than 4 KiB pages (or the page cache).
  if (::posix_memalign(&owned_, size_t{2} << 20, size_) != 0) {
    fail("cannot allocate {} bytes to load '{}' into RAM", size_, path);
  }
  ::madvise(owned_, size_, MADV_HUGEPAGE);
  size_t done = 0;
  while (done < size_) {
    ssize_t got = ::pread(file.fd, static_cast<uint8_t*>(owned_) + done, size_ - done,
                          static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      std::free(owned_);
      owned_ = nullptr;
      fail("cannot read '{}' at offset {}: {}", path, done,
           got == 0 ? "unexpected end of file" : std::strerror(errno));
    }
    done += static_cast<size_t>(got);
  }
  data_ = static_cast<const uint8_t*>(owned_);
}

MappedFile::~MappedFile() {
  if (owned_) {
    std::free(owned_);
  } else if (size_ > 0 && data_) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
}

}  // namespace strata
