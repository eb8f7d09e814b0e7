#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
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

MappedFile::MappedFile(const std::string& path, LoadMode mode, std::span<const ByteRange> only)
    : path_(path), mode_(mode) {
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
  for (const ByteRange& r : only) {
    STRATA_CHECK(r.offset <= size_ && r.size <= size_ - r.offset,
                 "'{}': bytes {}..{} lie outside its {} bytes", path, r.offset, r.offset + r.size,
                 size_);
  }
  if (mode == LoadMode::mmap) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (p == MAP_FAILED) fail("cannot mmap '{}' ({} bytes): {}", path, size_, std::strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
    // Weights are read front to back, layer after layer: let the kernel read ahead (what is used).
    if (only.empty()) {
      ::madvise(p, size_, MADV_WILLNEED);
    } else {
      const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      for (const ByteRange& r : only) {
        const uint64_t begin = r.offset / page * page;
        const uint64_t end = std::min<uint64_t>(r.offset + r.size, size_);
        if (end > begin) ::madvise(static_cast<uint8_t*>(p) + begin, end - begin, MADV_WILLNEED);
      }
    }
    return;
  }
  // LoadMode::ram: a 2 MiB-aligned buffer of fresh anonymous memory (zeros until written), backed
  // by transparent huge pages where the kernel allows, so streaming weights takes fewer TLB misses
  // than 4 KiB pages (or the page cache).
  constexpr size_t kHugePage = size_t{2} << 20;
  owned_size_ = size_ + kHugePage;
  void* base =
      ::mmap(nullptr, owned_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) fail("cannot allocate {} bytes to load '{}' into RAM", size_, path);
  owned_ = base;
  auto* buffer = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) /
                                            kHugePage * kHugePage);
  ::madvise(buffer, size_, MADV_HUGEPAGE);
  // Untouched parts of the buffer are never committed: a partial read costs only what it reads.
  const ByteRange whole{0, size_};
  for (const ByteRange& r : only.empty() ? std::span<const ByteRange>(&whole, 1) : only) {
    size_t done = 0;
    while (done < r.size) {
      const size_t at = static_cast<size_t>(r.offset) + done;
      ssize_t got = ::pread(file.fd, buffer + at, r.size - done, static_cast<off_t>(at));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::munmap(owned_, owned_size_);
        owned_ = nullptr;
        fail("cannot read '{}' at offset {}: {}", path, at,
             got == 0 ? "unexpected end of file" : std::strerror(errno));
      }
      done += static_cast<size_t>(got);
    }
  }
  data_ = buffer;
}

MappedFile::~MappedFile() {
  if (owned_) {
    ::munmap(owned_, owned_size_);
  } else if (size_ > 0 && data_) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
}

}  // namespace strata
